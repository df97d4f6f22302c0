// Streams, pinned host memory and asynchronous copies (cuda/stream.h).
#include <cuda_runtime.h>

#include <utility>

#include "cuda/device/check.cuh"
#include "cuda/stream.h"

namespace tandem::cuda {

StreamOwner::StreamOwner() {
  check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
}

StreamOwner::~StreamOwner() {
  if (stream_) (void)cudaStreamDestroy(stream_);
}

StreamOwner::StreamOwner(StreamOwner&& other) noexcept
    : stream_(std::exchange(other.stream_, nullptr)) {}

StreamOwner& StreamOwner::operator=(StreamOwner&& other) noexcept {
  if (this != &other) {
    if (stream_) (void)cudaStreamDestroy(stream_);
    stream_ = std::exchange(other.stream_, nullptr);
  }
  return *this;
}

void StreamOwner::synchronize() const { check(cudaStreamSynchronize(stream_), "a kernel"); }

PinnedBuffer::PinnedBuffer(size_t bytes) : bytes_(bytes) {
  if (bytes > 0) check(cudaMallocHost(&data_, bytes), "cudaMallocHost");
}

PinnedBuffer::~PinnedBuffer() {
  if (data_) (void)cudaFreeHost(data_);
}

PinnedBuffer::PinnedBuffer(PinnedBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& other) noexcept {
  if (this != &other) {
    if (data_) (void)cudaFreeHost(data_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void copy_to_device(void* device_dst, const void* host_src, size_t bytes, Stream stream) {
  if (bytes == 0) return;
  check(cudaMemcpyAsync(device_dst, host_src, bytes, cudaMemcpyHostToDevice, stream),
        "cudaMemcpyAsync to the device");
}

void copy_to_host(void* host_dst, const void* device_src, size_t bytes, Stream stream) {
  if (bytes == 0) return;
  check(cudaMemcpyAsync(host_dst, device_src, bytes, cudaMemcpyDeviceToHost, stream),
        "cudaMemcpyAsync from the device");
}

void copy_on_device(void* device_dst, const void* device_src, size_t bytes, Stream stream) {
  if (bytes == 0) return;
  check(cudaMemcpyAsync(device_dst, device_src, bytes, cudaMemcpyDeviceToDevice, stream),
        "cudaMemcpyAsync on the device");
}

void copy_to_device_sync(void* device_dst, const void* host_src, size_t bytes) {
  if (bytes == 0) return;
  check(cudaMemcpy(device_dst, host_src, bytes, cudaMemcpyHostToDevice),
        "cudaMemcpy to the device");
}

}  // namespace tandem::cuda
