// The official JSON Schema test suite (Debian's json-schema-test-suite, draft 7)
// as an outside judge of the schema compiler and of the tests' validator:
//  - soundness: for every group whose schema tandem compiles, no instance the
//    suite calls invalid is a document of the grammar (written compactly, in
//    the suite's key order). Valid instances need not be: the grammar generates
//    a subset of the valid documents (schema order, no extra properties, ...);
//  - the validator of tests/support, which the random-walk tests trust, gives
//    the suite's verdict on every instance of those groups.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "structured/grammar_matcher.h"
#include "structured/json_schema.h"
#include "support/byte_vocabulary.h"
#include "support/json_schema_validator.h"

namespace tandem::structured {
namespace {

using ojson = nlohmann::ordered_json;
namespace fs = std::filesystem;

const char* const kSuiteDir = "/usr/share/json-schema-test-suite/tests/draft7";

TEST(StructuredConformance, Draft7Suite) {
  ASSERT_TRUE(fs::is_directory(kSuiteDir))
      << kSuiteDir << " is missing: install Debian's json-schema-test-suite (scripts/setup.sh)";
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(kSuiteDir))
    if (e.path().extension() == ".json") files.push_back(e.path());
  for (const char* f :
       {"optional/format/date.json", "optional/format/time.json", "optional/format/date-time.json",
        "optional/format/ipv4.json", "optional/format/ipv6.json", "optional/format/email.json",
        "optional/format/hostname.json", "optional/format/uri.json",
        "optional/format/uri-reference.json", "optional/format/regex.json"})
    files.push_back(fs::path(kSuiteDir) / f);
  std::sort(files.begin(), files.end());

  int groups = 0, compiled = 0, invalid_checked = 0, valid_total = 0, valid_accepted = 0;
  for (const fs::path& file : files) {
    std::ifstream in(file);
    const ojson suite = ojson::parse(in);
    for (const ojson& group : suite) {
      ++groups;
      std::shared_ptr<const Grammar> g;
      try {
        g = compile_json_schema(group["schema"]);
      } catch (const SchemaError&) {
        continue;  // a feature tandem refuses (remote $ref, not, uniqueItems, ...)
      }
      ++compiled;
      const nlohmann::json schema = nlohmann::json::parse(group["schema"].dump());
      for (const ojson& test : group["tests"]) {
        const std::string where = file.filename().string() + ": " +
                                  group["description"].get<std::string>() + ": " +
                                  test["description"].get<std::string>();
        const bool valid = test["valid"].get<bool>();
        const std::string text = test["data"].dump();
        GrammarMatcher m(g, test::byte_vocabulary());
        const bool accepted = m.accept_bytes(text) && m.is_complete();
        if (valid) {
          ++valid_total;
          valid_accepted += accepted;
        } else {
          ++invalid_checked;
          EXPECT_FALSE(accepted) << where << ": the grammar accepts the invalid " << text;
        }
        const std::string violation = test::schema_violation(nlohmann::json::parse(text), schema);
        EXPECT_EQ(violation.empty(), valid)
            << where << ": the validator says '" << violation << "' of " << text;
      }
    }
  }
  std::cout << "[ suite    ] " << compiled << " of " << groups << " schema groups compiled; "
            << invalid_checked << " invalid instances refused; " << valid_accepted << " of "
            << valid_total << " valid instances are documents of the grammar\n";
  // The suite was read (these are 85 groups and 161 invalid instances).
  EXPECT_GT(compiled, 80);
  EXPECT_GT(invalid_checked, 150);
}

}  // namespace
}  // namespace tandem::structured
