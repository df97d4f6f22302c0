#include "io/safetensors.h"

#include <algorithm>
#include <cstring>
#include <tuple>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/gguf_writer.h"
#include "io/json_text.h"
#include "quant/quants.h"

namespace tandem {
namespace {

using json = nlohmann::json;

// The Hugging Face implementation refuses headers over 100 MB; anything larger is
// a corrupt length field, not a real header.
constexpr uint64_t kMaxHeaderBytes = uint64_t{100} << 20;
constexpr size_t kMaxDims = 8;
constexpr uint64_t kMaxDim = uint64_t{1} << 40;
constexpr uint64_t kMaxElements = uint64_t{1} << 48;

// Element sizes of the dtypes the format defines (0: sub-byte or unknown,
// whose sizes are not checked).
size_t dtype_bytes(const std::string& dtype) {
  static const std::pair<const char*, size_t> kSizes[] = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"F8_E8M0", 1},
      {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},     {"U32", 4},
      {"F32", 4},  {"I64", 8}, {"U64", 8}, {"F64", 8},
  };
  for (const auto& [name, size] : kSizes)
    if (dtype == name) return size;
  return 0;
}

std::optional<DType> supported_dtype(const std::string& dtype) {
  if (dtype == "F32") return DType::F32;
  if (dtype == "F16") return DType::F16;
  if (dtype == "BF16") return DType::BF16;
  return std::nullopt;
}

uint64_t read_u64_le(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

bool is_unsigned_int(const json& j) {
  return j.is_number_unsigned() || (j.is_number_integer() && j.get<int64_t>() >= 0);
}

struct Extent {
  uint64_t begin, end;
  std::string name;
};

}  // namespace

const char* safetensors_dtype_name(DType t) {
  switch (t) {
    case DType::F32:
      return "F32";
    case DType::F16:
      return "F16";
    case DType::BF16:
      return "BF16";
    default:
      fail("safetensors stores only F32, F16 and BF16 tensors, not {}", dtype_name(t));
  }
}

SafetensorsFile::SafetensorsFile(const std::string& path)
    : file_(std::make_shared<MappedFile>(path)) {
  const uint8_t* base = file_->data();
  const uint64_t size = file_->size();
  if (size < 8)
    fail("{}: truncated safetensors file: {} bytes, too short for the header length", path, size);
  const uint64_t header_len = read_u64_le(base);
  if (header_len > size - 8)
    fail("{}: truncated safetensors file: header length {} exceeds the {} bytes after it", path,
         header_len, size - 8);
  if (header_len > kMaxHeaderBytes)
    fail("{}: safetensors header length {} is implausibly large (limit {})", path, header_len,
         kMaxHeaderBytes);
  const uint8_t* header = base + 8;
  const uint8_t* data = header + header_len;
  const uint64_t data_size = size - 8 - header_len;

  std::string error;
  auto parsed =
      try_parse_json(std::string_view(reinterpret_cast<const char*>(header), header_len), &error);
  if (!parsed) fail("{}: invalid safetensors header JSON: {}", path, error);
  const json& j = *parsed;
  if (!j.is_object()) fail("{}: safetensors header is not a JSON object", path);

  std::vector<Extent> extents;
  for (const auto& item : j.items()) {
    // Not a structured binding: the lambda below captures the name, which
    // clang before 16 does not allow for bindings.
    const std::string& name = item.key();
    const json& entry = item.value();
    if (name == "__metadata__") {
      if (!entry.is_object()) fail("{}: safetensors __metadata__ is not an object", path);
      for (const auto& [k, v] : entry.items()) {
        if (!v.is_string()) fail("{}: safetensors __metadata__ '{}' is not a string", path, k);
        metadata_[k] = v.get<std::string>();
      }
      continue;
    }
    auto bad = [&](const std::string& why) {
      fail("{}: safetensors tensor '{}': {}", path, name, why);
    };
    if (!entry.is_object()) bad("entry is not an object");
    auto dt = entry.find("dtype");
    if (dt == entry.end() || !dt->is_string()) bad("missing or non-string 'dtype'");
    const std::string dtype = dt->get<std::string>();
    auto sh = entry.find("shape");
    if (sh == entry.end() || !sh->is_array()) bad("missing or non-array 'shape'");
    auto offs = entry.find("data_offsets");
    if (offs == entry.end() || !offs->is_array() || offs->size() != 2 ||
        !is_unsigned_int((*offs)[0]) || !is_unsigned_int((*offs)[1]))
      bad("'data_offsets' must be two non-negative integers");

    if (sh->size() > kMaxDims)
      bad(fmt::format("shape has {} dimensions (at most {})", sh->size(), kMaxDims));
    // safetensors lists dimensions outermost first; GGML order is the reverse.
    std::vector<int64_t> shape;
    uint64_t numel = 1;
    for (const auto& d : *sh) {
      if (!is_unsigned_int(d)) bad(fmt::format("invalid dimension {}", json_excerpt(d)));
      uint64_t n = d.get<uint64_t>();
      if (n > kMaxDim) bad(fmt::format("dimension {} is too large", n));
      // Checked before multiplying: a product that wrapped around could match
      // a small data_offsets range below.
      if (n != 0 && numel > kMaxElements / n) bad("too many elements");
      numel *= n;
      shape.insert(shape.begin(), static_cast<int64_t>(n));
    }
    const uint64_t begin = (*offs)[0].get<uint64_t>(), end = (*offs)[1].get<uint64_t>();
    if (begin > end) bad(fmt::format("data_offsets [{}, {}] are reversed", begin, end));
    if (end > data_size)
      bad(
          fmt::format("data_offsets [{}, {}] extend past the {} bytes of tensor data (file "
                      "truncated?)",
                      begin, end, data_size));
    if (size_t esize = dtype_bytes(dtype); esize != 0 && end - begin != numel * esize)
      bad(fmt::format("data_offsets [{}, {}] hold {} bytes, but shape {} of {} needs {}", begin,
                      end, end - begin, json_excerpt(*sh), dtype, numel * esize));
    extents.push_back({begin, end, name});

    auto type = supported_dtype(dtype);
    if (!type) {
      unsupported_[name] = dtype;
      continue;
    }
    TensorView tv;
    tv.name = name;
    tv.type = *type;
    tv.shape = std::move(shape);
    tv.data = data + begin;
    tv.nbytes = end - begin;
    index_[name] = tensors_.size();
    tensors_.push_back(std::move(tv));
  }

  // Two tensors sharing bytes mean a corrupt header.
  std::sort(extents.begin(), extents.end(), [](const Extent& a, const Extent& b) {
    return std::tie(a.begin, a.end) < std::tie(b.begin, b.end);
  });
  for (size_t i = 1; i < extents.size(); ++i)
    if (extents[i].begin < extents[i - 1].end && extents[i].begin < extents[i].end)
      fail("{}: safetensors tensors '{}' and '{}' overlap", path, extents[i - 1].name,
           extents[i].name);
}

const TensorView* SafetensorsFile::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

std::optional<std::string> SafetensorsFile::unsupported_dtype(const std::string& name) const {
  auto it = unsupported_.find(name);
  if (it == unsupported_.end()) return std::nullopt;
  return it->second;
}

void SafetensorsWriter::add(const std::string& name, DType type, std::vector<int64_t> shape,
                            std::vector<uint8_t> data) {
  check(!name.empty() && name != "__metadata__", "safetensors writer: invalid tensor name '{}'",
        name);
  for (const auto& t : tensors_)
    check(t.name != name, "safetensors writer: duplicate tensor '{}'", name);
  const char* dtype = safetensors_dtype_name(type);  // throws for other types
  size_t numel = 1;
  for (int64_t d : shape) {
    check(d >= 0, "safetensors writer: tensor '{}' has dimension {}", name, d);
    numel *= static_cast<size_t>(d);
  }
  size_t expect = numel * dtype_bytes(dtype);
  check(data.size() == expect, "safetensors writer: tensor '{}' ({}) has {} bytes, expected {}",
        name, dtype, data.size(), expect);
  tensors_.push_back({name, type, std::move(shape), std::move(data)});
}

void SafetensorsWriter::add_f32(const std::string& name, DType type, std::vector<int64_t> shape,
                                const std::vector<float>& values) {
  safetensors_dtype_name(type);  // rejects other types before converting
  std::vector<uint8_t> data;
  if (type == DType::F32) {
    data.resize(values.size() * 4);
    std::memcpy(data.data(), values.data(), data.size());
  } else {
    data.resize(values.size() * 2);
    for (size_t i = 0; i < values.size(); ++i) {
      uint16_t h = type == DType::F16 ? f32_to_f16(values[i]) : f32_to_bf16(values[i]);
      std::memcpy(data.data() + 2 * i, &h, 2);
    }
  }
  add(name, type, std::move(shape), std::move(data));
}

void SafetensorsWriter::set_metadata(const std::string& key, const std::string& value) {
  metadata_[key] = value;
}

void SafetensorsWriter::write(const std::string& path) const {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata_.empty()) header["__metadata__"] = metadata_;
  uint64_t offset = 0;
  for (const auto& t : tensors_) {
    std::vector<int64_t> rows_first(t.shape.rbegin(), t.shape.rend());
    header[t.name] = {{"dtype", safetensors_dtype_name(t.type)},
                      {"shape", rows_first},
                      {"data_offsets", {offset, offset + t.data.size()}}};
    offset += t.data.size();
  }
  std::string text = header.dump();
  // The format asks for the data section to start 8-byte aligned; JSON allows
  // trailing spaces.
  text.append((8 - text.size() % 8) % 8, ' ');
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(uint64_t(text.size()) >> (8 * i));
  write_file_atomically(path, [&](const WriteBytes& out) {
    out(len, 8);
    out(text.data(), text.size());
    for (const auto& t : tensors_) out(t.data.data(), t.data.size());
  });
}

}  // namespace tandem
