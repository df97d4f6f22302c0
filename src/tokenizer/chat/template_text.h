// Reading a Jinja chat template's text without running it: the values of its
// string literals and the details a family's renderer takes from them (a
// default system prompt, a date), and Jinja's `trim`.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tandem::chat {

bool contains(std::string_view s, std::string_view part);
// Jinja's `trim` filter, which is Python's str.strip().
std::string trim(std::string_view s);
// The value of the Jinja string literal whose opening quote is at tmpl[quote].
std::optional<std::string> string_literal(const std::string& tmpl, size_t quote);
// The values of the literals the template outputs directly ({{ "..." }} or {{- '...' }}).
std::vector<std::string> output_literals(const std::string& tmpl);
// The text after `key` up to the end of its string literal (e.g. "December
// 2023" after "Cutting Knowledge Date: ").
std::optional<std::string> text_after(const std::string& tmpl, std::string_view key);

}  // namespace tandem::chat
