#include "tokenizer/unicode_nfc.h"

#include <algorithm>
#include <vector>

#include "tokenizer/unicode_nfc_data.h"
#include "tokenizer/utf8.h"

namespace tandem {
namespace {

using namespace nfc_data;

// Hangul syllables compose and decompose by arithmetic.
constexpr uint32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr uint32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount,
                   kSCount = kLCount * kNCount;

// Code points below this are NFC whatever surrounds them, and never compose.
constexpr uint32_t kFirstAffected = 0x300;

uint8_t combining_class(uint32_t cp) {
  if (cp < kFirstAffected) return 0;
  const auto* end = kCombiningClasses + kCombiningClassCount;
  auto it = std::upper_bound(kCombiningClasses, end, cp,
                             [](uint32_t c, const CombiningClassRange& r) { return c < r.first; });
  if (it == kCombiningClasses) return 0;
  --it;
  return cp <= it->last ? it->ccc : 0;
}

void decompose(uint32_t cp, std::vector<uint32_t>& out) {
  if (cp >= kSBase && cp < kSBase + kSCount) {
    uint32_t s = cp - kSBase;
    out.push_back(kLBase + s / kNCount);
    out.push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount != 0) out.push_back(kTBase + s % kTCount);
    return;
  }
  const auto* end = kDecompositions + kDecompositionCount;
  auto it = std::lower_bound(kDecompositions, end, cp,
                             [](const Decomposition& d, uint32_t c) { return d.cp < c; });
  if (cp < 0xC0 || it == end || it->cp != cp) {
    out.push_back(cp);
    return;
  }
  decompose(it->first, out);
  if (it->second != 0) decompose(it->second, out);
}

// The primary composite of a pair, or 0.
uint32_t compose(uint32_t a, uint32_t b) {
  if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount)
    return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
  if (a >= kSBase && a < kSBase + kSCount && (a - kSBase) % kTCount == 0 && b > kTBase &&
      b < kTBase + kTCount)
    return a + (b - kTBase);
  const auto* end = kCompositions + kCompositionCount;
  auto it = std::lower_bound(kCompositions, end, std::pair(a, b),
                             [](const Composition& c, std::pair<uint32_t, uint32_t> k) {
                               return std::pair(c.first, c.second) < k;
                             });
  return it != end && it->first == a && it->second == b ? it->composite : 0;
}

// NFC of a run of valid UTF-8.
void normalize_run(std::string_view run, std::string& out) {
  std::vector<uint32_t> cps;
  uint32_t cp;
  for (size_t i = 0; i < run.size();) {
    i += utf8::decode(run, i, cp);
    decompose(cp, cps);
  }
  // Canonical order: non-starters sorted by class, stably, between starters.
  std::vector<uint8_t> cls(cps.size());
  for (size_t i = 0; i < cps.size(); ++i) cls[i] = combining_class(cps[i]);
  for (size_t i = 1; i < cps.size(); ++i) {
    for (size_t j = i; j > 0 && cls[j] != 0 && cls[j - 1] > cls[j]; --j) {
      std::swap(cps[j], cps[j - 1]);
      std::swap(cls[j], cls[j - 1]);
    }
  }
  // Canonical composition: a character joins the last starter unless a
  // character in between has the same or a higher class (it is blocked).
  size_t n = 0;
  int starter = -1;
  int last_class = -1;
  for (size_t i = 0; i < cps.size(); ++i) {
    uint32_t c = cps[i];
    int cc = cls[i];
    if (starter >= 0 &&
        (last_class < cc || (last_class == 0 && static_cast<size_t>(starter) + 1 == n))) {
      if (uint32_t comp = compose(cps[starter], c)) {
        cps[starter] = comp;
        continue;
      }
    }
    if (cc == 0) starter = static_cast<int>(n);
    last_class = cc;
    cps[n] = c;
    cls[n] = cls[i];
    ++n;
  }
  for (size_t i = 0; i < n; ++i) utf8::append(out, cps[i]);
}

}  // namespace

std::string nfc_normalize(std::string_view text) {
  // Fast path: nothing at or above U+0300 (all bytes below 0xCC) means nothing to do.
  bool simple =
      std::all_of(text.begin(), text.end(), [](char c) { return static_cast<uint8_t>(c) < 0xCC; });
  if (simple) return std::string(text);
  std::string out;
  out.reserve(text.size());
  size_t run = 0, i = 0;
  uint32_t cp;
  while (i < text.size()) {
    size_t len = utf8::decode(text, i, cp);
    if (len != 0) {
      i += len;
      continue;
    }
    normalize_run(text.substr(run, i - run), out);
    out += text[i];
    run = ++i;
  }
  normalize_run(text.substr(run), out);
  return out;
}

}  // namespace tandem
