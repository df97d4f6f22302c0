#include "structured/json_formats.h"

#include <map>

namespace tandem::structured {
namespace {

// Pieces shared by several formats (the rules are in json_formats.h).
const std::string kYear = R"((?:[1-9]\d{3}|0[1-9]\d{2}|00[1-9]\d|000[1-9]))";
const std::string kLeapYear =
    R"((?:\d\d(?:0[48]|[2468][048]|[13579][26])|(?:0[48]|[2468][048]|[13579][26])00))";
const std::string kDate = "(?:" + kYear +
                          R"(-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\d|3[01])|(?:0[469]|11)-)"
                          R"((?:0[1-9]|[12]\d|30)|02-(?:0[1-9]|1\d|2[0-8]))|)" +
                          kLeapYear + "-02-29)";
const std::string kTime =
    R"((?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d(?:\.\d{1,6})?(?:Z|[+-](?:[01]\d|2[0-3]):[0-5]\d))";
const std::string kLabel = R"([A-Za-z0-9](?:[A-Za-z0-9-]{0,30}[A-Za-z0-9])?)";
const std::string kTopLabel = R"([A-Za-z](?:[A-Za-z0-9-]{0,30}[A-Za-z0-9])?)";
const std::string kHostname = "(?:" + kLabel + "\\.){0,4}" + kTopLabel;
const std::string kDomain = "(?:" + kLabel + "\\.){1,4}" + kTopLabel;
const std::string kPchar = R"((?:[A-Za-z0-9._~!$&'()*+,;=:@-]|%[0-9A-Fa-f]{2}))";
const std::string kPathQueryFragment =
    "(?:/" + kPchar + "*)*(?:\\?(?:" + kPchar + "|[/?])*)?(?:#(?:" + kPchar + "|[/?])*)?";
const std::string kUri = "(?:https?|ftp)://" + kHostname + "(?::\\d{1,5})?" + kPathQueryFragment;
const std::string kHex4 = "[0-9a-fA-F]{1,4}";
const std::string kIpv6 = "(?:(?:" + kHex4 + ":){7}" + kHex4 + "|(?:" + kHex4 +
                          ":){1,7}:|(?:" + kHex4 + ":){1,6}:" + kHex4 + "|(?:" + kHex4 +
                          ":){1,5}(?::" + kHex4 + "){1,2}|(?:" + kHex4 + ":){1,4}(?::" + kHex4 +
                          "){1,3}|(?:" + kHex4 + ":){1,3}(?::" + kHex4 + "){1,4}|(?:" + kHex4 +
                          ":){1,2}(?::" + kHex4 + "){1,5}|" + kHex4 + ":(?::" + kHex4 +
                          "){1,6}|:(?:(?::" + kHex4 + "){1,7}|:))";

const std::map<std::string, std::string, std::less<>>& regexes() {
  static const std::map<std::string, std::string, std::less<>> m = {
      {"date", "^" + kDate + "$"},
      {"time", "^" + kTime + "$"},
      {"date-time", "^" + kDate + "T" + kTime + "$"},
      {"email", R"(^[A-Za-z0-9_+-]{1,32}(?:\.[A-Za-z0-9_+-]{1,32}){0,3}@)" + kDomain + "$"},
      {"hostname", "^" + kHostname + "$"},
      {"uri", "^" + kUri + "$"},
      {"uri-reference", "^(?:" + kUri + "|/(?:" + kPchar + "+(?:/" + kPchar + "*)*)?)$"},
      {"uuid", "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"},
      {"ipv4", R"(^((25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)$)"},
      {"ipv6", "^" + kIpv6 + "$"},
      {"regex", "^\\^?[A-Za-z0-9 _.-]*\\$?$"},
  };
  return m;
}

}  // namespace

std::optional<std::string> format_regex(std::string_view format) {
  auto it = regexes().find(format);
  if (it == regexes().end()) return std::nullopt;
  return it->second;
}

bool is_standard_format(std::string_view format) {
  static const char* const kStandard[] = {"date",         "time",          "date-time",
                                          "duration",     "email",         "idn-email",
                                          "hostname",     "idn-hostname",  "ipv4",
                                          "ipv6",         "uri",           "uri-reference",
                                          "iri",          "iri-reference", "uuid",
                                          "uri-template", "json-pointer",  "relative-json-pointer",
                                          "regex"};
  for (const char* f : kStandard)
    if (format == f) return true;
  return false;
}

std::string generated_formats() {
  std::string out;
  for (const auto& [name, re] : regexes()) out += (out.empty() ? "" : ", ") + name;
  return out;
}

}  // namespace tandem::structured
