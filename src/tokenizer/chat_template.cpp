#include "tokenizer/chat_template.h"

#include <fmt/format.h>

#include "core/error.h"
#include "tokenizer/chat/python_json.h"
#include "tokenizer/chat/renderers.h"
#include "tokenizer/chat/template_text.h"
#include "tokenizer/utf8.h"

namespace tandem {

namespace chat {

void check_role(const ChatMessage& m, std::initializer_list<std::string_view> roles,
                const char* family) {
  for (auto r : roles)
    if (m.role == r) return;
  std::string list;
  for (auto r : roles) list += fmt::format("{}{}", list.empty() ? "" : ", ", r);
  fail("chat message role '{}' is not supported by the {} template (roles: {})", m.role, family,
       list);
}

std::string tojson(const std::string& json_text, const std::string& what, int indent) {
  nlohmann::ordered_json v;
  try {
    v = nlohmann::ordered_json::parse(json_text);
  } catch (const nlohmann::json::exception&) {
    fail("{} is not valid JSON", what);
  }
  return python_json_dumps(v, indent);
}

std::string tojson_string(const std::string& s) {
  return python_json_dumps(nlohmann::ordered_json(s));
}

}  // namespace chat

ChatTemplateFamily detect_chat_template(const std::string& tmpl) {
  check(!tmpl.empty(), "the model has no chat template");
  if (chat::contains(tmpl, "<|start_header_id|>") && chat::contains(tmpl, "<|end_header_id|>") &&
      chat::contains(tmpl, "<|eot_id|>"))
    return ChatTemplateFamily::Llama3;
  if (chat::contains(tmpl, "<|im_start|>") && chat::contains(tmpl, "<|im_end|>"))
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

std::optional<ToolCallFormat> tool_call_format(ChatTemplateFamily family, const std::string& tmpl) {
  ToolCallFormat f;
  switch (family) {
    case ChatTemplateFamily::Llama3:
      // Llama 3.1 on: calls are rendered from message.tool_calls.
      if (!chat::contains(tmpl, "tool_calls") || !chat::contains(tmpl, "Cutting Knowledge Date"))
        return std::nullopt;
      f.arguments_key = "parameters";
      return f;
    case ChatTemplateFamily::ChatML:
      if (!chat::contains(tmpl, "<tool_call>") || !chat::contains(tmpl, "<tools>"))
        return std::nullopt;
      f.open = "<tool_call>";
      f.close = "</tool_call>";
      f.body_prefix = f.body_suffix = "\n";
      f.arguments_key = "arguments";
      f.parallel = true;
      f.fence_open = {"```json\n", "```\n"};
      f.fence_close = "\n```";
      for (const std::string& lit : chat::output_literals(tmpl))
        if (chat::contains(lit, "{{\"name\": <function-name>")) {
          f.bare_prefix = "{";
          f.bare_suffix = "}";
        }
      return f;
  }
  return std::nullopt;
}

std::string render_chat(ChatTemplateFamily family, const std::string& tmpl,
                        const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                        const std::vector<std::string>& tools) {
  check(!messages.empty(), "chat: no messages to render");
  bool calls = false;
  for (const auto& m : messages) calls |= !m.tool_calls.empty();
  if ((calls || !tools.empty()) && !tool_call_format(family, tmpl))
    fail("this model's chat template ({}) cannot render {}", chat_family_name(family),
         tools.empty() ? "tool calls" : "tools");
  switch (family) {
    case ChatTemplateFamily::Llama3:
      return chat::render_llama3(tmpl, messages, add_generation_prompt, tools);
    case ChatTemplateFamily::ChatML:
      return chat::render_chatml(tmpl, messages, add_generation_prompt, tools);
  }
  fail("chat: unknown template family {}", static_cast<int>(family));
}

}  // namespace tandem
