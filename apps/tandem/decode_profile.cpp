#include "decode_profile.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

namespace tandem::cli {

nlohmann::json report_decode_profile(const kernels::KernelProfile& profile,
                                     const ThreadPool::Timing& pool, int threads, int tokens,
                                     double decode_ms, double membw_gb_s) {
  const double step = decode_ms / tokens;
  struct Row {
    std::string kind;
    kernels::KernelProfile::Entry e;
  };
  std::vector<Row> rows;
  for (const auto& [kind, e] : profile.by_kind) rows.push_back({kind, e});
  std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.e.ms > b.e.ms; });
  fmt::print("\nprofile of a decode step ({:.2f} ms):\n", step);
  fmt::print("{:<36} {:>9} {:>7} {:>7} {:>9} {:>8}\n", "kernel", "ms/step", "share", "calls",
             "GB/s", "of membw");
  nlohmann::json kinds = nlohmann::json::array();
  double weight_bytes = 0, matmul_ms = 0;
  for (const Row& r : rows) {
    const double ms = r.e.ms / tokens;
    const double gbs = r.e.weight_bytes > 0 ? r.e.weight_bytes / (r.e.ms * 1e6) : 0;
    if (r.e.weight_bytes > 0) {
      weight_bytes += r.e.weight_bytes;
      matmul_ms += r.e.ms;
    }
    fmt::print("{:<36} {:>9.3f} {:>6.1f}% {:>7} {:>9} {:>8}\n", r.kind, ms, 100 * ms / step,
               r.e.calls / tokens, gbs > 0 ? fmt::format("{:.1f}", gbs) : "",
               gbs > 0 ? fmt::format("{:.0f}%", 100 * gbs / membw_gb_s) : "");
    kinds.push_back({{"kind", r.kind},
                     {"ms_per_step", ms},
                     {"share", ms / step},
                     {"calls_per_step", r.e.calls / tokens},
                     {"gb_s", gbs}});
  }
  const double kernel_ms = profile.total_ms() / tokens;
  fmt::print("{:<36} {:>9.3f} {:>6.1f}%\n", "outside the kernels", step - kernel_ms,
             100 * (step - kernel_ms) / step);
  const double matmul_gbs = matmul_ms > 0 ? weight_bytes / (matmul_ms * 1e6) : 0;
  fmt::print("matmuls together: {:.1f} GB/s while they run ({:.0f}% of membw {:.1f} GB/s)\n",
             matmul_gbs, 100 * matmul_gbs / membw_gb_s, membw_gb_s);

  std::vector<double> layers;
  for (double ms : profile.layer_ms) layers.push_back(ms / tokens);
  nlohmann::json layer_json = layers;
  if (!layers.empty()) {
    std::vector<double> sorted = layers;
    std::sort(sorted.begin(), sorted.end());
    fmt::print("per layer ({}): min {:.3f} ms, median {:.3f}, max {:.3f} (layer {})\n",
               layers.size(), sorted.front(), sorted[sorted.size() / 2], sorted.back(),
               std::max_element(layers.begin(), layers.end()) - layers.begin());
  }
  const double idle_ms = threads * pool.region_ms - pool.busy_ms;
  const double idle_share = pool.region_ms > 0 ? idle_ms / (threads * pool.region_ms) : 0;
  fmt::print(
      "thread pool: {} parallel regions a step, {:.3f} ms a step inside them; idle {:.1f}% of "
      "the threads' time there ({:.3f} ms a step, all threads)\n",
      pool.regions / tokens, pool.region_ms / tokens, 100 * idle_share, idle_ms / tokens);
  return {{"step_ms", step},
          {"kernels", kinds},
          {"outside_kernels_ms", step - kernel_ms},
          {"matmul_gb_s", matmul_gbs},
          {"layer_ms", layer_json},
          {"pool_regions_per_step", pool.regions / tokens},
          {"pool_region_ms_per_step", pool.region_ms / tokens},
          {"pool_idle_share", idle_share}};
}

nlohmann::json report_device_profile(const std::vector<PassProfileEntry>& profile, int tokens,
                                     double decode_ms) {
  std::vector<PassProfileEntry> sorted = profile;
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.ms > b.ms; });
  const double step_ms = decode_ms / tokens;
  double timed_ms = 0.0;
  fmt::print("device time per decode step ({} steps, {:.3f} ms each on the host's clock):\n",
             tokens, step_ms);
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& e : sorted) {
    const double ms = e.ms / tokens;
    timed_ms += ms;
    fmt::print("  {:28} {:8.3f} ms {:6.1f}%  {:6.1f} intervals\n", e.name, ms, 100.0 * ms / step_ms,
               double(e.count) / tokens);
    rows.push_back({{"name", e.name},
                    {"ms_per_step", ms},
                    {"share_of_step", ms / step_ms},
                    {"intervals_per_step", double(e.count) / tokens}});
  }
  fmt::print("  {:28} {:8.3f} ms {:6.1f}%\n", "(between the timed intervals)", step_ms - timed_ms,
             100.0 * (step_ms - timed_ms) / step_ms);
  return {{"kinds", rows}, {"step_ms", step_ms}, {"untimed_ms", step_ms - timed_ms}};
}

}  // namespace tandem::cli
