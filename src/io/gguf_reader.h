// GGUF reader (versions 2 and 3): metadata of every value type, tensor infos,
// alignment. Tensor data stays in the memory map. Every read is bounds-checked;
// a malformed or truncated file raises tandem::Error naming the file and field.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "core/tensor.h"
#include "io/mapped_file.h"

namespace tandem {

enum class GGUFType : uint32_t {
  UINT8 = 0,
  INT8 = 1,
  UINT16 = 2,
  INT16 = 3,
  UINT32 = 4,
  INT32 = 5,
  FLOAT32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  UINT64 = 10,
  INT64 = 11,
  FLOAT64 = 12,
};

// One metadata value. Integers are widened to int64/uint64, floats to double;
// `type` keeps the stored type. Arrays hold their elements in `array`.
struct GGUFValue {
  GGUFType type = GGUFType::UINT8;
  std::variant<int64_t, uint64_t, double, bool, std::string> scalar;
  GGUFType elem_type = GGUFType::UINT8;  // for ARRAY
  std::vector<GGUFValue> array;

  bool is_array() const { return type == GGUFType::ARRAY; }
};

class GGUFFile {
 public:
  explicit GGUFFile(const std::string& path);  // throws tandem::Error

  const std::string& path() const { return file_->path(); }
  uint32_t version() const { return version_; }
  size_t alignment() const { return alignment_; }
  const std::map<std::string, GGUFValue>& metadata() const { return kv_; }
  const std::vector<TensorView>& tensors() const { return tensors_; }

  bool has(const std::string& key) const { return kv_.count(key) != 0; }
  const GGUFValue* find(const std::string& key) const;
  // Typed accessors: throw naming the file and key when absent or mistyped.
  std::string get_string(const std::string& key) const;
  int64_t get_int(const std::string& key) const;   // any integer type
  double get_float(const std::string& key) const;  // any float or integer type
  bool get_bool(const std::string& key) const;
  std::vector<std::string> get_string_array(const std::string& key) const;
  std::vector<int64_t> get_int_array(const std::string& key) const;
  std::vector<double> get_float_array(const std::string& key) const;
  // Optional variants return a default when the key is absent.
  std::optional<std::string> opt_string(const std::string& key) const;
  std::optional<int64_t> opt_int(const std::string& key) const;
  std::optional<double> opt_float(const std::string& key) const;
  std::optional<bool> opt_bool(const std::string& key) const;

  const TensorView* find_tensor(const std::string& name) const;

 private:
  std::shared_ptr<MappedFile> file_;
  uint32_t version_ = 0;
  size_t alignment_ = 32;
  std::map<std::string, GGUFValue> kv_;
  std::vector<TensorView> tensors_;
  std::map<std::string, size_t> tensor_index_;
};

std::string gguf_type_name(GGUFType t);
// Render a value for display (arrays abbreviated).
std::string gguf_value_to_string(const GGUFValue& v, size_t max_items = 8);

}  // namespace tandem
