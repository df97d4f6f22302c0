#include "tokenizer/chat_template.h"

#include <ctime>
#include <optional>
#include <string_view>

#include "core/error.h"
#include "tokenizer/utf8.h"

namespace tandem {
namespace {

bool contains(std::string_view s, std::string_view part) { return s.find(part) != s.npos; }

// Jinja's `trim` filter is Python's str.strip(): Unicode whitespace plus the
// ASCII separators U+001C..U+001F.
bool is_py_space(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

std::string trim(std::string_view s) {
  size_t begin = 0, end = s.size();
  uint32_t cp;
  while (begin < end) {
    size_t n = utf8::decode(s, begin, cp);
    if (n == 0 || !is_py_space(cp)) break;
    begin += n;
  }
  while (end > begin) {  // step back over one character
    size_t start = end - 1;
    while (start > begin && (static_cast<uint8_t>(s[start]) & 0xC0) == 0x80) --start;
    size_t n = utf8::decode(s, start, cp);
    if (n == 0 || start + n != end || !is_py_space(cp)) break;
    end = start;
  }
  return std::string(s.substr(begin, end - begin));
}

// The value of the Jinja string literal whose opening quote is at tmpl[quote].
std::optional<std::string> string_literal(const std::string& tmpl, size_t quote) {
  char q = tmpl[quote];
  std::string out;
  for (size_t i = quote + 1; i < tmpl.size(); ++i) {
    char c = tmpl[i];
    if (c == q) return out;
    if (c != '\\') {
      out += c;
      continue;
    }
    if (++i == tmpl.size()) break;
    switch (tmpl[i]) {
      case 'n':
        out += '\n';
        break;
      case 't':
        out += '\t';
        break;
      case 'r':
        out += '\r';
        break;
      default:
        out += tmpl[i];  // \' \" \\ and anything else: the character itself
    }
  }
  return std::nullopt;
}

void check_role(const ChatMessage& m, std::initializer_list<std::string_view> roles,
                const char* family) {
  for (auto r : roles)
    if (m.role == r) return;
  std::string list;
  for (auto r : roles) list += fmt::format("{}{}", list.empty() ? "" : ", ", r);
  fail("chat message role '{}' is not supported by the {} template (roles: {})", m.role, family,
       list);
}

// ---- Llama 3 ---------------------------------------------------------------

constexpr std::string_view kLlama3Bos = "<|begin_of_text|>";

std::string llama3_turn(std::string_view role, std::string_view content) {
  return fmt::format("<|start_header_id|>{}<|end_header_id|>\n\n{}<|eot_id|>", role, content);
}

// The text after `key` in the template up to the end of its string literal
// (e.g. "December 2023" after "Cutting Knowledge Date: ").
std::optional<std::string> text_after(const std::string& tmpl, std::string_view key) {
  size_t at = tmpl.find(key);
  if (at == std::string::npos) return std::nullopt;
  size_t begin = at + key.size(), end = begin;
  while (end < tmpl.size() && tmpl[end] != '\\' && tmpl[end] != '"' && tmpl[end] != '\'' &&
         tmpl[end] != '\n')
    ++end;
  return tmpl.substr(begin, end - begin);
}

// Llama 3.1 / 3.2 templates open with a system turn carrying the knowledge
// cutoff and today's date; Llama 3's template has no such turn.
std::string llama31_system_header(const std::string& tmpl) {
  std::string cutoff = text_after(tmpl, "Cutting Knowledge Date: ").value_or("December 2023");
  std::string date;
  if (contains(tmpl, "strftime_now")) {  // Llama 3.2: the date of rendering
    std::time_t now = std::time(nullptr);
    std::tm tm{};
    localtime_r(&now, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%d %b %Y", &tm);
    date = buf;
  } else {
    date = text_after(tmpl, "set date_string = \"").value_or("26 Jul 2024");
  }
  return fmt::format("Cutting Knowledge Date: {}\nToday Date: {}\n\n", cutoff, date);
}

std::string render_llama3(const std::string& tmpl, const std::vector<ChatMessage>& messages,
                          bool add_generation_prompt) {
  for (const auto& m : messages)
    check_role(m, {"system", "user", "assistant", "tool", "ipython"}, "Llama 3");
  std::string out(kLlama3Bos);
  size_t first = 0;
  const bool dated = contains(tmpl, "Cutting Knowledge Date");
  if (dated) {
    std::string system;
    if (messages[0].role == "system") {
      system = trim(messages[0].content);
      first = 1;
    }
    out += llama3_turn("system", llama31_system_header(tmpl) + system);
  }
  for (size_t i = first; i < messages.size(); ++i) {
    const auto& m = messages[i];
    if (dated && (m.role == "tool" || m.role == "ipython"))
      out += llama3_turn("ipython", m.content);  // tool output goes in untrimmed
    else
      out += llama3_turn(m.role, trim(m.content));
  }
  if (add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

// ---- ChatML ----------------------------------------------------------------

// The system prompt a template inserts when the conversation has none: a
// literal '<|im_start|>system\n...<|im_end|>' (Qwen2, Qwen2.5, SmolLM2).
std::optional<std::string> default_system_prompt(const std::string& tmpl) {
  constexpr std::string_view kOpen = "<|im_start|>system\n", kClose = "<|im_end|>";
  for (size_t at = tmpl.find("<|im_start|>system"); at != std::string::npos;
       at = tmpl.find("<|im_start|>system", at + 1)) {
    if (at == 0 || (tmpl[at - 1] != '\'' && tmpl[at - 1] != '"')) continue;
    auto lit = string_literal(tmpl, at - 1);
    if (!lit || lit->compare(0, kOpen.size(), kOpen) != 0) continue;
    size_t close = lit->find(kClose, kOpen.size());
    if (close == std::string::npos) continue;  // the system message's own opening
    return lit->substr(kOpen.size(), close - kOpen.size());
  }
  return std::nullopt;
}

std::string render_chatml(const std::string& tmpl, const std::vector<ChatMessage>& messages,
                          bool add_generation_prompt) {
  // Qwen2.5's template wraps tool results in a user turn; others know no tool role.
  const bool tool_responses = contains(tmpl, "<tool_response>");
  for (const auto& m : messages) {
    if (tool_responses)
      check_role(m, {"system", "user", "assistant", "tool"}, "ChatML");
    else
      check_role(m, {"system", "user", "assistant"}, "ChatML");
  }
  std::string out;
  if (messages[0].role != "system")
    if (auto sys = default_system_prompt(tmpl))
      out += fmt::format("<|im_start|>system\n{}<|im_end|>\n", *sys);
  for (size_t i = 0; i < messages.size(); ++i) {
    const auto& m = messages[i];
    if (m.role == "tool") {  // consecutive tool results share one user turn
      if (i == 0 || messages[i - 1].role != "tool") out += "<|im_start|>user";
      out += fmt::format("\n<tool_response>\n{}\n</tool_response>", m.content);
      if (i + 1 == messages.size() || messages[i + 1].role != "tool") out += "<|im_end|>\n";
      continue;
    }
    out += fmt::format("<|im_start|>{}\n{}<|im_end|>\n", m.role, m.content);
  }
  if (add_generation_prompt) out += "<|im_start|>assistant\n";
  return out;
}

}  // namespace

ChatTemplateFamily detect_chat_template(const std::string& tmpl) {
  check(!tmpl.empty(), "the model has no chat template");
  if (contains(tmpl, "<|start_header_id|>") && contains(tmpl, "<|end_header_id|>") &&
      contains(tmpl, "<|eot_id|>"))
    return ChatTemplateFamily::Llama3;
  if (contains(tmpl, "<|im_start|>") && contains(tmpl, "<|im_end|>"))
    return ChatTemplateFamily::ChatML;
  std::string head = utf8::sanitize(tmpl.substr(0, 80));
  for (char& c : head)
    if (c == '\n') c = ' ';
  fail("unrecognised chat template (neither Llama 3 nor ChatML): \"{}{}\"", head,
       tmpl.size() > 80 ? "..." : "");
}

const char* chat_family_name(ChatTemplateFamily f) {
  switch (f) {
    case ChatTemplateFamily::Llama3:
      return "llama3";
    case ChatTemplateFamily::ChatML:
      return "chatml";
  }
  return "unknown";
}

std::string render_chat(ChatTemplateFamily family, const std::string& tmpl,
                        const std::vector<ChatMessage>& messages, bool add_generation_prompt) {
  check(!messages.empty(), "chat: no messages to render");
  switch (family) {
    case ChatTemplateFamily::Llama3:
      return render_llama3(tmpl, messages, add_generation_prompt);
    case ChatTemplateFamily::ChatML:
      return render_chatml(tmpl, messages, add_generation_prompt);
  }
  fail("chat: unknown template family {}", static_cast<int>(family));
}

}  // namespace tandem
