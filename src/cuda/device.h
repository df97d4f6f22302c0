// The CUDA device as the backend's host code sees it: the query, owned device
// memory, and synchronisation with error checks.
//
// Declared in every build, defined only where the kernels are built
// (TANDEM_HAVE_CUDA, cmake/TandemCuda.cmake): code that calls these must itself
// be built only then (the GPU tests, tests/cuda). A CUDA error throws
// tandem::Error naming the call and the error.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

// cudaStream_t, without the CUDA headers (it is this pointer type).
struct CUstream_st;

namespace tandem::cuda {

using Stream = CUstream_st*;  // nullptr: the default stream

// CUDA devices this process can use: 0 when there is none, or no driver, or
// the driver is older than the runtime (never throws).
int device_count();

struct DeviceProperties {
  std::string name;
  int major = 0, minor = 0;  // compute capability
  int multiprocessors = 0;
  size_t total_bytes = 0;
  size_t free_bytes = 0;
};
// Properties of the current device (device 0 unless the process chose another).
DeviceProperties device_properties();

// Waits until everything launched so far has finished; throws on any error a
// kernel raised.
void synchronize();
// Throws if the last launch failed to start (bad configuration).
void check_launch(const char* what);

// Device memory of a fixed size, freed with the buffer. Move-only.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return data_; }
  size_t size() const { return bytes_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  // Synchronous copies of `bytes` bytes at `offset` into the buffer / out of it.
  void upload(const void* src, size_t bytes, size_t offset = 0);
  void download(void* dst, size_t bytes, size_t offset = 0) const;
  void zero();

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace tandem::cuda
