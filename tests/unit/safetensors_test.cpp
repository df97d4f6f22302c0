// safetensors: writer/reader round trip (shapes reversed into GGML order, header
// padding, metadata), tensors of unsupported dtypes set aside, and a table of
// damaged files that must each give a tandem::Error naming the file.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/safetensors.h"
#include "quant/quants.h"
#include "support/paths.h"
#include "support/synthetic_model.h"
#include "support/test_util.h"

using namespace tandem;

namespace {

std::vector<float> floats_of(const TensorView& t) {
  std::vector<float> v(t.numel());
  for (size_t i = 0; i < v.size(); ++i) {
    uint16_t h;
    switch (t.type) {
      case DType::F32:
        std::memcpy(&v[i], t.data + 4 * i, 4);
        break;
      case DType::F16:
        std::memcpy(&h, t.data + 2 * i, 2);
        v[i] = f16_to_f32(h);
        break;
      default:
        std::memcpy(&h, t.data + 2 * i, 2);
        v[i] = bf16_to_f32(h);
        break;
    }
  }
  return v;
}

}  // namespace

TEST(Safetensors, RoundTrip) {
  SafetensorsWriter w;
  // Values exactly representable in F16 and BF16, so the round trip is exact.
  w.add_f32("matrix", DType::F32, {3, 2}, {1, 2, 3, 4, 5, 6});
  w.add_f32("half", DType::F16, {4}, {0.5f, -2.0f, 1024.0f, 0.0f});
  w.add_f32("brain", DType::BF16, {2, 1, 2}, {1.0f, -0.25f, 3.0f, 65536.0f});
  w.add("raw", DType::F32, {1}, {0x00, 0x00, 0x80, 0x3F});  // 1.0f
  w.add("empty", DType::F32, {0, 3}, {});
  w.set_metadata("format", "pt");
  auto path = test::temp_dir("st") + "/m.safetensors";
  w.write(path);

  // Header: padded to 8 bytes, shapes outermost first.
  std::string bytes = test::read_file(path);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ(n % 8, 0u);
  auto header = nlohmann::json::parse(bytes.substr(8, n));
  EXPECT_EQ(header["matrix"]["shape"], nlohmann::json({2, 3}));
  EXPECT_EQ(header["brain"]["dtype"], "BF16");
  EXPECT_EQ(header["__metadata__"]["format"], "pt");

  SafetensorsFile f(path);
  EXPECT_EQ(f.tensors().size(), 5u);
  EXPECT_EQ(f.metadata().at("format"), "pt");
  const TensorView* m = f.find("matrix");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->type, DType::F32);
  EXPECT_EQ(m->shape, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(m->nbytes, 24u);
  EXPECT_EQ(floats_of(*m), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(m->data) % 8, 0u);  // data section aligned
  EXPECT_EQ(f.find("half")->type, DType::F16);
  EXPECT_EQ(floats_of(*f.find("half")), (std::vector<float>{0.5f, -2.0f, 1024.0f, 0.0f}));
  EXPECT_EQ(f.find("brain")->shape, (std::vector<int64_t>{2, 1, 2}));
  EXPECT_EQ(floats_of(*f.find("brain")), (std::vector<float>{1.0f, -0.25f, 3.0f, 65536.0f}));
  EXPECT_EQ(floats_of(*f.find("raw")), std::vector<float>{1.0f});
  EXPECT_EQ(f.find("empty")->numel(), 0);
  EXPECT_EQ(f.find("nothing"), nullptr);
}

TEST(Safetensors, WriterRejectsOtherTypesAndBadSizes) {
  SafetensorsWriter w;
  EXPECT_THROW(w.add_f32("q", DType::Q4_0, {32}, std::vector<float>(32)), Error);
  EXPECT_THROW(w.add("short", DType::F32, {2}, std::vector<uint8_t>(7)), Error);
  w.add("a", DType::F16, {1}, std::vector<uint8_t>(2));
  EXPECT_THROW(w.add("a", DType::F16, {1}, std::vector<uint8_t>(2)), Error);
  EXPECT_THROW(w.add("__metadata__", DType::F16, {1}, std::vector<uint8_t>(2)), Error);
  try {
    w.write(test::temp_dir("st") + "/missing/dir/x.safetensors");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("x.safetensors"), std::string::npos) << e.what();
  }
}

TEST(Safetensors, UnsupportedDtypesAreSetAside) {
  std::string header = R"({"ids":{"dtype":"I64","shape":[2],"data_offsets":[0,16]},)"
                       R"("w":{"dtype":"F32","shape":[2],"data_offsets":[16,24]},)"
                       R"("scale":{"dtype":"F8_E4M3","shape":[4],"data_offsets":[24,28]}})";
  auto path = test::temp_dir("st") + "/mixed.safetensors";
  test::write_file(path, test::raw_safetensors(header, std::string(28, '\0')));
  SafetensorsFile f(path);
  ASSERT_EQ(f.tensors().size(), 1u);
  EXPECT_NE(f.find("w"), nullptr);
  EXPECT_EQ(f.find("ids"), nullptr);
  EXPECT_EQ(f.unsupported_dtype("ids"), "I64");
  EXPECT_EQ(f.unsupported_dtype("scale"), "F8_E4M3");
  EXPECT_EQ(f.unsupported_dtype("w"), std::nullopt);
  EXPECT_EQ(f.unsupported().size(), 2u);
}

TEST(Safetensors, DamagedFilesAreClearErrors) {
  auto dir = test::temp_dir("st");
  // A valid file to truncate.
  SafetensorsWriter w;
  w.add_f32("w", DType::F32, {4, 4}, std::vector<float>(16, 1.0f));
  w.write(dir + "/good.safetensors");
  const std::string good = test::read_file(dir + "/good.safetensors");

  auto st = [](const std::string& header, size_t data_bytes) {
    return test::raw_safetensors(header, std::string(data_bytes, '\0'));
  };
  std::string huge_len(8, '\xFF');
  struct Case {
    const char* name;
    std::string bytes;
    const char* expect;  // a word the message must contain
  };
  const Case cases[] = {
      {"empty", "", "truncated"},
      {"short_length", std::string("\x10\0\0\0", 4), "truncated"},
      {"header_beyond_file", st("{}", 0).replace(0, 1, "\x40"), "exceeds"},
      {"absurd_header_length", huge_len + "{}", "exceeds"},
      {"invalid_json", st("{\"w\": {\"dtype\": ", 0), "JSON"},
      {"not_an_object", st("[1, 2]", 0), "not a JSON object"},
      {"missing_dtype", st(R"({"w":{"shape":[2],"data_offsets":[0,8]}})", 8), "dtype"},
      {"missing_shape", st(R"({"w":{"dtype":"F32","data_offsets":[0,8]}})", 8), "shape"},
      {"negative_dim", st(R"({"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8),
       "dimension"},
      {"missing_offsets", st(R"({"w":{"dtype":"F32","shape":[2]}})", 8), "data_offsets"},
      {"offsets_out_of_range", st(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 8),
       "extend past"},
      {"reversed_offsets", st(R"({"w":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", 8),
       "reversed"},
      {"wrong_size_for_shape", st(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8),
       "needs 12"},
      {"wrong_size_unsupported_dtype",
       st(R"({"w":{"dtype":"F64","shape":[2],"data_offsets":[0,8]}})", 8), "needs 16"},
      {"overlap",
       st(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
          R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
          12),
       "overlap"},
      {"bad_metadata", st(R"({"__metadata__":{"format":1}})", 0), "__metadata__"},
      {"truncated_data", good.substr(0, good.size() - 4), "truncated"},
  };
  for (const auto& c : cases) {
    const std::string path = dir + "/" + c.name + ".safetensors";
    test::write_file(path, c.bytes);
    try {
      SafetensorsFile f(path);
      ADD_FAILURE() << c.name << ": no error";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(std::string(c.name) + ".safetensors"), std::string::npos)
          << c.name << ": " << msg;
      EXPECT_NE(msg.find(c.expect), std::string::npos) << c.name << ": " << msg;
    }
  }
}
