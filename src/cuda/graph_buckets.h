// The shapes the CUDA backend captures its forward pass for, as CUDA graphs.
//
// A graph replays fixed launch parameters, so each shape of pass needs its own:
// a decode or verify step of `batch` sequences with `tokens` positions each
// (1 to decode, K + 1 to verify K drafted tokens). Capturing every (batch,
// tokens) pair would cost too much memory and capture time; a step instead runs
// the smallest captured bucket that holds it, its unused rows padding. Batch
// invariance (each row's result independent of the others, docs/cuda.md) makes
// the padding harmless: a real row computes the same bits in any bucket.
//
// Pure host logic: which buckets exist and which one a step takes. The capture
// itself is later work (issue #27).
#pragma once
#include <vector>

namespace tandem::cuda {

struct GraphBucketLimits {
  int max_batch = 1;   // sequences in one step
  int max_tokens = 1;  // positions per sequence in one step (K + 1 of the largest K)
};

struct GraphBucket {
  int batch = 0;
  int tokens = 0;
  int rows() const { return batch * tokens; }
  bool operator==(const GraphBucket&) const = default;
};

class GraphBuckets {
 public:
  // Throws tandem::Error for a limit below 1.
  explicit GraphBuckets(const GraphBucketLimits& limits);

  // Batch sizes: the powers of two below max_batch, then max_batch (a batch
  // grows and shrinks by whole requests, and doubling bounds the padding to
  // under half the rows).
  const std::vector<int>& batch_sizes() const { return batch_sizes_; }
  // Positions per sequence: every count up to 8 (verify with K <= 7, where a
  // padded position would cost as much as a drafted one), then steps of at most
  // 1.5x (12, 16, 24, 32, 48, 64, ...), and max_tokens last.
  const std::vector<int>& token_counts() const { return token_counts_; }
  // Every bucket, batch-major: the graphs to capture.
  std::vector<GraphBucket> all() const;
  // The smallest bucket holding `batch` sequences of `tokens` positions each.
  // Throws tandem::Error for a step outside the limits.
  GraphBucket choose(int batch, int tokens) const;

 private:
  std::vector<int> batch_sizes_;
  std::vector<int> token_counts_;
};

}  // namespace tandem::cuda
