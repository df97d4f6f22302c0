// Device K/V behind host block tables (device_kv_cache.h). Built only with the
// CUDA kernels: move() queues device copies.
#if defined(TANDEM_HAVE_CUDA)
#include "cuda_model/device_kv_cache.h"

#include "core/error.h"
#include "cuda/stream.h"

namespace tandem::cuda_model {
namespace {

// The host tables' own cache: one layer of one value per position, F32 (its
// storage is never read; see the header).
const KVCacheShape kTableShape{1, 1, 1};

}  // namespace

size_t DeviceKVCache::device_block_bytes(const KVCacheShape& shape, int block_size, DType type) {
  return 2 * size_t(shape.n_layers) * size_t(block_size) * dtype_row_bytes(type, shape.row_elems());
}

DeviceKVCache::DeviceKVCache(const KVCacheShape& shape, int n_slots, int n_blocks, int block_size,
                             DType type, uint8_t* device, cuda::Stream stream, bool prefix_sharing)
    : tables_(kTableShape, n_slots, n_blocks, block_size, DType::F32),
      n_blocks_(n_blocks),
      device_(device),
      row_bytes_(dtype_row_bytes(type, shape.row_elems())),
      pool_bytes_(size_t(n_blocks + 1) * size_t(block_size) * row_bytes_),
      stream_(stream),
      prefix_sharing_(prefix_sharing) {
  check(type == DType::F16 || type == DType::F32,
        "device KV cache: type must be F16 or F32, got {}", dtype_name(type));
  shape_ = shape;
  type_ = type;
}

cuda::PagedKV DeviceKVCache::layer(int l) const {
  cuda::PagedKV kv;
  kv.k_pool = device_ + (2 * size_t(l)) * pool_bytes_;
  kv.v_pool = device_ + (2 * size_t(l) + 1) * pool_bytes_;
  kv.type = type_;
  kv.block_size = block_size();
  return kv;
}

void DeviceKVCache::store(int, int, int, const float*, const float*) {
  fail(
      "device KV cache: store: the K/V live in device memory; only the CUDA forward pass "
      "writes them");
}

KVSeqView DeviceKVCache::view(int, int) const {
  fail(
      "device KV cache: view: the K/V live in device memory; only the CUDA forward pass reads "
      "them");
}

// The host tables check the move (bounds, never into a shared prefix block);
// then each layer's K and V row is copied on the device, in stream order with
// the passes that wrote and will read it.
void DeviceKVCache::move(int slot, int from, int to) {
  tables_.move(slot, from, to);
  if (from == to) return;
  const std::vector<int>& t = tables_.block_table(slot);
  const int bs = block_size();
  const size_t src = (size_t(t[from / bs]) * bs + from % bs) * row_bytes_;
  const size_t dst = (size_t(t[to / bs]) * bs + to % bs) * row_bytes_;
  for (int l = 0; l < shape_.n_layers; ++l) {
    const cuda::PagedKV kv = layer(l);
    cuda::copy_on_device(static_cast<uint8_t*>(kv.k_pool) + dst,
                         static_cast<const uint8_t*>(kv.k_pool) + src, row_bytes_, stream_);
    cuda::copy_on_device(static_cast<uint8_t*>(kv.v_pool) + dst,
                         static_cast<const uint8_t*>(kv.v_pool) + src, row_bytes_, stream_);
  }
}

}  // namespace tandem::cuda_model
#endif
