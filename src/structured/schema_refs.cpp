#include "structured/schema_refs.h"

#include <fmt/format.h>

#include "structured/json_schema.h"

namespace tandem::structured {
namespace {

using json = nlohmann::ordered_json;

constexpr int kMaxIndexDepth = 256;  // ids deeper than this are not indexed

std::string escape_token(const std::string& key) {  // RFC 6901
  std::string out;
  for (char c : key) out += c == '~' ? "~0" : c == '/' ? "~1" : std::string(1, c);
  return out;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// URI fragments are percent-encoded; "%" not followed by two hex digits stays.
std::string percent_decode(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && hex_value(s[i + 1]) >= 0 && hex_value(s[i + 2]) >= 0) {
      out += static_cast<char>(hex_value(s[i + 1]) * 16 + hex_value(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

std::string without_fragment(const std::string& uri) { return uri.substr(0, uri.find('#')); }

bool has_scheme(const std::string& uri) {
  const size_t colon = uri.find(':');
  return colon != std::string::npos && colon > 0 && uri.find('/') > colon;
}

// A reference resolved against a base URI (RFC 3986 in its common cases: an
// absolute reference stands alone, "/x" replaces the path, "x" replaces the
// last segment).
std::string resolve_uri(const std::string& base, const std::string& ref) {
  if (ref.empty()) return base;
  if (has_scheme(ref) || base.empty()) return ref;
  if (ref[0] == '/') {
    const size_t scheme_end = base.find("://");
    const size_t path = scheme_end == std::string::npos ? 0 : base.find('/', scheme_end + 3);
    return (path == std::string::npos ? base : base.substr(0, path)) + ref;
  }
  const size_t slash = base.rfind('/');
  return (slash == std::string::npos ? "" : base.substr(0, slash + 1)) + ref;
}

}  // namespace

SchemaRefs::SchemaRefs(const json& root) : root_(root) {
  if (root.is_object())
    for (const char* key : {"$id", "id"})
      if (root.contains(key) && root[key].is_string())
        base_ = without_fragment(root[key].get<std::string>());
  index(root, "", 0);
}

void SchemaRefs::index(const json& node, const std::string& pointer, int depth) {
  if (depth > kMaxIndexDepth) return;
  if (node.is_object()) {
    for (const char* key : {"$id", "id", "$anchor"}) {
      if (!node.contains(key) || !node[key].is_string()) continue;
      std::string id = node[key].get<std::string>();
      if (std::string_view(key) == "$anchor") id = "#" + id;
      ids_.emplace(id, pointer);
      ids_.emplace(resolve_uri(base_, id), pointer);
    }
    for (const auto& [k, v] : node.items()) index(v, pointer + "/" + escape_token(k), depth + 1);
  } else if (node.is_array()) {
    for (size_t i = 0; i < node.size(); ++i)
      index(node[i], pointer + "/" + std::to_string(i), depth + 1);
  }
}

bool SchemaRefs::lookup(const std::string& ref, Target& out, std::string& why) const {
  const size_t hash = ref.find('#');
  const std::string doc = ref.substr(0, hash);
  const std::string fragment =
      hash == std::string::npos ? "" : percent_decode(ref.substr(hash + 1));
  // The document the reference names: the root, or a subschema with that $id.
  std::string doc_pointer;
  if (!doc.empty() && doc != base_ && resolve_uri(base_, doc) != base_) {
    auto it = ids_.find(doc);
    if (it == ids_.end()) it = ids_.find(resolve_uri(base_, doc));
    if (it == ids_.end()) {
      why = fmt::format(
          "'$ref' = '{}': only references within the schema are supported (no "
          "$id in the schema is '{}')",
          ref, doc);
      return false;
    }
    doc_pointer = it->second;
  }
  if (!fragment.empty() && fragment[0] != '/') {  // a plain name
    auto it = ids_.find("#" + fragment);
    if (it == ids_.end()) {
      why = fmt::format("'$ref' = '{}' names no $anchor or id '#{}' in the schema", ref, fragment);
      return false;
    }
    doc_pointer = it->second;
  } else {
    doc_pointer += fragment;
  }
  try {
    out.node = &root_.at(json::json_pointer(doc_pointer));
    out.pointer = doc_pointer;
    return true;
  } catch (const json::exception&) {
    why = fmt::format("'$ref' = '{}' names nothing in the schema", ref);
    return false;
  }
}

SchemaRefs::Target SchemaRefs::resolve(const std::string& ref, const std::string& path) const {
  Target t{};
  std::string why;
  if (!lookup(ref, t, why)) throw SchemaError(path + "/$ref", why);
  return t;
}

const json* SchemaRefs::find(const std::string& ref) const {
  Target t{};
  std::string why;
  return lookup(ref, t, why) ? t.node : nullptr;
}

}  // namespace tandem::structured
