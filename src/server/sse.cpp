#include "server/sse.h"

namespace tandem::server {

std::string sse_event(std::string_view payload) {
  std::string s;
  s.reserve(payload.size() + 8);
  s += "data: ";
  s += payload;
  s += "\n\n";
  return s;
}

std::string sse_done() { return "data: [DONE]\n\n"; }

}  // namespace tandem::server
