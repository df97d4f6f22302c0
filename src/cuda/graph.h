// One CUDA graph: the kernel launches of one forward pass shape, captured once
// from a stream and replayed with a single launch. A graph replays fixed
// pointers and launch parameters, so what a step changes (tokens, positions,
// block tables) must live at fixed device addresses, written before the replay
// (graph_buckets.h says which shapes are captured).
//
// Declared in every build, defined only where the kernels are built
// (TANDEM_HAVE_CUDA).
#pragma once
#include <functional>

#include "cuda/device.h"

// cudaGraphExec_t, without the CUDA headers (it is this pointer type).
struct CUgraphExec_st;

namespace tandem::cuda {

class CudaGraph {
 public:
  CudaGraph() = default;
  ~CudaGraph();
  CudaGraph(CudaGraph&& other) noexcept;
  CudaGraph& operator=(CudaGraph&& other) noexcept;
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;

  // Records what `launches` queues on `stream` (which must not be the legacy
  // default stream) and instantiates it; nothing runs. Throws tandem::Error when
  // the capture or the instantiation fails (the stream is left usable).
  void capture(Stream stream, const std::function<void()>& launches);
  bool captured() const { return exec_ != nullptr; }
  // Queues one replay on `stream`.
  void launch(Stream stream) const;

 private:
  CUgraphExec_st* exec_ = nullptr;
};

}  // namespace tandem::cuda
