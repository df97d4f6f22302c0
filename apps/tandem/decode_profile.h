// `bench decode --profile`: where a decode step's time goes, printed and as
// JSON: per kernel kind (each matmul with the bandwidth at which it streamed its
// weights), per layer, outside the kernels, and the thread pool's idle share.
#pragma once
#include <nlohmann/json.hpp>

#include "core/thread_pool.h"
#include "kernels/profiling_kernels.h"

namespace tandem::cli {

// `profile` and `pool` cover `tokens` decode steps that took `decode_ms` in all;
// `membw_gb_s` is the machine's streaming read bandwidth, measured in the same run.
nlohmann::json report_decode_profile(const kernels::KernelProfile& profile,
                                     const ThreadPool::Timing& pool, int threads, int tokens,
                                     double decode_ms, double membw_gb_s);

}  // namespace tandem::cli
