// JSON Schema compilation (src/structured/json_schema.h) checked byte by byte:
// documents the grammar must accept and near misses it must refuse, and every
// schema feature tandem refuses giving an error that names the place and the
// keyword.
#include <gtest/gtest.h>

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

TEST(StructuredSchema, UnsupportedFeaturesNameThePlace) {
  struct Case {
    const char* schema;
    const char* path;
    const char* word;
  };
  const Case cases[] = {
      {R"({"type": "object", "properties": {"age": {"type": "integer", "multipleOf": 5}}})",
       "#/properties/age/multipleOf", "multipleOf"},
      {R"({"type": "array", "uniqueItems": true})", "#/uniqueItems", "uniqueItems"},
      {R"({"not": {"type": "string"}})", "#/not", "not"},
      {R"({"type": "object", "patternProperties": {"^a": {}}})", "#/patternProperties",
       "patternProperties"},
      {R"({"type": "string", "pattern": "(a)\\1"})", "#/pattern", "back-reference"},
      {R"j({"type": "string", "pattern": "a(?=b)"})j", "#/pattern", "lookaround"},
      {R"({"type": "string", "pattern": "\\bword"})", "#/pattern", "word boundary"},
      {R"({"type": "string", "pattern": "\\p{L}"})", "#/pattern", "Unicode property"},
      {R"({"type": "string", "pattern": "a{1000}"})", "#/pattern", "repetition count"},
      {R"({"type": "string", "format": "email"})", "#/format", "email"},
      {R"({"type": "string", "maxLength": 100000})", "#/maxLength", "maxLength"},
      {R"({"type": "number", "minimum": 0.5})", "#/minimum", "minimum"},
      {R"({"type": "integer", "minimum": 5, "maximum": 4})", "#", "no integer"},
      {R"({"type": "string", "minLength": 3, "maxLength": 2})", "#/maxLength", "below"},
      {R"({"$ref": "http://example.com/schema"})", "#/$ref", "only references within"},
      {R"({"$ref": "#/$defs/missing"})", "#/$ref", "names nothing"},
      {R"({"$defs": {"a": {"anyOf": [{"$ref": "#/$defs/a"}, {"type": "string"}]}}, "$ref": "#/$defs/a"})",
       "#/$defs/a", "cycle"},
      {R"({"type": "strnig"})", "#/type", "unknown type 'strnig'"},
      {R"({"enum": []})", "#/enum", "no value"},
      {R"(false)", "#", "admits no value"},
      {R"({"type": "array", "items": [{"type": "string"}]})", "#/items", "tuple"},
      {R"({"allOf": [{"type": "string"}, {"minLength": 2}]})", "#/allOf", "allOf"},
      {R"({"type": "object", "anyOf": [{"required": ["a"]}]})", "#", "beside 'anyOf'"},
      {R"({"type": "string", "pattern": "a", "maxLength": 3})", "#/pattern", "together"},
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
