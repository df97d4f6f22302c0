// Where a stream's time goes: named intervals of its work, timed on the device
// with CUDA events (bench decode --profile --device cuda). mark(name) records an
// event; the time from one mark to the next is charged to the earlier mark's
// name. Only eager launches can be timed this way (a graph replays as one).
//
// Declared in every build, defined only where the kernels are built
// (TANDEM_HAVE_CUDA), like stream.h.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "cuda/device.h"

namespace tandem::cuda {

struct IntervalTotal {
  double ms = 0.0;
  int64_t count = 0;
};

class StreamTimeline {
 public:
  explicit StreamTimeline(Stream stream);
  ~StreamTimeline();
  StreamTimeline(const StreamTimeline&) = delete;
  StreamTimeline& operator=(const StreamTimeline&) = delete;

  // Starts an interval named `name` (a string literal: it is kept by pointer),
  // ending the one before it.
  void mark(const char* name);
  // Ends the last interval, waits for the stream, and adds every interval's
  // time to `totals` by name; then starts over.
  void collect(std::map<std::string, IntervalTotal>& totals);

 private:
  Stream stream_;
  std::vector<void*> events_;  // cudaEvent_t, created as needed and reused
  std::vector<const char*> names_;
  size_t used_ = 0;
};

}  // namespace tandem::cuda
