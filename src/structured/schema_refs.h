// Where a JSON Schema's $ref points, within the schema itself: the forms real
// schemas use.
//   "#", "#/json/pointer"      RFC 6901 pointers (with ~0 and ~1), percent-
//                              decoded first as URI fragments are
//                              ("#/definitions/a%20b");
//   "#name"                    a plain-name fragment: $anchor "name", or an
//                              $id / id "#name" (drafts 4 to 7);
//   "base#..." or "base"       where base is the $id / id of the root or of a
//                              subschema, or resolves to one against the
//                              root's $id (a relative reference such as
//                              "definitions.json#/a" beside
//                              "$id": "http://x/y/root.json").
// Anything else (another document, a meta-schema URL) is refused: tandem
// fetches nothing.
#pragma once
#include <map>
#include <string>

#include <nlohmann/json.hpp>

namespace tandem::structured {

class SchemaRefs {
 public:
  // Indexes the $id, id and $anchor values of `root` (which must outlive this).
  explicit SchemaRefs(const nlohmann::ordered_json& root);

  struct Target {
    const nlohmann::ordered_json* node;
    std::string pointer;  // the JSON pointer of node in the root ("" for the root)
  };
  // Throws SchemaError at `path` + "/$ref" for a reference that names nothing
  // in the schema or points outside it.
  Target resolve(const std::string& ref, const std::string& path) const;
  // The target, or nullptr where resolve would throw.
  const nlohmann::ordered_json* find(const std::string& ref) const;

 private:
  bool lookup(const std::string& ref, Target& out, std::string& why) const;
  void index(const nlohmann::ordered_json& node, const std::string& pointer, int depth);

  const nlohmann::ordered_json& root_;
  std::string base_;  // the root's $id without fragment, "" if none
  std::map<std::string, std::string>
      ids_;  // $id / id / $anchor (as written and resolved) -> pointer
};

}  // namespace tandem::structured
