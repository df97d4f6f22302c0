// ChatML: <|im_start|>role\n...<|im_end|>\n (Qwen2, Qwen2.5, SmolLM2). Qwen2.5's
// template renders tools: their definitions in the system turn between <tools>
// tags with the template's own instructions around them, each call of an
// assistant turn as <tool_call>\n{"name": ..., "arguments": ...}\n</tool_call>,
// and tool results as <tool_response> blocks in a user turn.
#include <fmt/format.h>

#include "core/error.h"
#include "tokenizer/chat/renderers.h"
#include "tokenizer/chat/template_text.h"

namespace tandem::chat {
namespace {

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

// The system turn with tools: the template's text before the definitions (it
// ends in "<tools>") and after them (from "\n</tools>" to the turn's end).
std::string tools_system_turn(const std::string& tmpl, const std::string& system,
                              const std::vector<std::string>& tools) {
  std::optional<std::string> head, tail;
  for (const std::string& lit : output_literals(tmpl)) {
    if (!head && lit.ends_with("<tools>")) head = lit;
    if (!tail && lit.starts_with("\n</tools>")) tail = lit;
  }
  if (!head || !tail) fail("the chat template has tools but no <tools> block tandem can read");
  std::string out = "<|im_start|>system\n" + system + *head;
  for (size_t t = 0; t < tools.size(); ++t)
    out += "\n" + tojson(tools[t], fmt::format("tools[{}]", t));
  return out + *tail;
}

std::string assistant_with_calls(const ChatMessage& m, size_t i) {
  std::string out = "<|im_start|>assistant";
  if (!m.content.empty()) out += "\n" + m.content;
  for (size_t k = 0; k < m.tool_calls.size(); ++k) {
    const ChatToolCall& c = m.tool_calls[k];
    out += fmt::format(
        "\n<tool_call>\n{{\"name\": \"{}\", \"arguments\": {}}}\n</tool_call>", c.name,
        tojson(c.arguments, fmt::format("messages[{}].tool_calls[{}] arguments", i, k)));
  }
  return out + "<|im_end|>\n";
}

}  // namespace

std::string render_chatml(const std::string& tmpl, const std::vector<ChatMessage>& messages,
                          bool add_generation_prompt, const std::vector<std::string>& tools) {
  // Qwen2.5's template wraps tool results in a user turn; others know no tool role.
  const bool tool_responses = contains(tmpl, "<tool_response>");
  for (const auto& m : messages) {
    if (tool_responses)
      check_role(m, {"system", "user", "assistant", "tool"}, "ChatML");
    else
      check_role(m, {"system", "user", "assistant"}, "ChatML");
  }
  std::string out;
  const bool has_system = messages[0].role == "system";
  size_t first = 0;
  if (!tools.empty()) {
    const std::string system =
        has_system ? messages[0].content : default_system_prompt(tmpl).value_or("");
    out += tools_system_turn(tmpl, system, tools);
    first = has_system ? 1 : 0;
  } else if (!has_system) {
    if (auto sys = default_system_prompt(tmpl))
      out += fmt::format("<|im_start|>system\n{}<|im_end|>\n", *sys);
  }
  for (size_t i = first; i < messages.size(); ++i) {
    const auto& m = messages[i];
    if (m.role == "tool") {  // consecutive tool results share one user turn
      if (i == 0 || messages[i - 1].role != "tool") out += "<|im_start|>user";
      out += fmt::format("\n<tool_response>\n{}\n</tool_response>", m.content);
      if (i + 1 == messages.size() || messages[i + 1].role != "tool") out += "<|im_end|>\n";
      continue;
    }
    if (m.role == "assistant" && !m.tool_calls.empty()) {
      out += assistant_with_calls(m, i);
      continue;
    }
    out += fmt::format("<|im_start|>{}\n{}<|im_end|>\n", m.role, m.content);
  }
  if (add_generation_prompt) out += "<|im_start|>assistant\n";
  return out;
}

}  // namespace tandem::chat
