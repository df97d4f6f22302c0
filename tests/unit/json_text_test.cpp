// JSON text parsed with a nesting bound (src/io/json_text.h).
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "io/json_text.h"

using namespace tandem;

TEST(JsonText, ParsesOrdinaryDocuments) {
  std::string error;
  auto j = try_parse_json(R"({"a": [1, {"b": "[[[[ not nesting ]"}], "c": "\"{"})", &error);
  ASSERT_TRUE(j) << error;
  EXPECT_EQ((*j)["a"][1]["b"], "[[[[ not nesting ]");
  EXPECT_EQ((*j)["c"], "\"{");
}

// A request's JSON schema lists properties in the order the output must have.
TEST(JsonText, OrderedDocumentsKeepTheirKeyOrder) {
  std::string error;
  auto j = try_parse_json<nlohmann::ordered_json>(R"({"zeta": 1, "alpha": 2})", &error);
  ASSERT_TRUE(j) << error;
  EXPECT_EQ(j->begin().key(), "zeta");
  EXPECT_FALSE(try_parse_json<nlohmann::ordered_json>(std::string(kMaxJsonDepth + 1, '['), &error));
}

TEST(JsonText, NestingIsBounded) {
  std::string error;
  const std::string at_limit = std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']');
  EXPECT_TRUE(try_parse_json(at_limit, &error)) << error;
  // One level more is refused before nlohmann parses it; 100000 levels would
  // otherwise overflow the stack when the value is copied or dumped.
  for (size_t depth : {size_t{kMaxJsonDepth + 1}, size_t{100000}}) {
    const std::string deep = std::string(depth, '[') + std::string(depth, ']');
    EXPECT_FALSE(try_parse_json(deep, &error)) << depth;
    EXPECT_NE(error.find("nested more than"), std::string::npos) << error;
  }
  const std::string objects = std::string(1000, '{') + "}";
  EXPECT_FALSE(try_parse_json(R"({"a":)" + objects, &error));
}

TEST(JsonText, ErrorsNameTheSource) {
  try {
    parse_json("{\"a\": ", "dir/config.json");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind("dir/config.json: invalid JSON: ", 0), 0u) << what;
    EXPECT_EQ(what.find("[json.exception"), std::string::npos) << what;
  }
}

TEST(JsonText, ExcerptsAreShortSingleLines) {
  nlohmann::json big = nlohmann::json::array();
  for (int i = 0; i < 1000; ++i) big.push_back("line\nbreak");
  const std::string s = json_excerpt(big, 50);
  EXPECT_EQ(s.size(), 53u);
  EXPECT_EQ(s.find('\n'), std::string::npos);
}
