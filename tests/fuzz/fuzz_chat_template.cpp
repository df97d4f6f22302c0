// The chat template renderer: a template string (whose family and details,
// such as a default system prompt or the Llama 3.1 date header, are read from
// its text) and a conversation. Input layout: one byte of flags (bit 0:
// add_generation_prompt, bit 1: render as the other family too), then the
// template, then role and content strings, all separated by NUL bytes.
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "fuzz_support.h"
#include "tokenizer/chat_template.h"

using namespace tandem;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t flags = data[0];
  const auto parts =
      fuzz::split(std::string_view(reinterpret_cast<const char*>(data) + 1, size - 1), '\0', 65);
  const std::string tmpl(parts[0]);
  std::vector<ChatMessage> messages;
  for (size_t i = 1; i + 1 < parts.size(); i += 2)
    messages.push_back({std::string(parts[i]), std::string(parts[i + 1])});
  std::vector<ChatTemplateFamily> families;
  try {
    families.push_back(detect_chat_template(tmpl));
  } catch (const Error&) {
  }
  if (flags & 2)
    for (auto f : {ChatTemplateFamily::Llama3, ChatTemplateFamily::ChatML})
      if (families.empty() || families[0] != f) families.push_back(f);
  for (auto family : families) {
    try {
      const std::string out = render_chat(family, tmpl, messages, flags & 1);
      FUZZ_CHECK(!out.empty());
    } catch (const Error&) {
    }
  }
  return 0;
}
