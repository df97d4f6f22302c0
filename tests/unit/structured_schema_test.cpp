// JSON Schema compilation (src/structured/json_schema.h) checked byte by byte:
// documents the grammar must accept and near misses it must refuse, and every
// schema feature tandem refuses giving an error that names the place and the
// keyword.
#include <gtest/gtest.h>

#include <cstdlib>

#include <nlohmann/json.hpp>

#include "structured/grammar_matcher.h"
#include "structured/json_lexical.h"
#include "structured/json_schema.h"
#include "support/byte_vocabulary.h"
#include "support/test_util.h"

namespace tandem::structured {
namespace {

using ojson = nlohmann::ordered_json;

class Doc {
 public:
  explicit Doc(const std::string& schema) : grammar_(compile_json_schema(ojson::parse(schema))) {}
  explicit Doc(std::shared_ptr<const Grammar> g) : grammar_(std::move(g)) {}

  // Whether `text` is a whole document of the grammar.
  bool accepts(const std::string& text) const {
    GrammarMatcher m(grammar_, test::byte_vocabulary());
    return m.accept_bytes(text) && m.is_complete();
  }
  // Whether `text` is a prefix of some document.
  bool prefix(const std::string& text) const {
    GrammarMatcher m(grammar_, test::byte_vocabulary());
    return m.accept_bytes(text);
  }

 private:
  std::shared_ptr<const Grammar> grammar_;
};

// The error that compiling `schema` raises; "" when it compiles.
std::string error_of(const std::string& schema) {
  return test::error_of([&] { compile_json_schema(ojson::parse(schema)); });
}

TEST(StructuredSchema, AnyJsonObject) {
  Doc d(any_json_object_grammar());
  for (const char* ok :
       {"{}", "{ }", R"({"a":1})", R"({"a": 1, "b": [true, null, "x", []], "c": {"d": -1.5e3}})",
        "{\n  \"a\": {\"b\": {\"c\": [1, 2.25, -0, 1E+2]}}\n}", R"({"":""})",
        R"({"a":"\u00e9\n\t\"\\\/ \ud83d\ude00 é 😀"})"})
    EXPECT_TRUE(d.accepts(ok)) << ok;
  for (const char* bad : {"[]",
                          "1",
                          R"({"a"})",
                          R"({"a":1,})",
                          "{'a':1}",
                          R"({"a":01})",
                          " {}",
                          "{}\n",
                          R"({"a":1.})",
                          R"({"a":.5})",
                          R"({"a":+1})",
                          R"({"a":tru})",
                          R"({"a":"\x"})",
                          R"({"a":"\ud83d"})",
                          R"({"a":"\udc00"})",
                          "{\"a\":\"\x01\"}",
                          "{\"a\":\"\xC0\x80\"}",
                          "{\"a\":\"\xED\xA0\x80\"}",
                          "{\"a\":\"\xF4\x90\x80\x80\"}",
                          R"({"a":1}})"})
    EXPECT_FALSE(d.accepts(bad)) << bad;
  EXPECT_TRUE(d.prefix(R"({"a": [1, {"b")"));
  // Whitespace: one run per gap, "", " " or a newline and at most kMaxIndent
  // spaces or tabs (json_lexical.h).
  EXPECT_TRUE(d.accepts("{\n" + std::string(kMaxIndent, ' ') + "}"));
  EXPECT_TRUE(d.accepts("{\n\t\t\"a\": 1\n}"));
  EXPECT_FALSE(d.prefix("{\n" + std::string(kMaxIndent + 1, ' ')));
  EXPECT_FALSE(d.prefix("{  "));
  EXPECT_FALSE(d.prefix("{\n\n"));
  EXPECT_FALSE(d.prefix("{ \n"));
  EXPECT_FALSE(d.prefix("{\r\n"));
  // Numbers are bounded in length.
  EXPECT_TRUE(d.accepts(R"({"a":)" + std::string(kMaxIntegerDigits, '9') + "}"));
  EXPECT_FALSE(d.prefix(R"({"a":)" + std::string(kMaxIntegerDigits + 1, '9')));
  // Nesting is bounded: kMaxFreeDepth containers deep, the top object included.
  // {"k": v} with v `levels` containers deep, objects and arrays in turn.
  auto nested = [](int levels) {
    std::string v = "1";
    for (int i = 0; i < levels; ++i) v = i % 2 ? "[" + v + "]" : R"({"k":)" + v + "}";
    return R"({"k":)" + v + "}";
  };
  EXPECT_TRUE(d.accepts(nested(kMaxFreeDepth - 1))) << nested(kMaxFreeDepth - 1);
  EXPECT_FALSE(d.accepts(nested(kMaxFreeDepth))) << nested(kMaxFreeDepth);
}

TEST(StructuredSchema, ObjectPropertiesInSchemaOrder) {
  Doc d(R"({"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
            "tags": {"type": "array", "items": {"type": "string"}}}, "required": ["name", "tags"]})");
  EXPECT_TRUE(d.accepts(R"({"name":"Ann","age":31,"tags":[]})"));
  EXPECT_TRUE(d.accepts(R"({"name": "Ann", "tags": ["a", "b"]})"));
  EXPECT_TRUE(d.accepts("{\n  \"name\": \"Ann\",\n  \"tags\": [\n    \"a\"\n  ]\n}"));
  EXPECT_FALSE(d.accepts(R"({"age":31,"name":"Ann","tags":[]})"));  // order
  EXPECT_FALSE(d.accepts(R"({"name":"Ann"})"));                     // required tags
  EXPECT_FALSE(d.accepts(R"({"name":"Ann","tags":[],"x":1})"));     // no other properties
  EXPECT_FALSE(d.accepts(R"({"name":"Ann","age":3.5,"tags":[]})"));
  EXPECT_FALSE(d.accepts(R"({"name":"Ann",,"tags":[]})"));
  // All optional: the empty object and any in-order subset.
  Doc o(
      R"({"properties": {"a": {"type": "integer"}, "b": {"type": "integer"}, "c": {"type": "integer"}}})");
  for (const char* ok : {"{}", R"({"a":1})", R"({"b":1})", R"({"c":1})", R"({"a":1,"c":3})",
                         R"({"b":1,"c":3})", R"({"a":1,"b":2,"c":3})"})
    EXPECT_TRUE(o.accepts(ok)) << ok;
  for (const char* bad : {R"({"b":1,"a":1})", R"({,"a":1})", R"({"a":1,})", R"({"a":1 "b":2})"})
    EXPECT_FALSE(o.accepts(bad)) << bad;
}

// Each gap between tokens holds one bounded run of whitespace: runs cannot
// chain (after a value, then after the comma) into blank lines. SmolLM2 once
// wrote {"name": "Human,"\n   \n\n\n\n,"age": ... until max_tokens ran out.
TEST(StructuredSchema, WhitespaceIsOneBoundedRunPerGap) {
  Doc d(R"({"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
            "tags": {"type": "array", "items": {"type": "integer"}}}, "required": ["name", "age"]})");
  EXPECT_TRUE(d.accepts(R"({"name":"Human","age":3})"));
  EXPECT_TRUE(d.accepts("{\n  \"name\" : \"Human\" ,\n  \"age\": 3,\n\t\"tags\": [ 1 ,\n 2 ]\n}"));
  EXPECT_FALSE(d.prefix("{\"name\": \"Human,\"\n   \n"));
  EXPECT_FALSE(d.prefix("{\"name\": \"Human\"\n\n"));
  EXPECT_FALSE(d.prefix("{\"name\": \"Human\",  "));
  EXPECT_FALSE(d.prefix("{\"name\"  :"));
  EXPECT_FALSE(d.prefix("{\"name\": \"Human\", \"age\": 3, \"tags\": [1\n\n"));
  // At most 1 + kMaxIndent bytes per gap: the longest gap is bounded.
  const std::string indent(kMaxIndent, '\t');
  EXPECT_TRUE(d.accepts("{\n" + indent + "\"name\":\"x\",\"age\":1\n" + indent + "}"));
  EXPECT_FALSE(d.prefix("{\n" + indent + " "));
}

TEST(StructuredSchema, MapsAndClosedObjects) {
  Doc map(R"({"type": "object", "additionalProperties": {"type": "integer"}})");
  EXPECT_TRUE(map.accepts(R"({"x":1,"y":2})"));
  EXPECT_FALSE(map.accepts(R"({"x":"1"})"));
  Doc closed(R"({"type": "object", "additionalProperties": false})");
  EXPECT_TRUE(closed.accepts("{}"));
  EXPECT_FALSE(closed.accepts(R"({"x":1})"));
  Doc req(R"({"type": "object", "required": ["id"]})");
  EXPECT_TRUE(req.accepts(R"({"id":[1,{"a":null}]})"));
  EXPECT_FALSE(req.accepts("{}"));
}

TEST(StructuredSchema, IntegerRangesExactly) {
  for (auto [lo, hi] : {std::pair{-15, 123}, std::pair{0, 9}, std::pair{-100, -7},
                        std::pair{10, 10}, std::pair{1, 1000}, std::pair{-9, 99}}) {
    Doc d(fmt::format(R"({{"type": "integer", "minimum": {}, "maximum": {}}})", lo, hi));
    for (int x = -1200; x <= 1200; ++x)
      ASSERT_EQ(d.accepts(std::to_string(x)), x >= lo && x <= hi)
          << x << " in [" << lo << "," << hi << "]";
    EXPECT_FALSE(d.accepts("-0"));
    EXPECT_FALSE(d.accepts("00"));
  }
  Doc ex(R"({"type": "integer", "exclusiveMinimum": 2.5, "exclusiveMaximum": 7})");
  for (int x = -3; x <= 10; ++x) EXPECT_EQ(ex.accepts(std::to_string(x)), x >= 3 && x <= 6) << x;
  Doc pos(R"({"type": "integer", "minimum": 1})");
  EXPECT_TRUE(pos.accepts("123456789"));
  EXPECT_FALSE(pos.accepts("0"));
  EXPECT_FALSE(pos.accepts("-5"));
}

TEST(StructuredSchema, NumbersBooleansNull) {
  Doc n(R"({"type": "number"})");
  for (const char* ok : {"0", "-0", "1.5", "-12.25e-3", "3E7", "0.000"})
    EXPECT_TRUE(n.accepts(ok)) << ok;
  for (const char* bad : {"01", "1.", ".1", "1e", "--1", "NaN", "Infinity"})
    EXPECT_FALSE(n.accepts(bad)) << bad;
  Doc b(R"({"type": ["boolean", "null"]})");
  EXPECT_TRUE(b.accepts("true"));
  EXPECT_TRUE(b.accepts("false"));
  EXPECT_TRUE(b.accepts("null"));
  EXPECT_FALSE(b.accepts("0"));
  Doc nullable(R"({"type": "integer", "nullable": true})");
  EXPECT_TRUE(nullable.accepts("null"));
  EXPECT_TRUE(nullable.accepts("42"));
}

TEST(StructuredSchema, StringLengthsCountCharacters) {
  Doc d(R"({"type": "string", "minLength": 2, "maxLength": 3})");
  for (const char* ok : {R"("ab")", R"("abc")", R"("é😀")", R"("\n\"")", R"("\ud83d\ude00x")"})
    EXPECT_TRUE(d.accepts(ok)) << ok;
  for (const char* bad : {R"("a")", R"("abcd")", R"("")", R"("é")", R"("\u0041")"})
    EXPECT_FALSE(d.accepts(bad)) << bad;
}

TEST(StructuredSchema, EnumAndConst) {
  Doc e(R"({"enum": ["red", "green", 3, null, {"k": [1]}, "a\"b"]})");
  for (const char* ok : {R"("red")", R"("green")", "3", "null", R"({"k":[1]})", R"("a\"b")"})
    EXPECT_TRUE(e.accepts(ok)) << ok;
  for (const char* bad : {R"("blue")", R"("re")", "4", R"({"k": [1]})"})
    EXPECT_FALSE(e.accepts(bad)) << bad;
  Doc typed(R"({"type": "string", "enum": ["a", 1, "b"]})");
  EXPECT_TRUE(typed.accepts(R"("a")"));
  EXPECT_FALSE(typed.accepts("1"));
  Doc c(R"({"const": "fixed"})");
  EXPECT_TRUE(c.accepts(R"("fixed")"));
  EXPECT_FALSE(c.accepts(R"("fixe")"));
}

TEST(StructuredSchema, Patterns) {
  Doc d(R"({"type": "string", "pattern": "^[a-z]{2,4}-\\d+$"})");
  for (const char* ok : {R"("ab-1")", R"("abcd-1234")"}) EXPECT_TRUE(d.accepts(ok)) << ok;
  for (const char* bad : {R"("a-1")", R"("abcde-1")", R"("ab-")", R"("ab-1x")", R"("AB-1")"})
    EXPECT_FALSE(d.accepts(bad)) << bad;
  Doc search(R"({"type": "string", "pattern": "cat|dog"})");  // unanchored: contains
  EXPECT_TRUE(search.accepts(R"("a cat!")"));
  EXPECT_TRUE(search.accepts(R"("dog")"));
  EXPECT_FALSE(search.accepts(R"("cow")"));
  Doc quote(R"({"type": "string", "pattern": "^[\"\\\\x]+\n?$"})");  // characters that JSON escapes
  EXPECT_TRUE(quote.accepts(R"("\"\\x\n")"));
  EXPECT_FALSE(quote.accepts(R"("\u0022")"));  // only the serializers' spelling
  Doc classes(R"({"type": "string", "pattern": "^(?:\\w+\\s)*[^a-z]{1}.$"})");
  EXPECT_TRUE(classes.accepts(R"("hello world Z!")"));
  EXPECT_TRUE(classes.accepts(R"("1é")"));
  EXPECT_FALSE(classes.accepts(R"("hello za")"));
  Doc fmt_date(R"({"type": "string", "format": "date-time"})");
  EXPECT_TRUE(fmt_date.accepts(R"("2024-02-29T13:45:00Z")"));
  EXPECT_TRUE(fmt_date.accepts(R"("2024-02-29T13:45:00.123+02:00")"));
  EXPECT_FALSE(fmt_date.accepts(R"("2024-13-01T00:00:00Z")"));
  Doc uuid(R"({"type": "string", "format": "uuid"})");
  EXPECT_TRUE(uuid.accepts(R"("123e4567-e89b-12d3-a456-426614174000")"));
  EXPECT_FALSE(uuid.accepts(R"("123e4567-e89b-12d3-a456-42661417400")"));
}

TEST(StructuredSchema, Arrays) {
  Doc d(R"({"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 3})");
  for (const char* ok : {"[1,2]", "[1, 2, 3]", "[ 1 ,2 ]"}) EXPECT_TRUE(d.accepts(ok)) << ok;
  for (const char* bad : {"[]", "[1]", "[1,2,3,4]", "[1,]", R"([1,"2"])"})
    EXPECT_FALSE(d.accepts(bad)) << bad;
  Doc any(R"({"type": "array"})");
  EXPECT_TRUE(any.accepts(R"([1, "a", [], {}, null])"));
  Doc none(R"({"type": "array", "maxItems": 0})");
  EXPECT_TRUE(none.accepts("[]"));
  EXPECT_FALSE(none.accepts("[1]"));
}

TEST(StructuredSchema, AnyOfRefsAndRecursion) {
  Doc d(
      R"({"anyOf": [{"type": "object", "properties": {"kind": {"const": "a"}, "x": {"type": "integer"}}, "required": ["kind", "x"]},
                      {"type": "object", "properties": {"kind": {"const": "b"}, "y": {"type": "string"}}, "required": ["kind", "y"]}]})");
  EXPECT_TRUE(d.accepts(R"({"kind":"a","x":1})"));
  EXPECT_TRUE(d.accepts(R"({"kind":"b","y":"s"})"));
  EXPECT_FALSE(d.accepts(R"({"kind":"a","y":"s"})"));
  Doc tree(R"({"$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"},
              "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}}, "required": ["v"]}},
              "$ref": "#/$defs/node"})");
  EXPECT_TRUE(
      tree.accepts(R"({"v":1,"children":[{"v":2},{"v":3,"children":[{"v":4,"children":[]}]}]})"));
  EXPECT_FALSE(tree.accepts(R"({"v":1,"children":[{"children":[]}]})"));
  Doc list(R"({"$defs": {"list": {"anyOf": [{"type": "null"},
              {"type": "object", "properties": {"head": {"type": "integer"}, "tail": {"$ref": "#/$defs/list"}},
               "required": ["head", "tail"]}]}}, "$ref": "#/$defs/list"})");
  EXPECT_TRUE(list.accepts(R"({"head":1,"tail":{"head":2,"tail":null}})"));
  EXPECT_FALSE(list.accepts(R"({"head":1})"));
  // oneOf whose alternatives cannot overlap: different types, tagged objects, disjoint enums.
  Doc one(
      R"({"$defs": {"a": {"type": "object", "properties": {"kind": {"const": "a"}}, "required": ["kind"]}},
             "oneOf": [{"type": "integer"}, {"type": ["string", "null"]}, {"$ref": "#/$defs/a"},
                       {"type": "object", "properties": {"kind": {"enum": ["b", "c"]}, "n": {"type": "integer"}},
                        "required": ["kind", "n"]}, {"enum": [true]}, {"enum": [[1], [2]]}]})");
  for (const char* ok :
       {"1", R"("s")", "null", R"({"kind":"a"})", R"({"kind":"c","n":2})", "true", "[2]"})
    EXPECT_TRUE(one.accepts(ok)) << ok;
  EXPECT_FALSE(one.accepts(R"({"kind":"a","n":2})"));
  Doc root_ref(R"({"type": "object", "properties": {"next": {"$ref": "#"}}})");
  EXPECT_TRUE(root_ref.accepts(R"({"next":{"next":{}}})"));
}

TEST(StructuredSchema, PatternProperties) {
  Doc map(R"({"type": "object", "patternProperties": {"^x-[a-z]+$": {"type": "integer"}},
              "additionalProperties": false})");
  for (const char* ok : {"{}", R"({"x-ab":1})", R"({"x-a": 1, "x-b": -2})"})
    EXPECT_TRUE(map.accepts(ok)) << ok;
  for (const char* bad : {R"({"y":1})", R"({"x-A":1})", R"({"x-a":"s"})", R"({"x-":1})"})
    EXPECT_FALSE(map.accepts(bad)) << bad;
  // A listed name that a regex matches takes both schemas.
  Doc listed(R"({"properties": {"x-id": {"type": "number"}, "name": {"type": "string"}},
                 "patternProperties": {"^x-": {"type": "integer"}}})");
  EXPECT_TRUE(listed.accepts(R"({"x-id":3,"name":"n"})"));
  EXPECT_FALSE(listed.accepts(R"({"x-id":3.5})"));
  EXPECT_FALSE(listed.accepts(R"({"name":"n","x-other":1})"));
  // A required name that is not listed takes the schema of the regexes it matches.
  Doc req(R"({"required": ["x-k"], "patternProperties": {"^x-": {"type": "boolean"}}})");
  EXPECT_TRUE(req.accepts(R"({"x-k":true})"));
  EXPECT_FALSE(req.accepts(R"({"x-k":1})"));
  EXPECT_FALSE(req.accepts("{}"));
  // Keys matching several regexes: values satisfy all of their schemas.
  Doc both(R"({"patternProperties": {"^a": {"type": "integer"}, "b$": {"minimum": 3}}})");
  EXPECT_TRUE(both.accepts(R"({"ab":3,"a":4})"));
  EXPECT_FALSE(both.accepts(R"({"a":2})"));
}

// Decimals written x.yyy within exclusive or inclusive bounds, checked over a
// grid of hundredths: every spelling with up to two decimals is accepted
// exactly when its value lies within the bounds.
TEST(StructuredSchema, NumberBoundsExactly) {
  struct Range {
    const char* schema;
    int lo, hi;  // in hundredths, inclusive
  };
  for (const Range& r :
       {Range{R"({"type": "number", "minimum": 0.5, "maximum": 2.25})", 50, 225},
        Range{R"({"type": "number", "minimum": -2.5, "maximum": -1.25})", -250, -125},
        Range{R"({"type": "number", "exclusiveMinimum": -1.5, "maximum": 0.5})", -149, 50},
        Range{R"({"minimum": 1.5, "exclusiveMinimum": true, "maximum": 3})", 151, 300}}) {
    Doc d(r.schema);
    for (int x = -400; x <= 400; ++x) {
      const int a = std::abs(x);
      const std::string sign = x < 0 ? "-" : "";
      const std::string two = fmt::format("{}{}.{:02}", sign, a / 100, a % 100);
      ASSERT_EQ(d.accepts(two), x >= r.lo && x <= r.hi) << r.schema << " " << two;
      if (a % 10 == 0) {
        ASSERT_EQ(d.accepts(fmt::format("{}{}.{}", sign, a / 100, a % 100 / 10)),
                  x >= r.lo && x <= r.hi)
            << r.schema << " " << x;
      }
      if (a % 100 == 0 && x != 0) {
        ASSERT_EQ(d.accepts(fmt::format("{}{}", sign, a / 100)), x >= r.lo && x <= r.hi)
            << r.schema << " " << x;
      }
    }
  }
  Doc open(R"({"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1})");
  for (const char* ok : {"0.5", "0.0000000000000001", "0.9999999999999999", "0.25000"})
    EXPECT_TRUE(open.accepts(ok)) << ok;
  // 0.99999999999999999 reads as the double 1.0, which is not below 1.
  for (const char* bad : {"0", "0.0", "-0", "1", "1.0", "0.99999999999999999", "5e-1", "1.5"})
    EXPECT_FALSE(open.accepts(bad)) << bad;
  Doc big(R"({"type": "number", "minimum": 1e3})");
  EXPECT_TRUE(big.accepts("1000"));
  EXPECT_TRUE(big.accepts("123456.75"));
  EXPECT_FALSE(big.accepts("999.99"));
}

TEST(StructuredSchema, MultipleOf) {
  struct Case {
    const char* schema;
    int lo, hi, m;
  };
  for (const Case& c :
       {Case{R"({"type": "integer", "multipleOf": 5, "minimum": 0, "maximum": 100})", 0, 100, 5},
        Case{R"({"type": "integer", "multipleOf": 20})", -100000, 100000, 20},
        Case{R"({"type": "integer", "multipleOf": 1000, "minimum": -2500})", -2500, 100000, 1000},
        Case{R"({"type": "integer", "multipleOf": 7, "minimum": -50,
                               "maximum": 300})",
             -50, 300, 7},
        Case{R"({"type": "number", "multipleOf": 1, "exclusiveMaximum": 10.5})", -100000, 10, 1}}) {
    Doc d(c.schema);
    for (int x = -3000; x <= 3000; ++x)
      ASSERT_EQ(d.accepts(std::to_string(x)), x >= c.lo && x <= c.hi && x % c.m == 0)
          << c.schema << " " << x;
    EXPECT_FALSE(d.accepts("-0")) << c.schema;
  }
  // Fractions 1/n: integers only (Python's jsonschema finds 0.07 no multiple of 0.01).
  Doc cents(R"({"type": "number", "multipleOf": 0.01, "minimum": 0})");
  EXPECT_TRUE(cents.accepts("7"));
  EXPECT_FALSE(cents.accepts("0.07"));
  EXPECT_FALSE(cents.accepts("-1"));
}

TEST(StructuredSchema, AllOfAndKeywordsBesideRefsMerge) {
  Doc both(
      R"({"allOf": [{"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
                          {"properties": {"b": {"type": "integer"}}, "required": ["b"]}]})");
  EXPECT_TRUE(both.accepts(R"({"a":"x","b":1})"));
  EXPECT_FALSE(both.accepts(R"({"a":"x"})"));
  EXPECT_FALSE(both.accepts(R"({"b":1})"));
  // A closed part drops the names it does not list.
  Doc closed(R"({"allOf": [{"properties": {"a": {}}, "additionalProperties": false},
                            {"properties": {"b": {}}}]})");
  EXPECT_TRUE(closed.accepts(R"({"a":1})"));
  EXPECT_FALSE(closed.accepts(R"({"a":1,"b":2})"));
  Doc bounds(R"({"allOf": [{"type": "integer", "minimum": 0}, {"maximum": 10}, true]})");
  for (int x = -20; x <= 20; ++x) EXPECT_EQ(bounds.accepts(std::to_string(x)), x >= 0 && x <= 10);
  Doc types(R"({"allOf": [{"type": ["string", "null"]}, {"type": "string", "minLength": 2}]})");
  EXPECT_TRUE(types.accepts(R"("ab")"));
  EXPECT_FALSE(types.accepts("null"));
  EXPECT_FALSE(types.accepts(R"("a")"));
  // Keywords beside $ref hold too.
  Doc ref(R"({"$defs": {"base": {"type": "object", "properties": {"id": {"type": "integer"}}}},
              "$ref": "#/$defs/base", "required": ["id"]})");
  EXPECT_TRUE(ref.accepts(R"({"id":1})"));
  EXPECT_FALSE(ref.accepts("{}"));
  // Keywords beside oneOf are distributed over its alternatives.
  Doc tagged(
      R"({"type": "object", "properties": {"kind": {"enum": ["a", "b"]}}, "required": ["kind"],
                 "oneOf": [{"properties": {"kind": {"const": "a"}, "x": {"type": "integer"}}, "required": ["x"]},
                           {"properties": {"kind": {"const": "b"}}}]})");
  EXPECT_TRUE(tagged.accepts(R"({"kind":"a","x":1})"));
  EXPECT_TRUE(tagged.accepts(R"({"kind":"b"})"));
  EXPECT_FALSE(tagged.accepts(R"({"kind":"a"})"));
  EXPECT_FALSE(tagged.accepts(R"({"kind":"c"})"));
  // An alternative that contradicts the keywords beside it is never generated.
  Doc pruned(R"({"type": "string", "anyOf": [{"type": "integer"}, {"maxLength": 2}]})");
  EXPECT_TRUE(pruned.accepts(R"("ab")"));
  EXPECT_FALSE(pruned.accepts(R"("abc")"));
  EXPECT_FALSE(pruned.accepts("1"));
}

// oneOf alternatives that differ only in what they require: each leaves out
// a name that the others require, so that no document matches two.
TEST(StructuredSchema, OneOfToldApartByRequiredNames) {
  Doc area(R"({"type": "object", "properties": {"radius": {"type": "number"},
                "length": {"type": "number"}, "width": {"type": "number"}},
               "oneOf": [{"required": ["radius"]}, {"required": ["length", "width"]}]})");
  EXPECT_TRUE(area.accepts(R"({"radius":1})"));
  EXPECT_TRUE(area.accepts(R"({"length":1,"width":2})"));
  for (const char* bad : {R"({"radius":1,"length":1,"width":2})", "{}", R"({"length":1})",
                          R"({"length":1,"width":2,"radius":3})"})
    EXPECT_FALSE(area.accepts(bad)) << bad;
  Doc plain(R"({"oneOf": [{"type": "object", "properties": {"a": {}, "b": {}}, "required": ["a"]},
                          {"type": "object", "properties": {"a": {}, "b": {}}, "required": ["b"]}]})");
  EXPECT_TRUE(plain.accepts(R"({"a":1})"));
  EXPECT_TRUE(plain.accepts(R"({"b":1})"));
  EXPECT_FALSE(plain.accepts(R"({"a":1,"b":1})"));
}

// maxLength beside an unbounded pattern: its repetitions are bounded so that
// every string fits.
TEST(StructuredSchema, PatternWithinMaxLength) {
  Doc version(R"({"type": "string", "pattern": "^(\\d+\\.\\d+\\.\\d+.*)$", "maxLength": 12})");
  // Four repetitions, each at most one more than its minimum: 5 + 4 x 1 <= 12.
  for (const char* ok : {R"("1.2.3")", R"("10.20.30x")"}) EXPECT_TRUE(version.accepts(ok)) << ok;
  for (const char* bad : {R"("10.20.30-rc12")", R"("1.2")", R"("x1.2.3")"})
    EXPECT_FALSE(version.accepts(bad)) << bad;
  Doc words(R"({"type": "string", "pattern": "^[a-z]+( [a-z]+)*$", "maxLength": 20})");
  EXPECT_TRUE(words.accepts(R"("a b c")"));
  EXPECT_FALSE(words.accepts(R"("abcdefghij abcdefghij")"));
}

TEST(StructuredSchema, Formats) {
  struct Case {
    const char* format;
    std::vector<const char*> ok, bad;
  };
  const Case cases[] = {
      {"email",
       {"a.b+c@example.com", "x_1@mail.example.org"},
       {"a@b", "@x.com", "a b@x.com", "a..b@x.com"}},
      {"uri",
       {"https://example.com/a/b?q=1&r=%20#frag", "http://localhost:8080", "ftp://h.org/"},
       {"example.com", "https://", "http://a b.com", "https://x.com/%zz", "mailto"}},
      {"uri-reference", {"/a/b", "https://x.org"}, {"a b", "//"}},
      {"date",
       {"2024-02-29", "2023-12-31", "0001-01-01"},
       {"2023-02-29", "2023-04-31", "0000-01-01", "2023-13-01", "1900-02-29"}},
      {"time", {"13:45:00Z", "23:59:59.5+02:00"}, {"24:00:00Z", "13:45:00", "13:60:00Z"}},
      {"date-time", {"2000-02-29T00:00:00Z"}, {"2100-02-29T00:00:00Z", "2024-01-01 00:00:00Z"}},
      {"ipv4", {"192.168.0.1", "0.0.0.0"}, {"256.1.1.1", "1.2.3", "01.2.3.4"}},
      {"ipv6",
       {"::1", "::", "2001:db8::8a2e:370:7334", "1:2:3:4:5:6:7:8", "fe80::"},
       {"1:2:3:4:5:6:7:8:9", "12345::", "1::2::3", ":1", "1:2:3:4:5:6:7"}},
      {"hostname",
       {"example.com", "localhost", "a-b.c1.org"},
       {"-a.com", "a_b.com", "a..b", "123", "a-.com"}},
      {"uuid", {"123e4567-e89b-12d3-a456-426614174000"}, {"123e4567e89b12d3a456426614174000"}},
      {"regex", {"^abc$", "a.b"}, {"(", "a["}},
  };
  for (const Case& c : cases) {
    Doc d(fmt::format(R"({{"type": "string", "format": "{}"}})", c.format));
    for (const char* ok : c.ok)
      EXPECT_TRUE(d.accepts(fmt::format("\"{}\"", ok))) << c.format << " " << ok;
    for (const char* bad : c.bad)
      EXPECT_FALSE(d.accepts(fmt::format("\"{}\"", bad))) << c.format << " " << bad;
  }
  // Formats JSON Schema does not define are annotations.
  Doc int32(R"({"type": "integer", "format": "int32"})");
  EXPECT_TRUE(int32.accepts("-12"));
  Doc any(R"({"type": "string", "format": "my-vendor-format"})");
  EXPECT_TRUE(any.accepts(R"("anything at all")"));
  // Lengths beside a format whose strings all fit them.
  Doc sized(R"({"type": "string", "format": "date", "minLength": 10, "maxLength": 10})");
  EXPECT_TRUE(sized.accepts(R"("2024-01-31")"));
}

// Long bounded strings count their characters with rule calls
// (string_length.h): exact at every bound, and small automata.
TEST(StructuredSchema, LongStringLengthsExactly) {
  for (auto [lo, hi] :
       {std::pair{0, 1000}, std::pair{40, 1024}, std::pair{33, 5000}, std::pair{1023, 1025},
        std::pair{0, 257}, std::pair{300, 300}, std::pair{0, 40000}}) {
    const std::string schema =
        fmt::format(R"({{"type": "string", "minLength": {}, "maxLength": {}}})", lo, hi);
    Doc d(schema);
    for (int n : {lo - 1, lo, lo + 1, (lo + hi) / 2, hi - 1, hi, hi + 1, 31, 32, 33, 1024}) {
      if (n < 0) continue;
      const bool in = n >= lo && n <= hi;
      ASSERT_EQ(d.accepts("\"" + std::string(n, 'a') + "\""), in) << schema << " " << n;
      std::string mixed;  // characters of 1 to 4 bytes and escapes, n of them
      const char* pieces[] = {"é", "😀", "\\n", "\\u00e9", "x"};
      for (int i = 0; i < n; ++i) mixed += pieces[i % 5];
      ASSERT_EQ(d.accepts("\"" + mixed + "\""), in) << schema << " mixed " << n;
    }
  }
  const auto g = compile_json_schema(ojson::parse(R"({"type": "string", "maxLength": 100000})"));
  // A few rules of at most kLengthBase characters, whatever the bound.
  EXPECT_LT(g->n_states(), 6000);
  EXPECT_LT(
      compile_json_schema(ojson::parse(R"({"type": "string", "maxLength": 1000000})"))->n_states(),
      6000);
  Doc at_least(R"({"type": "string", "minLength": 300})");
  EXPECT_FALSE(at_least.accepts("\"" + std::string(299, 'a') + "\""));
  EXPECT_TRUE(at_least.accepts("\"" + std::string(300, 'a') + "\""));
  EXPECT_TRUE(at_least.accepts("\"" + std::string(5000, 'a') + "\""));
  Doc huge(R"({"type": "string", "maxLength": 100000})");
  EXPECT_TRUE(huge.accepts("\"" + std::string(20000, 'z') + "\""));
}

TEST(StructuredSchema, PropertyCountsAndDependencies) {
  Doc counted(
      R"({"properties": {"a": {}, "b": {}, "c": {}}, "minProperties": 1, "maxProperties": 2})");
  for (const char* ok : {R"({"a":1})", R"({"c":1})", R"({"b":1,"c":2})", R"({"a":1,"c":2})"})
    EXPECT_TRUE(counted.accepts(ok)) << ok;
  for (const char* bad : {"{}", R"({"a":1,"b":2,"c":3})"})
    EXPECT_FALSE(counted.accepts(bad)) << bad;
  // A map counts its members; at least one (a repeated key cannot make one member
  // count as none), at most three.
  Doc map(R"({"type": "object", "additionalProperties": {"type": "integer"}, "minProperties": 1,
              "maxProperties": 3})");
  EXPECT_TRUE(map.accepts(R"({"a":1})"));
  EXPECT_TRUE(map.accepts(R"({"a":1,"b":2,"c":3})"));
  EXPECT_FALSE(map.accepts("{}"));
  EXPECT_FALSE(map.accepts(R"({"a":1,"b":2,"c":3,"d":4})"));
  // A dependency list makes its names required wherever the name may be written.
  for (const char* key : {"dependencies", "dependentRequired"}) {
    Doc dep(fmt::format(
        R"({{"properties": {{"card": {{"type": "string"}}, "billing": {{"type": "string"}}}},
                           "{}": {{"card": ["billing"]}}}})",
        key));
    EXPECT_TRUE(dep.accepts(R"({"billing":"x"})")) << key;
    EXPECT_TRUE(dep.accepts(R"({"card":"1","billing":"x"})")) << key;
    EXPECT_FALSE(dep.accepts(R"({"card":"1"})")) << key;
  }
  // A dependent schema of an optional name: the name is left out.
  Doc schema_dep(R"({"properties": {"a": {"type": "integer"}, "b": {}},
                     "dependencies": {"a": {"required": ["b"]}}})");
  EXPECT_TRUE(schema_dep.accepts(R"({"b":1})"));
  EXPECT_FALSE(schema_dep.accepts(R"({"a":1,"b":1})"));
  // An optional property that no value satisfies is left out too.
  Doc impossible(
      R"({"properties": {"a": {"type": "array", "enum": ["x"]}, "b": {"type": "integer"}}})");
  EXPECT_TRUE(impossible.accepts(R"({"b":1})"));
  EXPECT_FALSE(impossible.accepts(R"({"a":"x"})"));
}

TEST(StructuredSchema, UniqueItemsAndTuples) {
  Doc colors(R"({"type": "array", "items": {"enum": ["r", "g", "b"]}, "uniqueItems": true})");
  for (const char* ok : {"[]", R"(["r"])", R"(["r", "b"])", R"(["r","g","b"])"})
    EXPECT_TRUE(colors.accepts(ok)) << ok;
  // Repeats are refused; distinct values come in the order of the list.
  for (const char* bad : {R"(["r","r"])", R"(["b","r"])", R"(["r","g","b","r"])"})
    EXPECT_FALSE(colors.accepts(bad)) << bad;
  Doc two(R"({"type": "array", "items": {"type": "boolean"}, "uniqueItems": true, "minItems": 2})");
  EXPECT_TRUE(two.accepts("[true, false]"));
  EXPECT_FALSE(two.accepts("[true]"));
  EXPECT_FALSE(two.accepts("[true,true]"));
  // Items that do not list their values: at most one item, always unique.
  Doc strings(R"({"type": "array", "items": {"type": "string"}, "uniqueItems": true})");
  EXPECT_TRUE(strings.accepts("[]"));
  EXPECT_TRUE(strings.accepts(R"(["a"])"));
  EXPECT_FALSE(strings.accepts(R"(["a","b"])"));
  Doc tuple(R"({"type": "array", "items": [{"type": "string"}, {"type": "integer"}],
                "additionalItems": false})");
  EXPECT_TRUE(tuple.accepts(R"(["a", 1])"));
  for (const char* bad : {R"(["a"])", R"([1,"a"])", R"(["a",1,2])"})
    EXPECT_FALSE(tuple.accepts(bad)) << bad;
  Doc prefix(R"({"prefixItems": [{"const": 1}], "items": {"type": "string"}})");
  EXPECT_TRUE(prefix.accepts("[1]"));
  EXPECT_TRUE(prefix.accepts(R"([1, "a", "b"])"));
  EXPECT_FALSE(prefix.accepts("[1, 2]"));
  // additionalItems without a tuple constrains nothing.
  Doc plain(R"({"type": "array", "items": {"type": "integer"}, "additionalItems": false})");
  EXPECT_TRUE(plain.accepts("[1, 2, 3]"));
}

TEST(StructuredSchema, RefForms) {
  Doc escaped(
      R"({"definitions": {"a b": {"type": "integer"}, "c/d": {"type": "string"}, "e~f": {"type": "boolean"}},
                  "properties": {"x": {"$ref": "#/definitions/a%20b"}, "y": {"$ref": "#/definitions/c~1d"},
                                 "z": {"$ref": "#/definitions/e~0f"}}})");
  EXPECT_TRUE(escaped.accepts(R"({"x":1,"y":"s","z":true})"));
  EXPECT_FALSE(escaped.accepts(R"({"x":"s"})"));
  EXPECT_FALSE(escaped.accepts(R"({"y":1})"));
  Doc props(R"({"properties": {"a": {"type": "integer"}, "b": {"$ref": "#/properties/a"}}})");
  EXPECT_TRUE(props.accepts(R"({"a":1,"b":2})"));
  EXPECT_FALSE(props.accepts(R"({"b":"s"})"));
  Doc ids(R"({"$id": "http://example.com/schemas/root.json",
              "definitions": {"p": {"$id": "person.json", "type": "object",
                                    "properties": {"n": {"type": "string"}}, "required": ["n"]}},
              "properties": {"who": {"$ref": "person.json"},
                             "also": {"$ref": "http://example.com/schemas/root.json#/definitions/p"},
                             "abs": {"$ref": "http://example.com/schemas/person.json"}}})");
  EXPECT_TRUE(ids.accepts(R"({"who":{"n":"a"},"also":{"n":"b"},"abs":{"n":"c"}})"));
  EXPECT_FALSE(ids.accepts(R"({"who":{}})"));
  Doc anchors(
      R"({"definitions": {"x": {"$anchor": "num", "type": "integer"}, "y": {"id": "#str", "type": "string"}},
                  "properties": {"a": {"$ref": "#num"}, "b": {"$ref": "#str"}}})");
  EXPECT_TRUE(anchors.accepts(R"({"a":1,"b":"s"})"));
  EXPECT_FALSE(anchors.accepts(R"({"a":"s"})"));
}

TEST(StructuredSchema, UnsupportedFeaturesNameThePlace) {
  struct Case {
    const char* schema;
    const char* path;
    const char* word;
  };
  const Case cases[] = {
      {R"({"type": "object", "properties": {"age": {"type": "number", "multipleOf": 0.3}}})",
       "#/properties/age/multipleOf", "multipleOf"},
      {R"({"type": "integer", "multipleOf": 7})", "#/multipleOf", "at most 1024"},
      {R"({"type": "array", "uniqueItems": true, "minItems": 2})", "#/uniqueItems", "uniqueItems"},
      {R"({"not": {"type": "string"}})", "#/not", "not"},
      {R"j({"type": "object", "patternProperties": {"a(?=b)": {}}})j", "#/patternProperties/a(?=b)",
       "lookaround"},
      {R"({"type": "string", "pattern": "(a)\\1"})", "#/pattern", "back-reference"},
      {R"j({"type": "string", "pattern": "a(?=b)"})j", "#/pattern", "lookaround"},
      {R"({"type": "string", "pattern": "\\bword"})", "#/pattern", "word boundary"},
      {R"({"type": "string", "pattern": "\\p{L}"})", "#/pattern", "Unicode property"},
      {R"({"type": "string", "pattern": "a{1000}"})", "#/pattern", "repetition count"},
      {R"({"type": "string", "format": "duration"})", "#/format", "'duration' is not supported"},
      {R"({"type": "string", "minLength": 2000000})", "#/minLength", "minLength"},
      {R"({"type": "number", "minimum": 5, "maximum": 4.5})", "#", "no number"},
      {R"({"type": "integer", "minimum": 5, "maximum": 4})", "#", "no integer"},
      {R"({"type": "string", "minLength": 3, "maxLength": 2})", "#/maxLength", "below"},
      {R"({"$ref": "http://example.com/schema"})", "#/$ref", "only references within"},
      {R"({"$ref": "#/$defs/missing"})", "#/$ref", "names nothing"},
      {R"({"$defs": {"a": {"anyOf": [{"$ref": "#/$defs/a"}, {"type": "string"}]}}, "$ref": "#/$defs/a"})",
       "#/$defs/a", "cycle"},
      {R"({"type": "strnig"})", "#/type", "unknown type 'strnig'"},
      {R"({"enum": []})", "#/enum", "no value"},
      {R"(false)", "#", "admits no value"},
      {R"({"type": "array", "items": [{"type": "string"}], "additionalItems": false, "minItems": 2})",
       "#/minItems", "more items than the tuple"},
      {R"({"allOf": [{"pattern": "a"}, {"pattern": "b"}]})", "#/pattern", "different 'pattern'"},
      {R"({"type": "string", "anyOf": [{"type": "integer"}]})", "#", "no alternative of 'anyOf'"},
      {R"({"$ref": "#nowhere"})", "#/$ref", "names no $anchor"},
      {R"({"type": "object", "properties": {"a": {}}, "required": ["a"],
           "dependencies": {"a": {"required": ["b"]}}})",
       "#/dependencies/a", "'dependencies' with a schema"},
      {R"({"type": "object", "properties": {"a": {}}, "additionalProperties": false,
           "minProperties": 2})",
       "#/minProperties", "more than the 1 properties"},
      // Two members of a map could be one key written twice, which counts once.
      {R"({"type": "object", "additionalProperties": {"type": "integer"}, "minProperties": 2})",
       "#/minProperties", "repeated key"},
      {R"({"type": "object", "if": {"required": ["a"]}})", "#/if", "'if' is not supported"},
      {R"({"type": "string", "pattern": "^a{5}$", "maxLength": 3})", "#/pattern", "together"},
      {R"({"type": "string", "pattern": "^a$", "minLength": 2})", "#/pattern", "'minLength'"},
      // Two bytes, one character: not taken for two.
      {R"({"type": "string", "pattern": "^\n$", "minLength": 2})", "#/pattern", "'minLength'"},
      {R"({"type": "string", "pattern": "a**"})", "#/pattern", "nothing to repeat"},
      {R"({"oneOf": [{"type": "integer"}, {"minimum": 2}]})", "#/oneOf", "may both match"},
      {R"({"oneOf": [{"type": "object", "properties": {"k": {"const": 1}}, "required": ["k"]},
                     {"type": "object", "properties": {"k": {"enum": [1, 2]}}, "required": ["k"]}]})",
       "#/oneOf", "alternatives 0 and 1"},
      {R"({"type": "string", "pattern": "a{2}{3}"})", "#/pattern", "nothing to repeat"},
  };
  for (const Case& c : cases) {
    const std::string e = error_of(c.schema);
    EXPECT_NE(e.find(std::string("'") + c.path + "'"), std::string::npos) << c.schema << "\n" << e;
    EXPECT_NE(e.find(c.word), std::string::npos) << c.schema << "\n" << e;
  }
  // Nesting that would exhaust the stack is refused, not a crash.
  std::string deep_schema, deep_regex = R"({"type": "string", "pattern": ")";
  for (int i = 0; i < 5000; ++i) deep_schema += R"({"type": "array", "items": )";
  deep_schema += "{}" + std::string(5000, '}');
  EXPECT_NE(error_of(deep_schema).find("nested deeper than"), std::string::npos);
  deep_regex += std::string(5000, '(') + "a" + std::string(5000, ')') + "\"}";
  EXPECT_NE(error_of(deep_regex).find("nested deeper than"), std::string::npos);
  // Neutral values of refused keywords and annotations are fine.
  EXPECT_EQ(error_of(R"({"type": "array", "uniqueItems": false, "title": "t", "description": "d",
                         "default": [], "examples": [[1]], "x-vendor": 1})"),
            "");
}

}  // namespace
}  // namespace tandem::structured
