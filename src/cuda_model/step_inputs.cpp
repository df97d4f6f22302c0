#include "cuda_model/step_inputs.h"

#include <algorithm>

#include "core/error.h"
#include "kernels/kernels.h"

namespace tandem::cuda_model {
namespace {

// The first logical position of row i's path whose node is not where a chain
// would put it (logical != physical), or kNoRemap when the whole path agrees.
int remap_start(const ForwardBatch& b, int i) {
  int from = kNoRemap;
  for (int j = i; j >= 0 && b.kv_position(j) != b.positions[j]; j = b.parent(j))
    from = b.positions[j];
  return from;
}

void resize_all(StepInputs& s, int rows, const StepLimits& l) {
  for (auto* v : {&s.tokens, &s.pos, &s.kv_pos, &s.seq, &s.remap_from}) v->assign(rows, 0);
  s.cos.assign(size_t(rows) * l.rope_half, 0.0f);
  s.sin.assign(size_t(rows) * l.rope_half, 0.0f);
}

}  // namespace

void build_step_inputs(const ForwardBatch& b, int begin, int n, int padded_rows, int remap_stride,
                       const StepLimits& l, const TableOf& table_of, int pad_block,
                       const std::vector<float>& inv_freq, StepInputs& s) {
  check(n >= 1 && padded_rows >= n && padded_rows <= l.max_rows,
        "CUDA forward: a pass of {} rows (padded to {}) exceeds {}", n, padded_rows, l.max_rows);
  s.rows = n;
  s.padded_rows = padded_rows;
  resize_all(s, padded_rows, l);
  s.slots.clear();
  s.max_keys = 1;
  // Sequences: one per run of a slot's consecutive rows (a slot appears once per batch).
  for (int i = 0; i < n; ++i) {
    const int at = begin + i;
    if (i == 0 || b.slots[at] != b.slots[at - 1]) s.slots.push_back(b.slots[at]);
    s.tokens[i] = b.tokens[at];
    s.pos[i] = b.positions[at];
    s.kv_pos[i] = b.kv_position(at);
    s.seq[i] = static_cast<int>(s.slots.size()) - 1;
    s.remap_from[i] = remap_start(b, at);
    s.max_keys = std::max(s.max_keys, s.pos[i] + 1);
    kernels::rope_angles(s.pos[i], inv_freq.data(), l.rope_half, &s.cos[size_t(i) * l.rope_half],
                         &s.sin[size_t(i) * l.rope_half]);
  }
  s.n_seqs = static_cast<int>(s.slots.size());
  check(s.n_seqs <= l.max_seqs, "CUDA forward: {} sequences in one pass exceed {}", s.n_seqs,
        l.max_seqs);
  // Padding rows: the padding sequence (its table all pad_block), position 0.
  for (int i = n; i < padded_rows; ++i) {
    s.seq[i] = s.n_seqs;
    s.remap_from[i] = kNoRemap;
    kernels::rope_angles(0, inv_freq.data(), l.rope_half, &s.cos[size_t(i) * l.rope_half],
                         &s.sin[size_t(i) * l.rope_half]);
  }
  // Block tables, table_stride entries per sequence, then the padding sequence's.
  s.tables.assign(size_t(s.n_seqs + 1) * l.table_stride, pad_block);
  for (int q = 0; q < s.n_seqs; ++q) {
    const std::vector<int>& t = table_of(s.slots[q]);
    check(static_cast<int>(t.size()) <= l.table_stride,
          "CUDA forward: slot {} holds {} blocks, more than the {} a context holds", s.slots[q],
          t.size(), l.table_stride);
    std::copy(t.begin(), t.end(), s.tables.begin() + size_t(q) * l.table_stride);
  }
  // Remaps: row i's path, logical positions remap_from[i]..pos[i].
  int longest = 1;
  for (int i = 0; i < n; ++i)
    if (s.remap_from[i] != kNoRemap) longest = std::max(longest, s.pos[i] - s.remap_from[i] + 1);
  s.remap_stride = remap_stride > 0 ? remap_stride : longest;
  check(longest <= s.remap_stride && s.remap_stride <= l.max_remap,
        "CUDA forward: a tree path of {} nodes exceeds the remap's {} entries", longest,
        std::min(s.remap_stride, l.max_remap));
  s.remap.assign(size_t(padded_rows) * s.remap_stride, 0);
  for (int i = 0; i < n; ++i) {
    if (s.remap_from[i] == kNoRemap) continue;
    int* row = &s.remap[size_t(i) * s.remap_stride];
    for (int j = begin + i; j >= 0 && b.kv_position(j) != b.positions[j]; j = b.parent(j))
      row[b.positions[j] - s.remap_from[i]] = b.kv_position(j);
  }
}

}  // namespace tandem::cuda_model
