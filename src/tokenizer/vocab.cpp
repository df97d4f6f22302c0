#include "tokenizer/vocab.h"

namespace tandem {

void Vocab::build_index() {
  index_.clear();
  index_.reserve(pieces.size());
  for (int id = 0; id < size(); ++id) index_.emplace(pieces[id], id);
}

std::optional<int> Vocab::find(std::string_view piece) const {
  auto it = index_.find(piece);
  if (it == index_.end()) return std::nullopt;
  return it->second;
}

}  // namespace tandem
