// Micro-benchmarks of the CPU kernels. Matmul reports the weights streamed per
// second (GB/s, 1e9 bytes): the matrices (twice the L3 cache, at least 96 MB;
// a matrix that fits in L3 measures L3) come from memory, so
// small M measures how close a kernel gets to memory bandwidth and
// larger M how much compute each extra row adds (weight-stationary tiles).
// MatmulInCache runs one thread on a matrix that stays in L2 (K = 1536, about
// 1 MB of columns: enough columns that per-call costs do not count) and
// reports nanoseconds per 256 weights (one super-block or eight legacy blocks)
// and per activation row: the kernel's compute speed, the other
// side of the roofline. VnniPeak is the ceiling of that compute side: one
// core's rate of the 512-bit int8 dot-product instruction, and VnniBroadcast
// that rate with the packed kernels' activation broadcasts. MatmulSmall and
// Attention with cold:1 measure a decode step's small calls as the step sees
// them: from memory, the caches emptied by the weights streamed between them.
//
//   build/bench/tandem_bench_kernels [--benchmark_filter=Q4_K] [threads via TANDEM_THREADS]
#include <benchmark/benchmark.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "cache/contiguous_kv_cache.h"
#include "core/thread_pool.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/gumbel_noise.h"
#include "kernels/kernels.h"
#include "quant/quants.h"

using namespace tandem;

namespace {

ThreadPool& pool() {
  static ThreadPool p(std::getenv("TANDEM_THREADS") ? std::atoi(std::getenv("TANDEM_THREADS")) : 0);
  return p;
}

// The kernel knobs from the environment (TANDEM_PACK, TANDEM_PREFETCH, ...; see
// kernels/kernel_config.h), read once.
const kernels::KernelConfig& config() {
  static const kernels::KernelConfig c = kernels::kernel_config_from_env();
  return c;
}

// Qwen2.5-1.5B's attention heads, and Qwen2.5-0.5B's (the draft model's: heads
// of 64, seven to a KV head).
const kernels::AttentionShape kQwenHeads{12, 2, 128, 1.0f / std::sqrt(128.0f)};
const kernels::AttentionShape kQwenDraftHeads{14, 2, 64, 1.0f / std::sqrt(64.0f)};

// Kernels of that configuration on `threads`, with scratch for M rows of up to K
// and attention of `heads`.
std::unique_ptr<kernels::Kernels> make_kernels(ThreadPool& threads, int M, int64_t K,
                                               const kernels::AttentionShape& heads = kQwenHeads) {
  return kernels::Kernels::create(config(), threads,
                                  {.max_rows = M,
                                   .max_k = K,
                                   .head_dim = heads.head_dim,
                                   .max_group = heads.n_heads / heads.n_kv_heads});
}

constexpr int64_t kK = 4096;

// Bytes of the streamed matrices: twice the L3, so that each call reads memory.
size_t target_bytes() {
  const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
  return std::max(size_t(96) << 20, l3 > 0 ? 2 * static_cast<size_t>(l3) : 0);
}

// A {K, N} matrix view of `type` over `bytes` (file layout; no packed copy).
TensorView view_of(DType type, int64_t K, int64_t N, const uint8_t* bytes, size_t nbytes) {
  TensorView v;
  v.name = "bench";
  v.type = type;
  v.shape = {K, N};
  v.data = bytes;
  v.nbytes = nbytes;
  return v;
}

// N rows of K weights drawn from N(0, 1) by rng, quantized to `type`.
std::vector<uint8_t> random_rows(DType type, int64_t K, int64_t N, std::mt19937& rng) {
  const size_t row_bytes = dtype_row_bytes(type, K);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> w(K);
  std::vector<uint8_t> bytes(row_bytes * N);
  for (int64_t n = 0; n < N; ++n) {
    for (auto& v : w) v = dist(rng);
    quantize_row(type, w.data(), bytes.data() + n * row_bytes, K);
  }
  return bytes;
}

// A {kK, N} matrix of `type` of about target_bytes(): 64 quantized random rows,
// repeated (quantizing it all would dominate the run; the speed is the same).
// One type at a time is kept (the benchmarks of a type run together).
struct BenchMatrix {
  std::vector<uint8_t> bytes;
  AlignedVector<uint8_t> packed;  // kernels::pack_weights' copy, when there is one
  TensorView view;
};

const BenchMatrix& matrix(DType t) {
  static std::unique_ptr<BenchMatrix> slot;
  if (slot && slot->view.type == t) return *slot;
  slot.reset();  // free the previous type's matrix first
  slot = std::make_unique<BenchMatrix>();
  const size_t row_bytes = dtype_row_bytes(t, kK);
  const int64_t N = static_cast<int64_t>(target_bytes() / row_bytes) / 64 * 64;
  std::mt19937 rng(1);
  const std::vector<uint8_t> seed_rows = random_rows(t, kK, 64, rng);
  slot->bytes.resize(row_bytes * N);
  for (int64_t r = 0; r < N; r += 64)
    std::memcpy(slot->bytes.data() + r * row_bytes, seed_rows.data(), seed_rows.size());
  slot->view = view_of(t, kK, N, slot->bytes.data(), slot->bytes.size());
  slot->packed = kernels::pack_weights(slot->view, config(), pool());
  return *slot;
}

// Whether pack_weights makes a packed copy of `t` on this machine (asked of one
// panel of zero weights, without building the big matrix).
bool packs(DType t) {
  const size_t row_bytes = dtype_row_bytes(t, kK);
  std::vector<uint8_t> bytes(16 * row_bytes);
  const std::vector<float> zeros(kK, 0.0f);
  for (int r = 0; r < 16; ++r) quantize_row(t, zeros.data(), bytes.data() + r * row_bytes, kK);
  return !kernels::pack_weights(view_of(t, kK, 16, bytes.data(), bytes.size()), config(), pool())
              .empty();
}

// W itself, or W with its packed copy.
TensorView layout(const BenchMatrix& W, bool packed) {
  TensorView v = W.view;
  v.packed = packed ? W.packed.data() : nullptr;
  return v;
}

void BM_Matmul(benchmark::State& state, DType t, bool packed) {
  const int M = static_cast<int>(state.range(0));
  const auto& W = matrix(t);
  const TensorView view = layout(W, packed);
  std::vector<float> x(M * kK), y(M * W.view.ne(1));
  std::mt19937 rng(2);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (auto& v : x) v = dist(rng);
  const auto k = make_kernels(pool(), M, kK);
  for (auto _ : state) {
    k->matmul(view, x.data(), M, y.data());
    benchmark::DoNotOptimize(y.data());
  }
  const size_t bytes = packed ? W.packed.size() : W.view.nbytes;
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
  state.counters["GB/s"] =
      benchmark::Counter(static_cast<double>(bytes), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["threads"] = pool().size();
  state.SetLabel(k->name());
}

void BM_MatmulInCache(benchmark::State& state, DType t, bool packed) {
  const int M = static_cast<int>(state.range(0));
  constexpr int64_t K = 1536;
  static ThreadPool one(1);
  const size_t row_bytes = dtype_row_bytes(t, K);
  const int64_t N =
      std::max<int64_t>(16, (int64_t{1} << 20) / static_cast<int64_t>(row_bytes) / 16 * 16);
  std::mt19937 rng(4);
  const std::vector<uint8_t> bytes = random_rows(t, K, N, rng);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(M * K), y(M * N);
  for (auto& v : x) v = dist(rng);
  TensorView view = view_of(t, K, N, bytes.data(), bytes.size());
  const AlignedVector<uint8_t> packed_copy =
      packed ? kernels::pack_weights(view, config(), one) : AlignedVector<uint8_t>{};
  view.packed = packed ? packed_copy.data() : nullptr;
  const auto k = make_kernels(one, M, K);
  for (auto _ : state) {
    k->matmul(view, x.data(), M, y.data());
    benchmark::DoNotOptimize(y.data());
  }
  // Seconds per 256 weights (printed with SI prefixes, e.g. 7.4n = 7.4 ns), and
  // per 256 weights and activation row.
  const double chunks = static_cast<double>(N * K / 256);
  const auto kPerItem = benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert;
  state.counters["s/256w"] = benchmark::Counter(chunks, kPerItem);
  state.counters["s/256w/row"] = benchmark::Counter(chunks * M, kPerItem);
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(bytes.size()),
                                              benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(k->name());
}

// A decode step's small matmuls, {K, N} (e.g. Qwen2.5-1.5B's attention matrices:
// {1536, 2048} for q+k+v, {1536, 1536} for the output), each call on the next of
// enough copies that every call reads memory (target_bytes()). Against Matmul's
// one large matrix, the difference is what a call's start and end cost: the
// pool's wake-up and join, and the prefetchers' ramp on a new stream.
void BM_MatmulSmall(benchmark::State& state, DType t) {
  const int64_t N = state.range(0), K = state.range(1);
  std::mt19937 rng(6);
  const std::vector<uint8_t> bytes = random_rows(t, K, N, rng);
  const size_t copies = std::max<size_t>(2, target_bytes() / bytes.size() + 1);
  std::vector<std::vector<uint8_t>> raw(copies, bytes);
  std::vector<AlignedVector<uint8_t>> packed(copies);
  std::vector<TensorView> views(copies);
  size_t streamed = 0;
  for (size_t i = 0; i < copies; ++i) {
    TensorView& v = views[i] = view_of(t, K, N, raw[i].data(), raw[i].size());
    packed[i] = kernels::pack_weights(v, config(), pool());
    v.packed = packed[i].empty() ? nullptr : packed[i].data();
    streamed = packed[i].empty() ? v.nbytes : packed[i].size();
  }
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(K), y(N);
  for (auto& v : x) v = dist(rng);
  const auto k = make_kernels(pool(), 1, K);
  size_t next = 0;
  for (auto _ : state) {
    k->matmul(views[next], x.data(), 1, y.data());
    benchmark::DoNotOptimize(y.data());
    next = next + 1 == copies ? 0 : next + 1;
  }
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(streamed),
                                              benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(k->name());
}

#if defined(__x86_64__)
// The accumulators' sum kept observable, so that the loops cannot be dropped.
template <int kChains>
__attribute__((target("avx512f"))) void KeepSum(const __m512i (&acc)[kChains]) {
  __m512i sum = acc[0];
  for (int i = 1; i < kChains; ++i) sum = _mm512_add_epi32(sum, acc[i]);
  benchmark::DoNotOptimize(sum);
}

// Seconds per vpdpbusd, `per_iteration` of them an iteration.
void ReportPerVpdpbusd(benchmark::State& state, int64_t per_iteration) {
  state.counters["s/vpdpbusd"] = benchmark::Counter(
      static_cast<double>(per_iteration),
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
#endif

// The roofline's compute side: one core's throughput of the 512-bit int8 dot
// product (vpdpbusd, 64 multiply-adds) that the quantized matmuls are built on,
// on 12 independent accumulators. Reports nanoseconds per instruction.
#if defined(__x86_64__)
__attribute__((target("avx512f,avx512bw,avx512vnni"))) void BM_VnniPeak(benchmark::State& state) {
  if (!__builtin_cpu_supports("avx512vnni")) {
    state.SkipWithError("no AVX-512 VNNI on this CPU");
    return;
  }
  constexpr int kChains = 12;
  constexpr int64_t kSteps = 1 << 16;
  __m512i a = _mm512_set1_epi8(3);
  const __m512i b = _mm512_set1_epi8(-2);
  for (auto _ : state) {
    __m512i acc[kChains];
    for (int i = 0; i < kChains; ++i) acc[i] = _mm512_set1_epi32(i);
    for (int64_t k = 0; k < kSteps; ++k) {
      // Unrolled, the accumulators stay in registers; a loop that keeps them in
      // memory measures store forwarding instead.
#pragma GCC unroll 12
      for (int i = 0; i < kChains; ++i) acc[i] = _mm512_dpbusd_epi32(acc[i], a, b);
      asm volatile("" : "+v"(a));  // an operand the compiler cannot see through
    }
    KeepSum(acc);
  }
  ReportPerVpdpbusd(state, kSteps * kChains);
}

// The packed kernels' own floor: each vpdpbusd there takes four activation
// bytes broadcast from L1 (vpbroadcastd), one broadcast per panel of 16 weight
// rows. Uses:2 shares each broadcast between two vpdpbusd, what a kernel that
// read two panels at once would pay. Reports nanoseconds per vpdpbusd, against
// VnniPeak's (no broadcasts).
template <int kUses>
__attribute__((target("avx512f,avx512bw,avx512vnni"))) void BM_VnniBroadcast(
    benchmark::State& state) {
  if (!__builtin_cpu_supports("avx512vnni")) {
    state.SkipWithError("no AVX-512 VNNI on this CPU");
    return;
  }
  constexpr int kChains = 12;
  constexpr int64_t kSteps = 1 << 16;
  alignas(64) static int8_t acts[64 * 48];  // 3 KB: stays in L1
  for (size_t i = 0; i < sizeof(acts); ++i) acts[i] = static_cast<int8_t>(i * 7);
  __m512i w[2] = {_mm512_set1_epi8(3), _mm512_set1_epi8(5)};
  for (auto _ : state) {
    __m512i acc[kChains];
    for (int i = 0; i < kChains; ++i) acc[i] = _mm512_set1_epi32(i);
    for (int64_t k = 0; k < kSteps; ++k) {
      const int8_t* a = acts + (k & 63) * 48;
#pragma GCC unroll 12
      for (int i = 0; i < kChains; i += kUses) {
        int32_t four;
        std::memcpy(&four, a + 4 * i, 4);
        const __m512i x = _mm512_set1_epi32(four);
#pragma GCC unroll 2
        for (int u = 0; u < kUses; ++u) acc[i + u] = _mm512_dpbusd_epi32(acc[i + u], w[u], x);
      }
      asm volatile("" : "+v"(w[0]), "+v"(w[1]));  // operands the compiler cannot see through
    }
    KeepSum(acc);
  }
  ReportPerVpdpbusd(state, kSteps * kChains);
}
#endif

// One decode step's attention: 1 (or K+1) query rows over a cache of `ctx`
// positions, Qwen2.5-1.5B's shape (12 query heads over 2 KV heads of 128), or
// with hd:64 Qwen2.5-0.5B's (14 over 2 of 64).
void BM_Attention(benchmark::State& state) {
  const int ctx = static_cast<int>(state.range(0)), n_q = static_cast<int>(state.range(1));
  const kernels::AttentionShape& ash = state.range(3) == 64 ? kQwenDraftHeads : kQwenHeads;
  KVCacheShape shape{1, ash.n_kv_heads, ash.head_dim};
  ContiguousKVCache cache(shape, 1, ctx + n_q, DType::F16);
  const int slot = cache.allocate();
  std::mt19937 rng(3);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> k(shape.row_elems()), v(shape.row_elems());
  cache.reserve(slot, ctx + n_q);
  for (int p = 0; p < ctx + n_q; ++p) {
    for (auto& e : k) e = dist(rng);
    for (auto& e : v) e = dist(rng);
    cache.store(slot, 0, p, k.data(), v.data());
  }
  std::vector<float> q(size_t(n_q) * ash.n_heads * ash.head_dim), out(q.size());
  for (auto& e : q) e = dist(rng);
  std::vector<int> pos(n_q);
  for (int i = 0; i < n_q; ++i) pos[i] = ctx + i;
  const auto kernels = make_kernels(pool(), n_q, 0, ash);
  const bool cold = state.range(2) != 0;
  std::vector<uint8_t> evict(cold ? target_bytes() : 0, 1);
  for (auto _ : state) {
    if (cold) {
      state.PauseTiming();
      // Both threads read, so that the pool's worker is still spinning after.
      pool().parallel_for(static_cast<int64_t>(evict.size()), [&](int64_t b, int64_t e, int) {
        uint64_t sum = 0;
        for (int64_t i = b; i < e; i += 64) sum += evict[i];
        benchmark::DoNotOptimize(sum);
      });
      state.ResumeTiming();
    }
    kernels->attention(q.data(), n_q, pos.data(), cache.view(slot, 0), ash, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * (ctx + n_q) * 2 *
                          shape.row_elems() * 2);
}

// A decode round's attention for a batch: `seqs` sequences of `ctx` positions,
// one query row each, as one call per sequence (batched = 0) or one batched
// call (batched = 1): what starting a parallel region per sequence costs.
void BM_AttentionBatch(benchmark::State& state) {
  const int seqs = static_cast<int>(state.range(0)), ctx = static_cast<int>(state.range(1));
  const bool batched = state.range(2) != 0;
  KVCacheShape shape{1, 2, 128};
  ContiguousKVCache cache(shape, seqs, ctx + 1, DType::F16);
  std::mt19937 rng(3);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> k(shape.row_elems()), v(shape.row_elems());
  std::vector<int> slots;
  for (int s = 0; s < seqs; ++s) {
    slots.push_back(cache.allocate());
    cache.reserve(slots.back(), ctx + 1);
    for (int p = 0; p < ctx + 1; ++p) {
      for (auto& e : k) e = dist(rng);
      for (auto& e : v) e = dist(rng);
      cache.store(slots.back(), 0, p, k.data(), v.data());
    }
  }
  const kernels::AttentionShape& ash = kQwenHeads;
  const size_t q_dim = 12 * 128;
  std::vector<float> q(size_t(seqs) * q_dim), out(q.size());
  for (auto& e : q) e = dist(rng);
  const int pos = ctx;
  std::vector<kernels::AttentionCall> calls;
  for (int s = 0; s < seqs; ++s)
    calls.push_back({&q[s * q_dim], 1, &pos, cache.view(slots[s], 0), &out[s * q_dim]});
  const auto kernels = make_kernels(pool(), seqs, 0);
  for (auto _ : state) {
    if (batched) {
      kernels->attention_batch(calls.data(), seqs, ash);
    } else {
      for (const auto& c : calls) kernels->attention(c.q, 1, c.pos, c.kv, ash, c.out);
    }
    benchmark::DoNotOptimize(out.data());
  }
}

// Reproducible sampling's Gumbel-max choice over a Qwen2.5-sized vocabulary
// (151936): logits ~ N(0, sd) with the likeliest token `peak` above the rest,
// at temperature 1 / scale. A flat row (peak 0) draws noise for nearly every
// token; a peaked one, as text usually gives, skips most of the row.
void BM_GumbelArgmax(benchmark::State& state) {
  const int V = 151936;
  const float sd = static_cast<float>(state.range(0)), peak = static_cast<float>(state.range(1));
  const float scale = 100.0f / static_cast<float>(state.range(2));
  std::mt19937 rng(5);
  std::normal_distribution<float> dist(0.0f, sd);
  std::vector<float> x(V);
  for (auto& v : x) v = dist(rng);
  const int top = 1234;
  float max = *std::max_element(x.begin(), x.end());
  x[top] = max + peak;
  max = x[top];
  uint32_t pos = 0;
  for (auto _ : state)
    benchmark::DoNotOptimize(
        kernels::gumbel_argmax(x.data(), nullptr, V, max, scale, {42, pos++}, top));
}

// One activation row quantized for the integer matmuls (one thread, before the
// matmul's parallel region): the Qwen pair's rows of 896, 1536, 4864 and 8960
// elements, per 32 (legacy weights) or per 256 (K-quants).
void BM_QuantizeActs(benchmark::State& state) {
  const int64_t K = state.range(0);
  const int block = static_cast<int>(state.range(1));
  std::mt19937 rng(9);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(K));
  for (auto& v : x) v = dist(rng);
  kernels::cpu::QActs q;
  q.reserve(1, K, block);
  const auto& fn = kernels::cpu::best_target_kernels();
  for (auto _ : state) {
    kernels::cpu::quantize_acts(fn, x.data(), 1, K, block, q);
    benchmark::DoNotOptimize(q.q.data());
  }
}

// A draft model's confidence in its token: the softmax denominator over the
// logits it may propose (Qwen2.5's first 32768 ids under --draft-vocab's
// default, or the whole 151936), against the scalar loop it replaced.
void BM_SumExp(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const bool scalar = state.range(1) != 0;
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  std::vector<float> x(n);
  for (auto& v : x) v = dist(rng);
  const float top = *std::max_element(x.begin(), x.end());
  for (auto _ : state) {
    float sum = 0;
    if (scalar) {
      double s = 0;
      for (float v : x) s += std::exp(v - top);
      sum = static_cast<float>(s);
    } else {
      sum = kernels::sum_exp(x.data(), n, top, 1.0f);
    }
    benchmark::DoNotOptimize(sum);
  }
}

// A decode step's matmuls at Qwen2.5-1.5B's shapes, all Q4_K in the packed
// layout: per layer Q/K/V in one call, the attention output, gate and up in one
// call, down; 28 layers, each with its own matrices (about 27 MB a layer, so the
// step reads memory as the model's does). Against Matmul's one long stream, the
// difference is what the model's sequence of calls costs.
void BM_DecodeMatmuls(benchmark::State& state) {
  constexpr int kLayers = 28;
  constexpr int64_t d = 1536, kv = 256, ff = 8960;
  struct Layer {
    std::vector<uint8_t> q, k, v, o, gate, up, down;
    AlignedVector<uint8_t> pq, pk, pv, po, pgate, pup, pdown;
    TensorView wq, wk, wv, wo, wgate, wup, wdown;
  };
  std::mt19937 rng(7);
  const DType t = DType::Q4_K;
  auto make = [&](int64_t K, int64_t N, std::vector<uint8_t>& raw, AlignedVector<uint8_t>& packed,
                  TensorView& view) {
    const size_t row_bytes = dtype_row_bytes(t, K);
    const std::vector<uint8_t> seed = random_rows(t, K, 64, rng);
    raw.resize(row_bytes * N);
    for (int64_t r = 0; r < N; r += 64)
      std::memcpy(raw.data() + r * row_bytes, seed.data(),
                  std::min<int64_t>(64, N - r) * row_bytes);
    view = view_of(t, K, N, raw.data(), raw.size());
    packed = kernels::pack_weights(view, config(), pool());
    view.packed = packed.empty() ? nullptr : packed.data();
    return packed.empty() ? raw.size() : packed.size();
  };
  std::vector<std::unique_ptr<Layer>> layers;
  size_t bytes = 0;
  for (int l = 0; l < kLayers; ++l) {
    auto L = std::make_unique<Layer>();
    bytes += make(d, d, L->q, L->pq, L->wq) + make(d, kv, L->k, L->pk, L->wk) +
             make(d, kv, L->v, L->pv, L->wv) + make(d, d, L->o, L->po, L->wo) +
             make(d, ff, L->gate, L->pgate, L->wgate) + make(d, ff, L->up, L->pup, L->wup) +
             make(ff, d, L->down, L->pdown, L->wdown);
    layers.push_back(std::move(L));
  }
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(ff), q(d), k(kv), v(kv), o(d), gate(ff), up(ff), down(d);
  for (auto& e : x) e = dist(rng);
  const auto kern = make_kernels(pool(), 1, ff);
  for (auto _ : state) {
    for (const auto& L : layers) {
      const TensorView* qkv[] = {&L->wq, &L->wk, &L->wv};
      float* qkv_y[] = {q.data(), k.data(), v.data()};
      kern->matmul_multi(qkv, 3, x.data(), 1, qkv_y);
      kern->matmul(L->wo, x.data(), 1, o.data());
      const TensorView* gu[] = {&L->wgate, &L->wup};
      float* gu_y[] = {gate.data(), up.data()};
      kern->matmul_multi(gu, 2, x.data(), 1, gu_y);
      kern->matmul(L->wdown, x.data(), 1, down.data());
    }
    benchmark::DoNotOptimize(down.data());
  }
  state.counters["GB/s"] =
      benchmark::Counter(static_cast<double>(bytes), benchmark::Counter::kIsIterationInvariantRate);
}

void register_all() {
  for (DType t :
       {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q5_0,
        DType::Q5_1, DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
    // The file layout, and the packed one where this machine's kernel has it.
    for (bool packed : {false, true}) {
      if (packed && !packs(t)) continue;
      const std::string name = std::string(dtype_name(t)) + (packed ? "/packed" : "");
      benchmark::RegisterBenchmark(("Matmul/" + name).c_str(),
                                   [t, packed](benchmark::State& s) { BM_Matmul(s, t, packed); })
          ->ArgName("M")
          ->Arg(1)
          ->Arg(6)
          ->Arg(8)
          ->Arg(9)
          ->Arg(16)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
      benchmark::RegisterBenchmark(
          ("MatmulInCache/" + name).c_str(),
          [t, packed](benchmark::State& s) { BM_MatmulInCache(s, t, packed); })
          ->ArgName("M")
          ->Arg(1)
          ->Arg(6)
          ->Arg(16)
          ->Unit(benchmark::kMicrosecond);
    }
  }
  // {N, K}: the 1.5B's attention and FFN matrices (K-quants), the 0.5B's (rows of
  // 896, the legacy types its file and a requantized draft use).
  const std::vector<std::pair<std::vector<DType>, std::vector<std::vector<int64_t>>>> small = {
      {{DType::Q4_K, DType::Q6_K},
       {{256, 1536}, {1536, 1536}, {2048, 1536}, {8960, 1536}, {896, 4864}}},
      {{DType::Q5_0, DType::Q4_0, DType::Q8_0},
       {{1152, 896}, {896, 896}, {4864, 896}, {9728, 896}, {896, 4864}, {8960, 1536}}}};
  for (const auto& [types, shapes] : small)
    for (DType t : types) {
      auto* b = benchmark::RegisterBenchmark(("MatmulSmall/" + std::string(dtype_name(t))).c_str(),
                                             [t](benchmark::State& s) { BM_MatmulSmall(s, t); });
      b->ArgNames({"N", "K"})->Unit(benchmark::kMicrosecond)->UseRealTime();
      for (const auto& nk : shapes) b->Args(nk);
    }
#if defined(__x86_64__)
  benchmark::RegisterBenchmark("VnniPeak", BM_VnniPeak)->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("VnniBroadcast/uses:1", BM_VnniBroadcast<1>)
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("VnniBroadcast/uses:2", BM_VnniBroadcast<2>)
      ->Unit(benchmark::kMicrosecond);
#endif
  benchmark::RegisterBenchmark("DecodeMatmuls", BM_DecodeMatmuls)
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
  benchmark::RegisterBenchmark("QuantizeActs", BM_QuantizeActs)
      ->ArgNames({"K", "block"})
      ->Args({896, 32})
      ->Args({1536, 256})
      ->Args({4864, 32})
      ->Args({4864, 256})
      ->Args({8960, 256})
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("SumExp", BM_SumExp)
      ->ArgNames({"n", "scalar"})
      ->Args({32768, 0})
      ->Args({32768, 1})
      ->Args({151936, 0})
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("GumbelArgmax", BM_GumbelArgmax)
      ->ArgNames({"sd", "peak", "T%"})
      ->Args({2, 0, 100})
      ->Args({3, 10, 100})
      ->Args({3, 15, 70})
      ->Args({3, 15, 100})
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("Attention", BM_Attention)
      ->ArgNames({"ctx", "n_q", "cold", "hd"})
      ->Args({16, 1, 0, 128})
      ->Args({160, 1, 0, 128})
      ->Args({512, 1, 0, 128})
      ->Args({512, 6, 0, 128})
      ->Args({4096, 1, 0, 128})
      ->Args({4096, 6, 0, 128})
      ->Args({160, 1, 0, 64})
      ->Args({512, 1, 0, 64})
      ->Args({512, 6, 0, 64})
      ->Unit(benchmark::kMicrosecond)
      ->UseRealTime();
  // From memory, as in a decode step, whose weights have pushed the cache out
  // of L3: a fixed number of iterations, as each is timed apart from the eviction.
  benchmark::RegisterBenchmark("Attention", BM_Attention)
      ->ArgNames({"ctx", "n_q", "cold", "hd"})
      ->Args({160, 1, 1, 128})
      ->Args({512, 1, 1, 128})
      ->Args({160, 1, 1, 64})
      ->Args({512, 1, 1, 64})
      ->Iterations(2000)
      ->Unit(benchmark::kMicrosecond)
      ->UseRealTime();
  benchmark::RegisterBenchmark("AttentionBatch", BM_AttentionBatch)
      ->ArgNames({"seqs", "ctx", "batched"})
      ->Args({4, 256, 0})
      ->Args({4, 256, 1})
      ->Args({16, 256, 0})
      ->Args({16, 256, 1})
      ->Unit(benchmark::kMicrosecond)
      ->UseRealTime();
}

}  // namespace

int main(int argc, char** argv) {
  register_all();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
