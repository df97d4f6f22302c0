// `bench decode --profile`: where a decode step's time goes, printed and as
// JSON: per kernel kind (each matmul with the bandwidth at which it streamed its
// weights), per layer, outside the kernels, and the thread pool's idle share.
#pragma once
#include <nlohmann/json.hpp>

#include "core/thread_pool.h"
#include "kernels/profiling_kernels.h"
#include "model/forward_pass.h"

namespace tandem::cli {

// `profile` and `pool` cover `tokens` decode steps that took `decode_ms` in all;
// `membw_gb_s` is the machine's streaming read bandwidth, measured in the same run.
nlohmann::json report_decode_profile(const kernels::KernelProfile& profile,
                                     const ThreadPool::Timing& pool, int threads, int tokens,
                                     double decode_ms, double membw_gb_s);

// `bench decode --profile --device cuda`: a device pass's time per kind of
// work (ForwardPass::profile) over `tokens` decode steps that took `decode_ms`
// on the host's clock, largest first, with each kind's share of a step; the
// rest of the step is the host's (inputs, launches, waiting).
nlohmann::json report_device_profile(const std::vector<PassProfileEntry>& profile, int tokens,
                                     double decode_ms);

}  // namespace tandem::cli
