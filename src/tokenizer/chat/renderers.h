// The renderers of the template families chat_template.h knows, one file each.
// They get messages whose roles are checked and a template detected as theirs.
#pragma once
#include <string>
#include <vector>

#include "tokenizer/chat_template.h"

namespace tandem::chat {

std::string render_llama3(const std::string& tmpl, const std::vector<ChatMessage>& messages,
                          bool add_generation_prompt, const std::vector<std::string>& tools);
std::string render_chatml(const std::string& tmpl, const std::vector<ChatMessage>& messages,
                          bool add_generation_prompt, const std::vector<std::string>& tools);

// Roles a family accepts; anything else is an error naming the role.
void check_role(const ChatMessage& m, std::initializer_list<std::string_view> roles,
                const char* family);
// A tool definition or a call's arguments as the template's `tojson` writes them
// (indent < 0: one line). Throws tandem::Error naming `what` for text that is not JSON.
std::string tojson(const std::string& json_text, const std::string& what, int indent = -1);
// A string as `tojson` writes it (quoted and escaped).
std::string tojson_string(const std::string& s);

}  // namespace tandem::chat
