// The `format` keyword of JSON Schema: the formats tandem generates, each as a
// regular expression (regex.h) whose strings a validator accepts as that
// format, with Python's jsonschema (and its format checkers) as the yardstick:
//   date, time, date-time   RFC 3339; dates exist in the calendar (Feb 29 in
//                           leap years only), years 0001-9999, times with an
//                           offset, no leap second;
//   email                   dot-atoms of [A-Za-z0-9_+-] @ a domain of two or
//                           more labels;
//   hostname                one to five labels of at most 32 characters,
//                           the last starting with a letter;
//   uri, uri-reference      http, https or ftp URIs: a hostname, an optional
//                           port, path, query and fragment of RFC 3986
//                           characters (uri-reference: also an absolute path
//                           "/a/b" without scheme and host);
//   uuid, ipv4, ipv6        (ipv6 in its eight-group and "::" forms);
//   regex                   letters, digits, space, '_', '.', '-', between an
//                           optional ^ and $ (every one a valid regular
//                           expression).
// Formats that JSON Schema defines but tandem does not generate (duration,
// idn-email, idn-hostname, iri, iri-reference, uri-template, json-pointer,
// relative-json-pointer) are refused, since validators check them; any other
// format name is an annotation (OpenAPI's int32, double, ...) and ignored.
#pragma once
#include <optional>
#include <string>
#include <string_view>

namespace tandem::structured {

// The regular expression of a generated format; nullopt for any other name.
std::optional<std::string> format_regex(std::string_view format);
// Whether JSON Schema defines `format` (validators check it): such a format
// without a regex must be refused rather than ignored.
bool is_standard_format(std::string_view format);
// The names format_regex knows, for error messages.
std::string generated_formats();

}  // namespace tandem::structured
