// Chat templates. Rather than run arbitrary Jinja, tandem recognises the template
// families it knows from the model's own template string and renders them in
// C++; an unknown template is an error, never a guess.
#pragma once
#include <string>
#include <vector>

namespace tandem {

struct ChatMessage {
  std::string role;  // "system", "user", "assistant" (and "tool"/"ipython" for llama3)
  std::string content;
};

enum class ChatTemplateFamily {
  Llama3,  // <|start_header_id|>role<|end_header_id|>\n\n...<|eot_id|> (Llama 3, 3.1, 3.2)
  ChatML,  // <|im_start|>role\n...<|im_end|>\n (Qwen2, SmolLM2)
};

// Identify the family of a template string (tokenizer.chat_template). Throws
// tandem::Error for an empty or unrecognised template.
ChatTemplateFamily detect_chat_template(const std::string& tmpl);
const char* chat_family_name(ChatTemplateFamily f);

// Render messages as the model's template would, including the BOS text for
// families whose template writes it, and the assistant header when
// add_generation_prompt. `tmpl` supplies family details (e.g. a default system
// prompt in Qwen2's template, the Llama 3.1 date header). Throws tandem::Error
// for an unknown role or an empty message list.
std::string render_chat(ChatTemplateFamily family, const std::string& tmpl,
                        const std::vector<ChatMessage>& messages, bool add_generation_prompt);

}  // namespace tandem
