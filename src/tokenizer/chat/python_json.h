// JSON text as Python's json.dumps writes it, which is what Hugging Face's chat
// templates get from their `tojson` filter (json.dumps with ensure_ascii=False):
// ", " and ": " between items, or with an indent, one item per line and ","
// before each line break; non-ASCII characters as they are; object keys in the
// order given. A model trained on templates rendered that way sees tool
// definitions and call arguments spelled exactly so.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

namespace tandem::chat {

// indent < 0: all on one line.
std::string python_json_dumps(const nlohmann::ordered_json& v, int indent = -1);

}  // namespace tandem::chat
