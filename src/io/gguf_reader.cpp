#include "io/gguf_reader.h"

#include <cstring>

#include "core/error.h"

namespace tandem {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" little-endian
constexpr int kMaxDims = 4;
constexpr int kMaxArrayDepth = 4;
// Per dimension and per tensor; far beyond any model, small enough that a
// tensor's byte size (at most 4 bytes per element) fits in 64 bits.
constexpr uint64_t kMaxDim = uint64_t{1} << 40;
constexpr uint64_t kMaxElements = uint64_t{1} << 48;

// Bounds-checked little-endian reader over the mapped bytes.
class Cursor {
 public:
  Cursor(const uint8_t* data, size_t size, const std::string& path)
      : data_(data), size_(size), path_(path) {}

  size_t pos() const { return pos_; }
  size_t remaining() const { return size_ - pos_; }

  template <typename T>
  T read(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  std::string read_string(const char* what) {
    uint64_t n = read<uint64_t>(what);
    need(n, what);
    std::string s(reinterpret_cast<const char*>(data_ + pos_), n);
    pos_ += n;
    return s;
  }

  void need(uint64_t n, const char* what) const {
    if (n > remaining())
      fail("{}: truncated GGUF file: {}{} needs {} bytes at offset {}, only {} left", path_,
           context_, what, n, pos_, remaining());
  }

  // What is being read ("metadata 'general.name' ", "tensor 'output.weight' "),
  // for the error message of a truncated file.
  void set_context(std::string context) { context_ = std::move(context); }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
  const std::string& path_;
  std::string context_;
};

size_t scalar_size(GGUFType t) {
  switch (t) {
    case GGUFType::UINT8:
    case GGUFType::INT8:
    case GGUFType::BOOL:
      return 1;
    case GGUFType::UINT16:
    case GGUFType::INT16:
      return 2;
    case GGUFType::UINT32:
    case GGUFType::INT32:
    case GGUFType::FLOAT32:
      return 4;
    case GGUFType::UINT64:
    case GGUFType::INT64:
    case GGUFType::FLOAT64:
      return 8;
    case GGUFType::STRING:
      return 8;  // at least the length prefix
    case GGUFType::ARRAY:
      return 12;  // at least type + count
  }
  return 1;
}

GGUFValue read_value(Cursor& c, GGUFType type, const std::string& key, const std::string& path,
                     int depth) {
  GGUFValue v;
  v.type = type;
  const char* what = "value";
  switch (type) {
    case GGUFType::UINT8:
      v.scalar = uint64_t{c.read<uint8_t>(what)};
      break;
    case GGUFType::INT8:
      v.scalar = int64_t{c.read<int8_t>(what)};
      break;
    case GGUFType::UINT16:
      v.scalar = uint64_t{c.read<uint16_t>(what)};
      break;
    case GGUFType::INT16:
      v.scalar = int64_t{c.read<int16_t>(what)};
      break;
    case GGUFType::UINT32:
      v.scalar = uint64_t{c.read<uint32_t>(what)};
      break;
    case GGUFType::INT32:
      v.scalar = int64_t{c.read<int32_t>(what)};
      break;
    case GGUFType::UINT64:
      v.scalar = c.read<uint64_t>(what);
      break;
    case GGUFType::INT64:
      v.scalar = c.read<int64_t>(what);
      break;
    case GGUFType::FLOAT32:
      v.scalar = double{c.read<float>(what)};
      break;
    case GGUFType::FLOAT64:
      v.scalar = c.read<double>(what);
      break;
    case GGUFType::BOOL: {
      uint8_t b = c.read<uint8_t>(what);
      if (b > 1) fail("{}: metadata '{}': invalid bool value {}", path, key, b);
      v.scalar = b != 0;
      break;
    }
    case GGUFType::STRING:
      v.scalar = c.read_string(what);
      break;
    case GGUFType::ARRAY: {
      if (depth >= kMaxArrayDepth) fail("{}: metadata '{}': arrays nested too deeply", path, key);
      uint32_t et = c.read<uint32_t>("array element type");
      if (et > static_cast<uint32_t>(GGUFType::FLOAT64))
        fail("{}: metadata '{}': unknown array element type {}", path, key, et);
      v.elem_type = static_cast<GGUFType>(et);
      uint64_t n = c.read<uint64_t>("array length");
      // Each element takes at least scalar_size bytes: reject impossible counts
      // before allocating.
      if (n > c.remaining() / scalar_size(v.elem_type))
        fail("{}: metadata '{}': array length {} exceeds the file size", path, key, n);
      v.array.reserve(n);
      for (uint64_t i = 0; i < n; ++i)
        v.array.push_back(read_value(c, v.elem_type, key, path, depth + 1));
      break;
    }
    default:
      fail("{}: metadata '{}': unknown value type {}", path, key, static_cast<uint32_t>(type));
  }
  return v;
}

bool is_integer(GGUFType t) {
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

int64_t as_int(const GGUFValue& v) {
  if (auto* u = std::get_if<uint64_t>(&v.scalar)) return static_cast<int64_t>(*u);
  return std::get<int64_t>(v.scalar);
}

}  // namespace

std::string gguf_type_name(GGUFType t) {
  static const char* names[] = {"uint8",  "int8",    "uint16", "int16",  "uint32",
                                "int32",  "float32", "bool",   "string", "array",
                                "uint64", "int64",   "float64"};
  auto i = static_cast<uint32_t>(t);
  return i < 13 ? names[i] : "unknown";
}

GGUFFile::GGUFFile(const std::string& path) : file_(std::make_shared<MappedFile>(path)) {
  Cursor c(file_->data(), file_->size(), file_->path());
  if (file_->size() < 4 || c.read<uint32_t>("magic") != kMagic)
    fail("{}: not a GGUF file (bad magic)", path);
  version_ = c.read<uint32_t>("version");
  if (version_ != 2 && version_ != 3)
    fail("{}: unsupported GGUF version {} (supported: 2, 3)", path, version_);
  uint64_t n_tensors = c.read<uint64_t>("tensor count");
  uint64_t n_kv = c.read<uint64_t>("metadata count");
  if (n_kv > c.remaining() / 12) fail("{}: metadata count {} exceeds the file size", path, n_kv);
  if (n_tensors > c.remaining() / 24)
    fail("{}: tensor count {} exceeds the file size", path, n_tensors);

  for (uint64_t i = 0; i < n_kv; ++i) {
    c.set_context(fmt::format("metadata entry {} of {}: ", i, n_kv));
    std::string key = c.read_string("metadata key");
    c.set_context(fmt::format("metadata '{}' ", key));
    uint32_t t = c.read<uint32_t>("value type");
    if (t > static_cast<uint32_t>(GGUFType::FLOAT64))
      fail("{}: metadata '{}': unknown value type {}", path, key, t);
    GGUFValue v = read_value(c, static_cast<GGUFType>(t), key, path, 0);
    if (!kv_.emplace(key, std::move(v)).second) fail("{}: duplicate metadata key '{}'", path, key);
  }

  if (auto a = find("general.alignment")) {
    if (!is_integer(a->type)) fail("{}: metadata 'general.alignment' is not an integer", path);
    int64_t al = as_int(*a);
    if (al <= 0 || (al & (al - 1)) != 0 || al > (1 << 20))
      fail("{}: invalid general.alignment {}", path, al);
    alignment_ = static_cast<size_t>(al);
  }

  struct RawInfo {
    uint64_t offset;
  };
  std::vector<RawInfo> offsets;
  tensors_.reserve(n_tensors);
  for (uint64_t i = 0; i < n_tensors; ++i) {
    TensorView tv;
    c.set_context(fmt::format("tensor info {} of {}: ", i, n_tensors));
    tv.name = c.read_string("tensor name");
    c.set_context(fmt::format("tensor '{}' ", tv.name));
    uint32_t n_dims = c.read<uint32_t>("dimension count");
    if (n_dims == 0 || n_dims > kMaxDims)
      fail("{}: tensor '{}': invalid dimension count {}", path, tv.name, n_dims);
    for (uint32_t d = 0; d < n_dims; ++d) {
      uint64_t ne = c.read<uint64_t>("dimension");
      if (ne == 0 || ne > kMaxDim)
        fail("{}: tensor '{}': invalid dimension {} = {}", path, tv.name, d, ne);
      tv.shape.push_back(static_cast<int64_t>(ne));
    }
    uint32_t type_id = c.read<uint32_t>("type");
    auto info = dtype_info(type_id);
    if (!info) fail("{}: tensor '{}': unsupported tensor type id {}", path, tv.name, type_id);
    tv.type = info->type;
    if (tv.shape[0] % info->block_size != 0)
      fail("{}: tensor '{}': row length {} is not a multiple of the {} block size {}", path,
           tv.name, tv.shape[0], info->name, info->block_size);
    // The element count is checked before each multiplication, so it cannot wrap
    // around to a small number that the size check below would accept.
    uint64_t elements = static_cast<uint64_t>(tv.shape[0]);
    for (size_t d = 1; d < tv.shape.size(); ++d) {
      const auto ne = static_cast<uint64_t>(tv.shape[d]);
      if (ne > kMaxElements / elements)
        fail("{}: tensor '{}': {} dimensions hold more than {} elements", path, tv.name,
             tv.shape.size(), kMaxElements);
      elements *= ne;
    }
    tv.nbytes = dtype_row_bytes(tv.type, tv.shape[0]) * (elements / tv.shape[0]);
    uint64_t off = c.read<uint64_t>("offset");
    if (off % alignment_ != 0)
      fail("{}: tensor '{}': offset {} is not aligned to {}", path, tv.name, off, alignment_);
    offsets.push_back({off});
    if (!tensor_index_.emplace(tv.name, tensors_.size()).second)
      fail("{}: duplicate tensor name '{}'", path, tv.name);
    tensors_.push_back(std::move(tv));
  }

  c.set_context("");
  size_t data_start = (c.pos() + alignment_ - 1) / alignment_ * alignment_;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    auto& tv = tensors_[i];
    uint64_t off = offsets[i].offset;
    if (data_start > file_->size() || off > file_->size() - data_start ||
        tv.nbytes > file_->size() - data_start - off)
      fail(
          "{}: truncated GGUF file: tensor '{}' ({} bytes at data offset {}) extends past the "
          "end of the file ({} bytes)",
          path, tv.name, tv.nbytes, off, file_->size());
    tv.data = file_->data() + data_start + off;
  }
}

const GGUFValue* GGUFFile::find(const std::string& key) const {
  auto it = kv_.find(key);
  return it == kv_.end() ? nullptr : &it->second;
}

const TensorView* GGUFFile::find_tensor(const std::string& name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

namespace {
const GGUFValue& need_key(const GGUFFile& f, const std::string& key) {
  auto v = f.find(key);
  if (!v) fail("{}: missing metadata '{}'", f.path(), key);
  return *v;
}
[[noreturn]] void wrong_type(const GGUFFile& f, const std::string& key, const GGUFValue& v,
                             const char* want) {
  fail("{}: metadata '{}' has type {}, expected {}", f.path(), key, gguf_type_name(v.type), want);
}
}  // namespace

std::string GGUFFile::get_string(const std::string& key) const {
  const auto& v = need_key(*this, key);
  if (v.type != GGUFType::STRING) wrong_type(*this, key, v, "string");
  return std::get<std::string>(v.scalar);
}

int64_t GGUFFile::get_int(const std::string& key) const {
  const auto& v = need_key(*this, key);
  if (!is_integer(v.type)) wrong_type(*this, key, v, "integer");
  return as_int(v);
}

double GGUFFile::get_float(const std::string& key) const {
  const auto& v = need_key(*this, key);
  if (v.type == GGUFType::FLOAT32 || v.type == GGUFType::FLOAT64) return std::get<double>(v.scalar);
  if (is_integer(v.type)) return static_cast<double>(as_int(v));
  wrong_type(*this, key, v, "float");
}

bool GGUFFile::get_bool(const std::string& key) const {
  const auto& v = need_key(*this, key);
  if (v.type != GGUFType::BOOL) wrong_type(*this, key, v, "bool");
  return std::get<bool>(v.scalar);
}

std::vector<std::string> GGUFFile::get_string_array(const std::string& key) const {
  const auto& v = need_key(*this, key);
  if (!v.is_array() || v.elem_type != GGUFType::STRING) wrong_type(*this, key, v, "string array");
  std::vector<std::string> out;
  out.reserve(v.array.size());
  for (const auto& e : v.array) out.push_back(std::get<std::string>(e.scalar));
  return out;
}

std::vector<int64_t> GGUFFile::get_int_array(const std::string& key) const {
  const auto& v = need_key(*this, key);
  if (!v.is_array() || !is_integer(v.elem_type)) wrong_type(*this, key, v, "integer array");
  std::vector<int64_t> out;
  out.reserve(v.array.size());
  for (const auto& e : v.array) out.push_back(as_int(e));
  return out;
}

std::vector<double> GGUFFile::get_float_array(const std::string& key) const {
  const auto& v = need_key(*this, key);
  if (!v.is_array() || (v.elem_type != GGUFType::FLOAT32 && v.elem_type != GGUFType::FLOAT64))
    wrong_type(*this, key, v, "float array");
  std::vector<double> out;
  out.reserve(v.array.size());
  for (const auto& e : v.array) out.push_back(std::get<double>(e.scalar));
  return out;
}

std::optional<std::string> GGUFFile::opt_string(const std::string& key) const {
  return has(key) ? std::optional(get_string(key)) : std::nullopt;
}
std::optional<int64_t> GGUFFile::opt_int(const std::string& key) const {
  return has(key) ? std::optional(get_int(key)) : std::nullopt;
}
std::optional<double> GGUFFile::opt_float(const std::string& key) const {
  return has(key) ? std::optional(get_float(key)) : std::nullopt;
}
std::optional<bool> GGUFFile::opt_bool(const std::string& key) const {
  return has(key) ? std::optional(get_bool(key)) : std::nullopt;
}

std::string gguf_value_to_string(const GGUFValue& v, size_t max_items) {
  if (v.is_array()) {
    std::string s = fmt::format("[{} x {}]", v.array.size(), gguf_type_name(v.elem_type));
    if (v.elem_type != GGUFType::ARRAY) {
      s += " {";
      for (size_t i = 0; i < v.array.size() && i < max_items; ++i)
        s += (i ? ", " : "") + gguf_value_to_string(v.array[i], max_items);
      if (v.array.size() > max_items) s += ", ...";
      s += "}";
    }
    return s;
  }
  return std::visit(
      [](const auto& x) -> std::string {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::string>) {
          if (x.size() > 60) return fmt::format("\"{}...\" ({} chars)", x.substr(0, 60), x.size());
          return fmt::format("\"{}\"", x);
        } else {
          return fmt::format("{}", x);
        }
      },
      v.scalar);
}

}  // namespace tandem
