#include "server/tool_call_output.h"

#include <nlohmann/json.hpp>

namespace tandem::server {
namespace {

bool is_ws(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

// A scan of one call's JSON object {"name": "NAME", "<key>": VALUE}, as far as
// the text goes. The grammar fixed the member order and spelling; only the
// whitespace between tokens varies.
class CallScanner {
 public:
  enum class Result { Complete, Partial, Mismatch };
  CallScanner(std::string_view s, size_t at) : s_(s), i_(at) {}

  // Fills `call` from the object at the scanner's position, and *end with the
  // position after it when it is complete. Partial: the text ends inside it;
  // Mismatch: the text there is not a call.
  Result scan(OutputToolCall& call, size_t* end) {
    skip_ws();
    if (!expect('{') || !(skip_ws(), string_token()) || !(skip_ws(), expect(':'))) return fail();
    skip_ws();
    const size_t name_at = i_;
    if (!string_token()) return fail();
    call.name = decode_string(s_.substr(name_at, i_ - name_at));
    skip_ws();
    if (!expect(',') || !(skip_ws(), string_token()) || !(skip_ws(), expect(':'))) {
      call.name.clear();
      return fail();
    }
    skip_ws();
    const size_t args_at = i_;
    const bool done = value();
    call.arguments = std::string(s_.substr(args_at, i_ - args_at));
    if (!done) return fail();
    skip_ws();
    if (!expect('}')) return fail();
    *end = i_;
    return Result::Complete;
  }

 private:
  Result fail() const { return i_ >= s_.size() ? Result::Partial : Result::Mismatch; }
  void skip_ws() {
    while (i_ < s_.size() && is_ws(s_[i_])) ++i_;
  }
  bool expect(char c) {
    if (i_ >= s_.size() || s_[i_] != c) return false;
    ++i_;
    return true;
  }
  // A whole string token; false (position at the end) when cut short.
  bool string_token() {
    if (!expect('"')) return false;
    while (i_ < s_.size()) {
      const char c = s_[i_++];
      if (c == '\\') {
        ++i_;
      } else if (c == '"') {
        return true;
      }
    }
    i_ = s_.size();
    return false;
  }
  // A whole JSON value (objects and arrays by depth, strings by their quotes,
  // scalars up to the next delimiter); false when the text ends inside it.
  bool value() {
    int depth = 0;
    while (i_ < s_.size()) {
      const char c = s_[i_];
      if (c == '"') {
        if (!string_token()) return false;
      } else if (c == '{' || c == '[') {
        ++depth;
        ++i_;
      } else if (c == '}' || c == ']') {
        if (depth == 0) return true;  // a scalar's end: the enclosing object closes
        --depth;
        ++i_;
      } else if (depth == 0 && (c == ',' || is_ws(c))) {
        return true;
      } else {
        ++i_;
      }
      if (depth == 0 && (c == '"' || c == '}' || c == ']')) return true;
    }
    return false;
  }
  static std::string decode_string(std::string_view quoted) {
    try {
      return nlohmann::json::parse(quoted).get<std::string>();
    } catch (const nlohmann::json::exception&) {
      return std::string(quoted);
    }
  }

  std::string_view s_;
  size_t i_;
};

// The longest end of `text` that begins a marker or a fence of the format (it
// may still become one).
size_t opener_prefix_at_end(std::string_view text, const ToolCallFormat& format) {
  size_t held = 0;
  auto hold = [&](std::string_view o) {
    for (size_t len = std::min(o.size() - 1, text.size()); len > held; --len)
      if (text.substr(text.size() - len) == o.substr(0, len)) {
        held = len;
        return;
      }
  };
  hold(format.open);
  for (const std::string& f : format.fence_open) hold(f);
  return held;
}

// Calls in marker form from `at` (an opening marker) on.
void read_marked_calls(const ToolCallFormat& format, std::string_view text, size_t at,
                       ToolCallOutput& out) {
  while (at != std::string_view::npos) {
    OutputToolCall call;
    size_t end = 0;
    const auto r = CallScanner(text, at + format.open.size()).scan(call, &end);
    at = std::string_view::npos;
    if (r == CallScanner::Result::Complete) {
      const size_t close = text.find(format.close, end);
      call.complete = close != std::string_view::npos;
      if (call.complete) at = text.find(format.open, close + format.close.size());
    }
    out.calls.push_back(std::move(call));
  }
}

}  // namespace

ToolCallOutput read_tool_calls(const ToolCallFormat& format, std::string_view text) {
  ToolCallOutput out;
  const size_t bare = format.bare_prefix.size();
  if (text.size() > bare && text.starts_with(format.bare_prefix) && text[bare] == '{') {
    OutputToolCall call;  // a bare call: the whole output
    size_t end = 0;
    const auto r = CallScanner(text, bare).scan(call, &end);
    if (r != CallScanner::Result::Mismatch) {
      call.complete =
          r == CallScanner::Result::Complete && text.substr(end).starts_with(format.bare_suffix);
      out.calls.push_back(std::move(call));
      return out;
    }
  }
  if (format.open.empty()) {  // Llama: calls are bare only
    out.content = std::string(text);
    out.content_final = text.size();
    return out;
  }
  size_t pos = 0;
  while (true) {
    const size_t marker = text.find(format.open, pos);
    size_t fence_at = std::string_view::npos;
    const std::string* fence = nullptr;
    for (const std::string& f : format.fence_open)
      if (size_t at = text.find(f, pos); at < fence_at) {
        fence_at = at;
        fence = &f;
      }
    if (fence && fence_at < marker) {
      OutputToolCall call;
      size_t end = 0;
      const auto r = CallScanner(text, fence_at + fence->size()).scan(call, &end);
      if (r == CallScanner::Result::Mismatch) {  // a code block, not a call
        pos = fence_at + 1;
        continue;
      }
      out.content = std::string(text.substr(0, fence_at));
      out.content_final = fence_at;
      call.complete =
          r == CallScanner::Result::Complete && text.substr(end).starts_with(format.fence_close);
      out.calls.push_back(std::move(call));
      return out;  // a fenced call ends the output
    }
    if (marker == std::string_view::npos) {
      out.content = std::string(text);
      out.content_final = text.size() - opener_prefix_at_end(text.substr(pos), format);
      return out;
    }
    out.content = std::string(text.substr(0, marker));
    out.content_final = marker;
    read_marked_calls(format, text, marker, out);
    return out;
  }
}

ToolCallStream::Delta ToolCallStream::push(std::string_view piece) {
  text_ += piece;
  Delta d;
  ToolCallOutput now = read_tool_calls(format_, text_);
  // The output is content or a bare call from its first character: wait for it.
  if (text_.empty()) return d;
  // Content is sent once it cannot turn out to open a call.
  if (now.content_final > content_sent_) {
    d.content = now.content.substr(content_sent_, now.content_final - content_sent_);
    content_sent_ = now.content_final;
  }
  complete_ = 0;
  for (size_t k = 0; k < now.calls.size(); ++k) {
    const OutputToolCall& c = now.calls[k];
    complete_ += c.complete;
    if (c.name.empty()) break;  // its name is not complete yet
    Delta::CallDelta cd;
    cd.index = static_cast<int>(k);
    if (k == args_sent_.size()) {
      cd.start = true;
      cd.name = c.name;
      args_sent_.push_back(0);
    }
    if (c.arguments.size() > args_sent_[k]) {
      cd.arguments = c.arguments.substr(args_sent_[k]);
      args_sent_[k] = c.arguments.size();
    }
    if (cd.start || !cd.arguments.empty()) d.calls.push_back(std::move(cd));
  }
  return d;
}

std::string ToolCallStream::finish() {
  // The end of the output: content held back for a fence that never came is content.
  ToolCallOutput now = read_tool_calls(format_, text_);
  std::string rest;
  if (now.calls.empty() && now.content.size() > content_sent_)
    rest = now.content.substr(content_sent_);
  content_sent_ = now.content.size();
  return rest;
}

}  // namespace tandem::server
