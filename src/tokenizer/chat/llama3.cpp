// Llama 3, 3.1, 3.2 and 3.3: <|start_header_id|>role<|end_header_id|>\n\n...<|eot_id|>.
// The dated templates (3.1 on) open with a system turn carrying the knowledge
// cutoff and a date, and render tools: their definitions go into the first user
// turn (the templates' default, tools_in_user_message), a call is the JSON
// object {"name": ..., "parameters": ...} as the whole assistant turn, and a
// tool's result is an "ipython" turn.
#include <fmt/format.h>

#include <ctime>

#include "core/error.h"
#include "tokenizer/chat/renderers.h"
#include "tokenizer/chat/template_text.h"

namespace tandem::chat {
namespace {

constexpr std::string_view kBos = "<|begin_of_text|>";

std::string turn(std::string_view role, std::string_view content) {
  return fmt::format("<|start_header_id|>{}<|end_header_id|>\n\n{}<|eot_id|>", role, content);
}

std::string system_header(const std::string& tmpl, bool tools) {
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
  return fmt::format("{}Cutting Knowledge Date: {}\nToday Date: {}\n\n",
                     tools ? "Environment: ipython\n" : "", cutoff, date);
}

// The guidance the templates put before the tool definitions in the first user turn.
constexpr std::string_view kToolGuidance =
    "Given the following functions, please respond with a JSON for a function call with its "
    "proper arguments that best answers the given prompt.\n\n"
    "Respond in the format {\"name\": function name, \"parameters\": dictionary of argument name "
    "and its value}.Do not use variables.\n\n";

std::string tool_call_turn(const ChatMessage& m, size_t i) {
  if (m.tool_calls.size() != 1)
    fail("messages[{}] has {} tool calls: this model's template takes one call per assistant turn",
         i, m.tool_calls.size());
  const ChatToolCall& c = m.tool_calls[0];
  return turn("assistant",
              fmt::format("{{\"name\": \"{}\", \"parameters\": {}}}", c.name,
                          tojson(c.arguments, fmt::format("messages[{}] tool call arguments", i))));
}

}  // namespace

std::string render_llama3(const std::string& tmpl, const std::vector<ChatMessage>& messages,
                          bool add_generation_prompt, const std::vector<std::string>& tools) {
  for (const auto& m : messages)
    check_role(m, {"system", "user", "assistant", "tool", "ipython"}, "Llama 3");
  std::string out(kBos);
  size_t first = 0;
  const bool dated = contains(tmpl, "Cutting Knowledge Date");
  if (dated) {
    std::string system;
    if (messages[0].role == "system") {
      system = trim(messages[0].content);
      first = 1;
    }
    out += turn("system", system_header(tmpl, !tools.empty()) + system);
    if (!tools.empty()) {
      if (first == messages.size())
        fail(
            "tools need a user message after the system message: this model's template puts "
            "the tools' definitions in it");
      std::string defs;
      for (size_t t = 0; t < tools.size(); ++t)
        defs += tojson(tools[t], fmt::format("tools[{}]", t), 4) + "\n\n";
      out += turn("user", std::string(kToolGuidance) + defs + trim(messages[first].content));
      ++first;
    }
  }
  for (size_t i = first; i < messages.size(); ++i) {
    const auto& m = messages[i];
    if (dated && !m.tool_calls.empty())
      out += tool_call_turn(m, i);
    else if (dated && (m.role == "tool" || m.role == "ipython"))
      // `content is iterable` holds for a string: the template writes it as JSON.
      out += turn("ipython", tojson_string(m.content));
    else
      out += turn(m.role, trim(m.content));
  }
  if (add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

}  // namespace tandem::chat
