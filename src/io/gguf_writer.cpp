#include "io/gguf_writer.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>

#include "core/error.h"
#include "quant/quants.h"

namespace tandem {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" little-endian
constexpr uint32_t kVersion = 3;
constexpr size_t kDefaultAlignment = 32;
constexpr int kMaxDims = 4;

bool is_int_type(GGUFType t) {
  switch (t) {
    case GGUFType::UINT8:
    case GGUFType::INT8:
    case GGUFType::UINT16:
    case GGUFType::INT16:
    case GGUFType::UINT32:
    case GGUFType::INT32:
    case GGUFType::UINT64:
    case GGUFType::INT64:
      return true;
    default:
      return false;
  }
}

// The inclusive range [min, max] of an integer type.
struct IntRange {
  bool is_signed;
  int64_t min;
  uint64_t max;
};

IntRange int_range(GGUFType t) {
  switch (t) {
    case GGUFType::UINT8:
      return {false, 0, 0xFF};
    case GGUFType::INT8:
      return {true, -128, 127};
    case GGUFType::UINT16:
      return {false, 0, 0xFFFF};
    case GGUFType::INT16:
      return {true, -32768, 32767};
    case GGUFType::UINT32:
      return {false, 0, 0xFFFFFFFFu};
    case GGUFType::INT32:
      return {true, std::numeric_limits<int32_t>::min(), 0x7FFFFFFF};
    case GGUFType::UINT64:
      return {false, 0, std::numeric_limits<uint64_t>::max()};
    default:
      return {true, std::numeric_limits<int64_t>::min(),
              uint64_t(std::numeric_limits<int64_t>::max())};
  }
}

// Checks that the variant alternative matches the declared type and that
// integers fit; `key` names the value in errors.
void validate_value(const GGUFValue& v, const std::string& key, int depth) {
  auto bad = [&](const char* why) {
    fail("GGUF writer: metadata '{}' of type {}: {}", key, gguf_type_name(v.type), why);
  };
  if (static_cast<uint32_t>(v.type) > static_cast<uint32_t>(GGUFType::FLOAT64))
    fail("GGUF writer: metadata '{}': unknown value type {}", key, static_cast<uint32_t>(v.type));
  if (is_int_type(v.type)) {
    IntRange r = int_range(v.type);
    if (auto* u = std::get_if<uint64_t>(&v.scalar)) {
      if (*u > r.max) bad("value out of range");
    } else if (auto* i = std::get_if<int64_t>(&v.scalar)) {
      if (*i < r.min || (*i > 0 && uint64_t(*i) > r.max)) bad("value out of range");
    } else {
      bad("value is not an integer");
    }
    return;
  }
  switch (v.type) {
    case GGUFType::FLOAT32:
    case GGUFType::FLOAT64:
      if (!std::holds_alternative<double>(v.scalar)) bad("value is not a float");
      break;
    case GGUFType::BOOL:
      if (!std::holds_alternative<bool>(v.scalar)) bad("value is not a bool");
      break;
    case GGUFType::STRING:
      if (!std::holds_alternative<std::string>(v.scalar)) bad("value is not a string");
      break;
    case GGUFType::ARRAY:
      if (depth >= 3) bad("arrays nested too deeply");
      for (const auto& e : v.array) {
        if (e.type != v.elem_type) bad("array element of a different type");
        validate_value(e, key, depth + 1);
      }
      break;
    default:
      break;
  }
}

// Little-endian byte buffer for the header part of the file.
class Buffer {
 public:
  template <typename T>
  void put(T v) {
    uint8_t b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    bytes_.insert(bytes_.end(), b, b + sizeof(T));
  }
  void put_string(const std::string& s) {
    put<uint64_t>(s.size());
    bytes_.insert(bytes_.end(), s.begin(), s.end());
  }
  void pad_to(size_t alignment) {
    while (bytes_.size() % alignment != 0) bytes_.push_back(0);
  }
  const std::vector<uint8_t>& bytes() const { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

int64_t int_of(const GGUFValue& v) {
  if (auto* u = std::get_if<uint64_t>(&v.scalar)) return static_cast<int64_t>(*u);
  return std::get<int64_t>(v.scalar);
}

// Encodes a validated value (without its type tag).
void put_value(Buffer& b, const GGUFValue& v) {
  switch (v.type) {
    case GGUFType::UINT8:
      b.put<uint8_t>(static_cast<uint8_t>(int_of(v)));
      break;
    case GGUFType::INT8:
      b.put<int8_t>(static_cast<int8_t>(int_of(v)));
      break;
    case GGUFType::UINT16:
      b.put<uint16_t>(static_cast<uint16_t>(int_of(v)));
      break;
    case GGUFType::INT16:
      b.put<int16_t>(static_cast<int16_t>(int_of(v)));
      break;
    case GGUFType::UINT32:
      b.put<uint32_t>(static_cast<uint32_t>(int_of(v)));
      break;
    case GGUFType::INT32:
      b.put<int32_t>(static_cast<int32_t>(int_of(v)));
      break;
    case GGUFType::UINT64:
      b.put<uint64_t>(static_cast<uint64_t>(int_of(v)));
      break;
    case GGUFType::INT64:
      b.put<int64_t>(int_of(v));
      break;
    case GGUFType::FLOAT32:
      b.put<float>(static_cast<float>(std::get<double>(v.scalar)));
      break;
    case GGUFType::FLOAT64:
      b.put<double>(std::get<double>(v.scalar));
      break;
    case GGUFType::BOOL:
      b.put<uint8_t>(std::get<bool>(v.scalar) ? 1 : 0);
      break;
    case GGUFType::STRING:
      b.put_string(std::get<std::string>(v.scalar));
      break;
    case GGUFType::ARRAY:
      b.put<uint32_t>(static_cast<uint32_t>(v.elem_type));
      b.put<uint64_t>(v.array.size());
      for (const auto& e : v.array) put_value(b, e);
      break;
  }
}

size_t align_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

}  // namespace

GGUFValue gguf_int(GGUFType type, int64_t v) {
  check(is_int_type(type), "gguf_int: {} is not an integer type", gguf_type_name(type));
  GGUFValue g;
  g.type = type;
  g.scalar = v;
  return g;
}

GGUFValue gguf_float(GGUFType type, double v) {
  check(type == GGUFType::FLOAT32 || type == GGUFType::FLOAT64,
        "gguf_float: {} is not a float type", gguf_type_name(type));
  GGUFValue g;
  g.type = type;
  g.scalar = v;
  return g;
}

GGUFValue gguf_bool(bool v) {
  GGUFValue g;
  g.type = GGUFType::BOOL;
  g.scalar = v;
  return g;
}

GGUFValue gguf_string(std::string v) {
  GGUFValue g;
  g.type = GGUFType::STRING;
  g.scalar = std::move(v);
  return g;
}

GGUFValue gguf_array(GGUFType elem_type, std::vector<GGUFValue> elems) {
  GGUFValue g;
  g.type = GGUFType::ARRAY;
  g.elem_type = elem_type;
  g.array = std::move(elems);
  return g;
}

GGUFWriter::GGUFWriter(size_t alignment) : alignment_(alignment) {
  check(alignment > 0 && (alignment & (alignment - 1)) == 0 && alignment <= (1u << 20),
        "GGUF writer: alignment {} is not a power of two up to 1 MiB", alignment);
}

void GGUFWriter::set(const std::string& key, GGUFValue v) {
  validate_value(v, key, 0);
  for (auto& [k, old] : kv_)
    if (k == key) {
      old = std::move(v);
      return;
    }
  kv_.emplace_back(key, std::move(v));
}

void GGUFWriter::set_string(const std::string& key, const std::string& v) {
  set(key, gguf_string(v));
}
void GGUFWriter::set_u32(const std::string& key, uint32_t v) {
  set(key, gguf_int(GGUFType::UINT32, v));
}
void GGUFWriter::set_i32(const std::string& key, int32_t v) {
  set(key, gguf_int(GGUFType::INT32, v));
}
void GGUFWriter::set_f32(const std::string& key, float v) {
  set(key, gguf_float(GGUFType::FLOAT32, v));
}
void GGUFWriter::set_bool(const std::string& key, bool v) { set(key, gguf_bool(v)); }

void GGUFWriter::set_string_array(const std::string& key, const std::vector<std::string>& v) {
  std::vector<GGUFValue> elems;
  elems.reserve(v.size());
  for (const auto& s : v) elems.push_back(gguf_string(s));
  set(key, gguf_array(GGUFType::STRING, std::move(elems)));
}

void GGUFWriter::set_f32_array(const std::string& key, const std::vector<float>& v) {
  std::vector<GGUFValue> elems;
  elems.reserve(v.size());
  for (float f : v) elems.push_back(gguf_float(GGUFType::FLOAT32, f));
  set(key, gguf_array(GGUFType::FLOAT32, std::move(elems)));
}

void GGUFWriter::set_i32_array(const std::string& key, const std::vector<int32_t>& v) {
  std::vector<GGUFValue> elems;
  elems.reserve(v.size());
  for (int32_t i : v) elems.push_back(gguf_int(GGUFType::INT32, i));
  set(key, gguf_array(GGUFType::INT32, std::move(elems)));
}

void GGUFWriter::add_tensor(const std::string& name, DType type, std::vector<int64_t> shape,
                            std::vector<uint8_t> data) {
  check(!name.empty(), "GGUF writer: tensor with an empty name");
  for (const auto& t : tensors_) check(t.name != name, "GGUF writer: duplicate tensor '{}'", name);
  check(!shape.empty() && shape.size() <= kMaxDims,
        "GGUF writer: tensor '{}' has {} dimensions (1 to {} allowed)", name, shape.size(),
        kMaxDims);
  uint64_t rows = 1;
  for (int64_t d : shape) check(d > 0, "GGUF writer: tensor '{}' has dimension {}", name, d);
  for (size_t i = 1; i < shape.size(); ++i) rows *= static_cast<uint64_t>(shape[i]);
  const auto& info = dtype_info(type);
  check(shape[0] % info.block_size == 0,
        "GGUF writer: tensor '{}': row length {} is not a multiple of the {} block size {}", name,
        shape[0], info.name, info.block_size);
  size_t expect = dtype_row_bytes(type, shape[0]) * rows;
  check(data.size() == expect, "GGUF writer: tensor '{}' ({}) has {} bytes of data, expected {}",
        name, info.name, data.size(), expect);
  tensors_.push_back({name, type, std::move(shape), std::move(data)});
}

void GGUFWriter::add_tensor_f32(const std::string& name, DType type, std::vector<int64_t> shape,
                                const std::vector<float>& values) {
  check(!shape.empty() && shape[0] > 0, "GGUF writer: tensor '{}' has an empty shape", name);
  int64_t numel = 1;
  for (int64_t d : shape) numel *= d;
  check(numel == static_cast<int64_t>(values.size()),
        "GGUF writer: tensor '{}' has {} values for {} elements", name, values.size(), numel);
  const int64_t row = shape[0];
  const auto& info = dtype_info(type);
  check(row % info.block_size == 0,
        "GGUF writer: tensor '{}': row length {} is not a multiple of the {} block size {}", name,
        row, info.name, info.block_size);
  const size_t row_bytes = dtype_row_bytes(type, row);
  const int64_t rows = numel / row;
  std::vector<uint8_t> data(row_bytes * rows);
  if (type == DType::F32) {
    std::memcpy(data.data(), values.data(), data.size());
  } else {
    for (int64_t r = 0; r < rows; ++r)
      quantize_row(type, values.data() + r * row, data.data() + r * row_bytes, row);
  }
  add_tensor(name, type, std::move(shape), std::move(data));
}

void GGUFWriter::write(const std::string& path) const {
  // general.alignment is written only when it differs from the default, as
  // llama.cpp does; a caller-set value must agree with the constructor's.
  std::vector<std::pair<std::string, GGUFValue>> kv = kv_;
  bool has_alignment = false;
  for (const auto& [k, v] : kv)
    if (k == "general.alignment") {
      has_alignment = true;
      check(is_int_type(v.type), "{}: general.alignment must be an integer, not {}", path,
            gguf_type_name(v.type));
      check(int_of(v) == static_cast<int64_t>(alignment_),
            "{}: general.alignment {} differs from the writer's alignment {}", path, int_of(v),
            alignment_);
    }
  if (!has_alignment && alignment_ != kDefaultAlignment)
    kv.emplace_back("general.alignment", gguf_int(GGUFType::UINT32, alignment_));

  Buffer head;
  head.put<uint32_t>(kMagic);
  head.put<uint32_t>(kVersion);
  head.put<uint64_t>(tensors_.size());
  head.put<uint64_t>(kv.size());
  for (const auto& [k, v] : kv) {
    head.put_string(k);
    head.put<uint32_t>(static_cast<uint32_t>(v.type));
    put_value(head, v);
  }
  // Offsets are relative to the start of the data section; each tensor starts
  // on an alignment boundary.
  std::vector<size_t> offsets;
  size_t off = 0;
  for (const auto& t : tensors_) {
    head.put_string(t.name);
    head.put<uint32_t>(static_cast<uint32_t>(t.shape.size()));
    for (int64_t d : t.shape) head.put<uint64_t>(static_cast<uint64_t>(d));
    head.put<uint32_t>(static_cast<uint32_t>(t.type));
    head.put<uint64_t>(off);
    offsets.push_back(off);
    off = align_up(off + t.data.size(), alignment_);
  }
  head.pad_to(alignment_);

  write_file_atomically(path, [&](const WriteBytes& out) {
    out(head.bytes().data(), head.bytes().size());
    const std::vector<uint8_t> zeros(alignment_, 0);
    size_t pos = 0;
    for (size_t i = 0; i < tensors_.size(); ++i) {
      out(tensors_[i].data.data(), tensors_[i].data.size());
      pos = offsets[i] + tensors_[i].data.size();
      size_t pad = align_up(pos, alignment_) - pos;
      out(zeros.data(), pad);
    }
  });
}

void write_file_atomically(const std::string& path,
                           const std::function<void(const WriteBytes&)>& body) {
  const std::string tmp = fmt::format("{}.tmp-{}", path, ::getpid());
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) fail("{}: cannot create: {}", path, std::strerror(errno));
  auto out = [&](const void* data, size_t n) {
    if (n > 0 && std::fwrite(data, 1, n, f) != n)
      fail("{}: write failed: {}", path, std::strerror(errno));
  };
  try {
    body(out);
    if (std::fflush(f) != 0) fail("{}: write failed: {}", path, std::strerror(errno));
  } catch (...) {
    std::fclose(f);
    std::remove(tmp.c_str());
    throw;
  }
  if (std::fclose(f) != 0) {
    std::remove(tmp.c_str());
    fail("{}: write failed: {}", path, std::strerror(errno));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    std::remove(tmp.c_str());
    fail("{}: cannot rename the temporary file into place: {}", path, std::strerror(err));
  }
}

}  // namespace tandem
