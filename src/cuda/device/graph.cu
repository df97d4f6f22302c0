// Capture and replay of one CUDA graph (cuda/graph.h).
#include <cuda_runtime.h>

#include <utility>

#include "cuda/device/check.cuh"
#include "cuda/graph.h"

namespace tandem::cuda {

CudaGraph::~CudaGraph() {
  if (exec_) (void)cudaGraphExecDestroy(exec_);
}

CudaGraph::CudaGraph(CudaGraph&& other) noexcept : exec_(std::exchange(other.exec_, nullptr)) {}

CudaGraph& CudaGraph::operator=(CudaGraph&& other) noexcept {
  if (this != &other) {
    if (exec_) (void)cudaGraphExecDestroy(exec_);
    exec_ = std::exchange(other.exec_, nullptr);
  }
  return *this;
}

void CudaGraph::capture(Stream stream, const std::function<void()>& launches) {
  if (exec_) {
    (void)cudaGraphExecDestroy(exec_);
    exec_ = nullptr;
  }
  // Thread-local mode: other threads' CUDA calls (none in tandem) are not
  // forbidden during the capture.
  check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
  cudaGraph_t graph = nullptr;
  try {
    launches();
  } catch (...) {
    // End the capture so that the stream stays usable, then report the launch's error.
    (void)cudaStreamEndCapture(stream, &graph);
    if (graph) (void)cudaGraphDestroy(graph);
    throw;
  }
  check(cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture");
  const cudaError_t e = cudaGraphInstantiate(&exec_, graph, 0);
  (void)cudaGraphDestroy(graph);
  check(e, "cudaGraphInstantiate");
}

void CudaGraph::launch(Stream stream) const {
  if (!exec_) raise_error("CudaGraph::launch: nothing captured");
  check(cudaGraphLaunch(exec_, stream), "cudaGraphLaunch");
}

}  // namespace tandem::cuda
