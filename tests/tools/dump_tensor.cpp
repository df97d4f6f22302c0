// dump_tensor [--rows N] [--quantize TYPE] MODEL.gguf OUT_DIR [NAME...]
//
// Writes each named tensor (default: all) of a GGUF file, dequantized with
// tandem's dequantize_row, as raw little-endian float32 to OUT_DIR/NAME.f32.
//   --rows N         only the first N rows of each tensor (all rows by default)
//   --quantize TYPE  instead re-quantize those floats with quantize_row to TYPE
//                    (F16, Q8_0, ...) and write the raw blocks to OUT_DIR/NAME.TYPE
// Used by tests/python to compare tandem's block code with gguf-py's numpy code.
#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"
#include "io/gguf_reader.h"
#include "quant/quants.h"

namespace {

using namespace tandem;

static_assert(std::endian::native == std::endian::little, "output is raw little-endian");

struct Options {
  std::string model, out_dir;
  std::vector<std::string> names;
  int64_t max_rows = -1;
  std::optional<DType> quantize_to;
};

DType parse_type(const std::string& name) {
  for (uint32_t id = 0; id < 64; ++id)
    if (auto info = dtype_info(id); info && info->name == name) return info->type;
  fail("--quantize: unknown type '{}'", name);
}

Options parse_args(int argc, char** argv) {
  Options o;
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--rows" || a == "--quantize") {
      check(i + 1 < argc, "{} needs a value", a);
      std::string v = argv[++i];
      if (a == "--rows") {
        size_t used = 0;
        try {
          o.max_rows = std::stoll(v, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        check(used == v.size() && o.max_rows >= 0, "--rows: invalid row count '{}'", v);
      } else {
        o.quantize_to = parse_type(v);
      }
    } else {
      positional.push_back(a);
    }
  }
  check(positional.size() >= 2,
        "usage: dump_tensor [--rows N] [--quantize TYPE] MODEL.gguf OUT_DIR [NAME...]");
  o.model = positional[0];
  o.out_dir = positional[1];
  o.names.assign(positional.begin() + 2, positional.end());
  return o;
}

// Tensor names may contain '/', which must not escape OUT_DIR.
std::string file_name(const std::string& tensor, const std::string& ext) {
  std::string s = tensor;
  for (char& c : s)
    if (c == '/' || c == '\\') c = '_';
  return s + "." + ext;
}

void dump(const TensorView& t, const Options& o) {
  const int64_t row_len = t.ne(0);
  const int64_t rows_total = t.numel() / row_len;
  const int64_t rows = o.max_rows < 0 ? rows_total : std::min(o.max_rows, rows_total);
  std::string ext = o.quantize_to ? std::string(dtype_name(*o.quantize_to)) : "f32";
  std::string path = o.out_dir + "/" + file_name(t.name, ext);
  std::ofstream out(path, std::ios::binary);
  check(out.good(), "cannot write {}", path);

  std::vector<float> values(static_cast<size_t>(row_len));
  std::vector<uint8_t> encoded(o.quantize_to ? dtype_row_bytes(*o.quantize_to, row_len) : 0);
  for (int64_t r = 0; r < rows; ++r) {
    dequantize_row(t.type, t.row(r), values.data(), row_len);
    if (o.quantize_to) {
      quantize_row(*o.quantize_to, values.data(), encoded.data(), row_len);
      out.write(reinterpret_cast<const char*>(encoded.data()),
                static_cast<std::streamsize>(encoded.size()));
    } else {
      out.write(reinterpret_cast<const char*>(values.data()),
                static_cast<std::streamsize>(values.size() * sizeof(float)));
    }
  }
  check(out.good(), "error writing {}", path);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    Options o = parse_args(argc, argv);
    GGUFFile file(o.model);
    if (o.names.empty())
      for (const auto& t : file.tensors()) o.names.push_back(t.name);
    for (const auto& name : o.names) {
      const TensorView* t = file.find_tensor(name);
      check(t != nullptr, "{}: no tensor named '{}'", o.model, name);
      dump(*t, o);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dump_tensor: %s\n", e.what());
    return 1;
  }
  return 0;
}
