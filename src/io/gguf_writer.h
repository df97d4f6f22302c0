// GGUF v3 writer: metadata of any value type and tensors (already in their final
// encoding). Used to generate synthetic test models and by tools that convert
// or re-quantize; the result reads back with GGUFFile.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "io/gguf_reader.h"

namespace tandem {

// Builders for metadata values of any GGUF type. Integers are range-checked
// against `type` when written.
GGUFValue gguf_int(GGUFType type, int64_t v);   // any integer type
GGUFValue gguf_float(GGUFType type, double v);  // FLOAT32 or FLOAT64
GGUFValue gguf_bool(bool v);
GGUFValue gguf_string(std::string v);
// Every element must have type elem_type (arrays of arrays are allowed).
GGUFValue gguf_array(GGUFType elem_type, std::vector<GGUFValue> elems);

class GGUFWriter {
 public:
  explicit GGUFWriter(size_t alignment = 32);  // a power of two

  void set(const std::string& key, GGUFValue v);  // replaces an existing key
  void set_string(const std::string& key, const std::string& v);
  void set_u32(const std::string& key, uint32_t v);
  void set_i32(const std::string& key, int32_t v);
  void set_f32(const std::string& key, float v);
  void set_bool(const std::string& key, bool v);
  void set_string_array(const std::string& key, const std::vector<std::string>& v);
  void set_f32_array(const std::string& key, const std::vector<float>& v);
  void set_i32_array(const std::string& key, const std::vector<int32_t>& v);

  // shape in GGML order (shape[0] innermost); data holds the encoded bytes of
  // `type` (dtype_row_bytes(type, shape[0]) * rows).
  void add_tensor(const std::string& name, DType type, std::vector<int64_t> shape,
                  std::vector<uint8_t> data);
  // Convenience: quantize float data (row-major, shape[0] innermost) to `type`.
  void add_tensor_f32(const std::string& name, DType type, std::vector<int64_t> shape,
                      const std::vector<float>& values);

  void write(const std::string& path) const;  // throws tandem::Error on I/O failure

 private:
  struct Tensor {
    std::string name;
    DType type;
    std::vector<int64_t> shape;
    std::vector<uint8_t> data;
  };
  size_t alignment_;
  std::vector<std::pair<std::string, GGUFValue>> kv_;  // in insertion order
  std::vector<Tensor> tensors_;
};

// Writes a file through a temporary beside it and renames it into place, so a
// failed write never leaves a half-written model at `path`. `body` writes with
// the given function, which throws tandem::Error naming `path` on failure.
// (Shared by the GGUF and safetensors writers.)
using WriteBytes = std::function<void(const void* data, size_t n)>;
void write_file_atomically(const std::string& path,
                           const std::function<void(const WriteBytes&)>& body);

}  // namespace tandem
