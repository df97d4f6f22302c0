// Exercises a tokenizer that loaded from a fuzzed file: encodes a fixed text
// (plain words, digits, control-token text, bytes that are not UTF-8) and
// decodes the ids again; every id must lie inside the vocabulary.
#pragma once
#include "tokenizer/tokenizer.h"

namespace tandem::fuzz {

void probe_tokenizer(const Tokenizer& tok);

}  // namespace tandem::fuzz
