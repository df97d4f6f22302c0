// Chat templates. Rather than run arbitrary Jinja, tandem recognises the template
// families it knows from the model's own template string and renders them in
// C++; an unknown template is an error, never a guess.
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace tandem {

// A tool call in an assistant turn of the history (OpenAI's message.tool_calls[]).
struct ChatToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // a JSON object's text, as OpenAI's function.arguments
};

struct ChatMessage {
  std::string role;  // "system", "user", "assistant" (and "tool"/"ipython" for llama3)
  std::string content;
  std::vector<ChatToolCall> tool_calls = {};  // assistant turns that called tools
  std::string tool_call_id = {};              // a tool result: the call it answers
};

enum class ChatTemplateFamily {
  Llama3,  // <|start_header_id|>role<|end_header_id|>\n\n...<|eot_id|> (Llama 3, 3.1, 3.2)
  ChatML,  // <|im_start|>role\n...<|im_end|>\n (Qwen2, SmolLM2)
};

// Identify the family of a template string (tokenizer.chat_template). Throws
// tandem::Error for an empty or unrecognised template.
ChatTemplateFamily detect_chat_template(const std::string& tmpl);
const char* chat_family_name(ChatTemplateFamily f);

// How a template's model writes a tool call, for templates that render tools:
//   Hermes (Qwen2.5): <tool_call>\n{"name": NAME, "arguments": ARGS}\n</tool_call>,
//     several in one turn one after another ("\n" between them);
//   Llama 3.1+ JSON: the whole turn is {"name": NAME, "parameters": ARGS}, one call.
struct ToolCallFormat {
  std::string open, close;               // the markers around a call ("" for none)
  std::string body_prefix, body_suffix;  // between the markers and the JSON object
  std::string arguments_key;             // "arguments" or "parameters"
  bool parallel = false;                 // several calls in one assistant turn
  // Another way the model opens a call in free text: a Markdown code fence
  // around the same JSON object (Qwen2.5-Coder writes ```json\n{"name": ...}
  // as often as <tool_call> when it may answer in text). Empty: none.
  std::vector<std::string> fence_open = {};
  std::string fence_close = {};
  // Around a bare call (the whole output as the call's object): "" for Llama;
  // "{" and "}" for a template whose instructions show the call as
  // {{"name": ...}} (Qwen2.5-Coder-1.5B's), as the model then writes it.
  std::string bare_prefix = {}, bare_suffix = {};
};

// The tool-call format of a template, or nullopt when the template cannot
// render tools (SmolLM2's ChatML, Llama 3.0).
std::optional<ToolCallFormat> tool_call_format(ChatTemplateFamily family, const std::string& tmpl);

// Render messages as the model's template would, including the BOS text for
// families whose template writes it, and the assistant header when
// add_generation_prompt. `tmpl` supplies family details (e.g. a default system
// prompt in Qwen2's template, the Llama 3.1 date header). `tools` are the
// tools' definitions as JSON text (OpenAI's {"type": "function", "function":
// {...}}), written where the template writes them. Throws tandem::Error for an
// unknown role, an empty message list, tools or tool calls the template cannot
// render, or arguments that are not a JSON object.
std::string render_chat(ChatTemplateFamily family, const std::string& tmpl,
                        const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                        const std::vector<std::string>& tools = {});

}  // namespace tandem
