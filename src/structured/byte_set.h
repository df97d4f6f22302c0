// A set of byte values (0-255): the label of one automaton edge.
#pragma once
#include <array>
#include <cstdint>

namespace tandem::structured {

class ByteSet {
 public:
  ByteSet() = default;
  static ByteSet of(uint8_t b) {
    ByteSet s;
    s.add(b);
    return s;
  }
  static ByteSet range(uint8_t lo, uint8_t hi) {
    ByteSet s;
    s.add_range(lo, hi);
    return s;
  }

  void add(uint8_t b) { bits_[b >> 6] |= uint64_t{1} << (b & 63); }
  void add_range(uint8_t lo, uint8_t hi) {
    for (int b = lo; b <= hi; ++b) add(static_cast<uint8_t>(b));
  }
  bool has(uint8_t b) const { return (bits_[b >> 6] >> (b & 63)) & 1; }
  bool empty() const { return (bits_[0] | bits_[1] | bits_[2] | bits_[3]) == 0; }
  ByteSet& operator|=(const ByteSet& o) {
    for (int i = 0; i < 4; ++i) bits_[i] |= o.bits_[i];
    return *this;
  }
  bool operator==(const ByteSet& o) const = default;

 private:
  std::array<uint64_t, 4> bits_{};
};

}  // namespace tandem::structured
