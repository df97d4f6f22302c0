// Unicode tables for NFC normalisation (generated: see unicode_nfc_data.cpp).
// Every table is sorted by its first field.
#pragma once
#include <cstddef>
#include <cstdint>

namespace tandem::nfc_data {

struct CombiningClassRange {
  uint32_t first, last;
  uint8_t ccc;
};
struct Decomposition {         // one level of canonical decomposition
  uint32_t cp, first, second;  // second = 0 for a singleton
};
struct Composition {  // primary composites: first + second -> composite
  uint32_t first, second, composite;
};

extern const CombiningClassRange kCombiningClasses[];
extern const size_t kCombiningClassCount;
extern const Decomposition kDecompositions[];
extern const size_t kDecompositionCount;
extern const Composition kCompositions[];
extern const size_t kCompositionCount;

}  // namespace tandem::nfc_data
