// safetensors files: an 8-byte little-endian header length, a JSON header
// {"name": {"dtype": "BF16", "shape": [rows, cols], "data_offsets": [b, e]}, ...,
// "__metadata__": {...}}, then the raw tensor bytes. Tensors stay in the memory map.
// Shapes are reported in GGML order (innermost first) like every TensorView.
#pragma once
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "io/mapped_file.h"

namespace tandem {

class SafetensorsFile {
 public:
  // Throws tandem::Error naming the file and problem: truncated file, bad header
  // JSON, offsets outside the data or inconsistent with the shape.
  //
  // Tensors of dtypes tandem does not compute with (anything but F32, F16 and
  // BF16: I8, F64, F8_E4M3, ...) do not make the file unreadable: checkpoints
  // carry such extras (int64 position ids, fp8 scales) that a model never reads.
  // They are left out of tensors() and find() and listed by unsupported_dtype(),
  // so a loader that needs one can fail naming the tensor and its dtype.
  explicit SafetensorsFile(const std::string& path);

  const std::string& path() const { return file_->path(); }
  const std::vector<TensorView>& tensors() const { return tensors_; }
  const TensorView* find(const std::string& name) const;
  // The dtype string of a tensor left out because of its dtype, or nullopt.
  std::optional<std::string> unsupported_dtype(const std::string& name) const;
  const std::map<std::string, std::string>& unsupported() const { return unsupported_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  std::shared_ptr<const MappedFile> mapping() const { return file_; }

 private:
  std::shared_ptr<MappedFile> file_;
  std::vector<TensorView> tensors_;
  std::map<std::string, size_t> index_;
  std::map<std::string, std::string> unsupported_;  // name -> dtype
  std::map<std::string, std::string> metadata_;
};

// Writes tensors of type F32, F16 or BF16. `shape` in GGML order, as TensorView.
// Tensors are stored in the order they were added; the header is padded with
// spaces to a multiple of 8 bytes so the data section starts aligned.
class SafetensorsWriter {
 public:
  void add(const std::string& name, DType type, std::vector<int64_t> shape,
           std::vector<uint8_t> data);
  void add_f32(const std::string& name, DType type, std::vector<int64_t> shape,
               const std::vector<float>& values);  // converts to F32/F16/BF16
  void set_metadata(const std::string& key, const std::string& value);
  void write(const std::string& path) const;  // throws tandem::Error naming the path

 private:
  struct Tensor {
    std::string name;
    DType type;
    std::vector<int64_t> shape;
    std::vector<uint8_t> data;
  };
  std::vector<Tensor> tensors_;
  std::map<std::string, std::string> metadata_;
};

// The safetensors dtype string of F32, F16 or BF16 ("F32", "F16", "BF16").
const char* safetensors_dtype_name(DType t);

}  // namespace tandem
