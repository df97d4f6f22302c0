// The device query, device memory and synchronisation (cuda/device.h).
#include <cuda_runtime.h>

#include <utility>
#include <vector>

#include "cuda/cuda_kernels.h"
#include "cuda/device.h"
#include "cuda/device/check.cuh"

namespace tandem::cuda {

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();  // no device or no driver: clear the error, report none
    return 0;
  }
  return n;
}

DeviceProperties device_properties() {
  int device = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  cudaDeviceProp p{};
  check(cudaGetDeviceProperties(&p, device), "cudaGetDeviceProperties");
  DeviceProperties out;
  out.name = p.name;
  out.major = p.major;
  out.minor = p.minor;
  out.multiprocessors = p.multiProcessorCount;
  check(cudaMemGetInfo(&out.free_bytes, &out.total_bytes), "cudaMemGetInfo");
  return out;
}

void synchronize() { check(cudaDeviceSynchronize(), "a kernel"); }

void check_launch(const char* what) { check(cudaGetLastError(), what); }

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) {
  if (bytes > 0) check(cudaMalloc(&data_, bytes), "cudaMalloc");
}

DeviceBuffer::~DeviceBuffer() {
  if (data_) (void)cudaFree(data_);
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (data_) (void)cudaFree(data_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void DeviceBuffer::upload(const void* src, size_t bytes, size_t offset) {
  if (offset + bytes > bytes_) raise_error("DeviceBuffer::upload past the end of the buffer");
  check(cudaMemcpy(static_cast<char*>(data_) + offset, src, bytes, cudaMemcpyHostToDevice),
        "cudaMemcpy to the device");
}

void DeviceBuffer::download(void* dst, size_t bytes, size_t offset) const {
  if (offset + bytes > bytes_) raise_error("DeviceBuffer::download past the end of the buffer");
  check(cudaMemcpy(dst, static_cast<const char*>(data_) + offset, bytes, cudaMemcpyDeviceToHost),
        "cudaMemcpy from the device");
}

void DeviceBuffer::zero() {
  if (bytes_ > 0) check(cudaMemset(data_, 0, bytes_), "cudaMemset");
}

DeviceMatrix upload_matrix(const WeightLayout& layout, const uint8_t* ggml, DeviceBuffer& buffer) {
  std::vector<uint8_t> host(layout.total_bytes);
  repack_weights(layout, ggml, host.data());
  buffer = DeviceBuffer(layout.total_bytes);
  buffer.upload(host.data(), host.size());
  return {layout, buffer.as<const uint8_t>()};
}

}  // namespace tandem::cuda
