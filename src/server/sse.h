// Server-sent events as OpenAI streams them: each event is one "data:" line
// holding a JSON object, then a blank line; the stream ends with "data: [DONE]".
#pragma once
#include <string>
#include <string_view>

namespace tandem::server {

// "data: <payload>\n\n". The payload must hold no newline (compact JSON never does).
std::string sse_event(std::string_view payload);
// "data: [DONE]\n\n"
std::string sse_done();

}  // namespace tandem::server
