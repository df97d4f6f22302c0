// Reading tool calls back out of a chat request's output text, whole or as it
// streams. The text follows the template's format (tokenizer/chat_template.h)
// because a ToolCallConstraint kept it there: content, then calls, each
//   Hermes: <tool_call>\n{"name": "NAME", "arguments": {...}}\n</tool_call>
//   Hermes, fenced: ```json\n{"name": ...}\n``` in free text, ending the output
//   bare:   {"name": "NAME", "parameters": {...}} as the whole output (Llama's
//           only form; Qwen2.5-Coder's too, with "arguments").
// A call's arguments are the JSON text the model wrote, byte for byte.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/chat_template.h"

namespace tandem::server {

struct OutputToolCall {
  std::string name;       // "" until the name is complete
  std::string arguments;  // so far (complete once `complete`)
  bool complete = false;  // the call is closed
};

struct ToolCallOutput {
  std::string content;  // the text outside calls (before the first)
  // The part of content that is content whatever follows: the end may still
  // become a fence that opens a call.
  size_t content_final = 0;
  std::vector<OutputToolCall> calls;
};

// The content and calls of `text` so far: a call cut short (the output ended,
// or more is to come) has complete == false.
ToolCallOutput read_tool_calls(const ToolCallFormat& format, std::string_view text);

// A streamed output's increments in OpenAI's delta shape: new content, a call's
// start (index, id, name) once its name is complete, then its arguments piece by
// piece.
class ToolCallStream {
 public:
  struct Delta {
    std::string content;
    struct CallDelta {
      int index = 0;
      bool start = false;  // first delta of the call: carries its id and name
      std::string name, arguments;
    };
    std::vector<CallDelta> calls;
    bool empty() const { return content.empty() && calls.empty(); }
  };

  explicit ToolCallStream(ToolCallFormat format) : format_(std::move(format)) {}
  Delta push(std::string_view text);
  // The end of the output: content still held back.
  std::string finish();
  // Calls whose end the text reached.
  int complete_calls() const { return complete_; }

 private:
  ToolCallFormat format_;
  std::string text_;
  size_t content_sent_ = 0;
  std::vector<size_t> args_sent_;  // per started call
  int complete_ = 0;
};

}  // namespace tandem::server
