// A CUDA stream and the asynchronous copies a forward pass makes on it, and
// pinned host memory for them: a copy from pageable memory cannot be queued
// asynchronously (nor captured into a graph), so every per-step input and
// every downloaded logits row goes through a PinnedBuffer.
//
// Declared in every build, defined only where the kernels are built
// (TANDEM_HAVE_CUDA), like device.h.
#pragma once
#include <cstddef>

#include "cuda/device.h"

namespace tandem::cuda {

// An owned, non-blocking stream. Move-only.
class StreamOwner {
 public:
  StreamOwner();
  ~StreamOwner();
  StreamOwner(StreamOwner&& other) noexcept;
  StreamOwner& operator=(StreamOwner&& other) noexcept;
  StreamOwner(const StreamOwner&) = delete;
  StreamOwner& operator=(const StreamOwner&) = delete;

  Stream get() const { return stream_; }
  // Waits for everything queued on the stream; throws on a kernel's error.
  void synchronize() const;

 private:
  Stream stream_ = nullptr;
};

// Page-locked host memory of a fixed size. Move-only.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  explicit PinnedBuffer(size_t bytes);
  ~PinnedBuffer();
  PinnedBuffer(PinnedBuffer&& other) noexcept;
  PinnedBuffer& operator=(PinnedBuffer&& other) noexcept;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;

  void* data() const { return data_; }
  size_t size() const { return bytes_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

// Asynchronous copies on `stream` (host memory pinned).
void copy_to_device(void* device_dst, const void* host_src, size_t bytes, Stream stream);
void copy_to_host(void* host_dst, const void* device_src, size_t bytes, Stream stream);
void copy_on_device(void* device_dst, const void* device_src, size_t bytes, Stream stream);
// A synchronous copy from any host memory (the weights' upload at load).
void copy_to_device_sync(void* device_dst, const void* host_src, size_t bytes);

}  // namespace tandem::cuda
