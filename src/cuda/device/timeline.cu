// Named intervals of a stream, timed with CUDA events (cuda/timeline.h).
#include <cuda_runtime.h>

#include "cuda/device/check.cuh"
#include "cuda/timeline.h"

namespace tandem::cuda {

StreamTimeline::StreamTimeline(Stream stream) : stream_(stream) {}

StreamTimeline::~StreamTimeline() {
  for (void* e : events_) (void)cudaEventDestroy(static_cast<cudaEvent_t>(e));
}

void StreamTimeline::mark(const char* name) {
  if (used_ == events_.size()) {
    cudaEvent_t e;
    check(cudaEventCreate(&e), "cudaEventCreate");
    events_.push_back(e);
    names_.push_back(nullptr);
  }
  check(cudaEventRecord(static_cast<cudaEvent_t>(events_[used_]), stream_), "cudaEventRecord");
  names_[used_++] = name;
}

void StreamTimeline::collect(std::map<std::string, IntervalTotal>& totals) {
  if (used_ == 0) return;
  mark(nullptr);  // the end of the last interval
  check(cudaStreamSynchronize(stream_), "a kernel");
  for (size_t i = 0; i + 1 < used_; ++i) {
    float ms = 0.0f;
    check(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(events_[i]),
                               static_cast<cudaEvent_t>(events_[i + 1])),
          "cudaEventElapsedTime");
    IntervalTotal& t = totals[names_[i]];
    t.ms += ms;
    ++t.count;
  }
  used_ = 0;
}

}  // namespace tandem::cuda
