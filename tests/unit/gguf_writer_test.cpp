// GGUFWriter: every metadata value type and several tensors round-trip through
// GGUFFile; alignment and padding follow the format; misuse and I/O failures are
// tandem::Error naming the key or path.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>

#include "core/error.h"
#include "io/gguf_reader.h"
#include "io/gguf_writer.h"
#include "quant/quants.h"
#include "support/paths.h"
#include "support/test_util.h"

using namespace tandem;
namespace fs = std::filesystem;

namespace {

std::vector<uint8_t> pattern_bytes(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 7);
  return v;
}

}  // namespace

TEST(GGUFWriter, EveryValueTypeRoundTrips) {
  GGUFWriter w;
  w.set("u8", gguf_int(GGUFType::UINT8, 200));
  w.set("i8", gguf_int(GGUFType::INT8, -100));
  w.set("u16", gguf_int(GGUFType::UINT16, 60000));
  w.set("i16", gguf_int(GGUFType::INT16, -30000));
  w.set_u32("u32", 4000000000u);
  w.set_i32("i32", -2000000000);
  GGUFValue big;
  big.type = GGUFType::UINT64;
  big.scalar = uint64_t{0x8000000000000005ull};
  w.set("u64", big);
  w.set("i64", gguf_int(GGUFType::INT64, -(int64_t{1} << 62)));
  w.set_f32("f32", 1.5f);
  w.set("f64", gguf_float(GGUFType::FLOAT64, 3.141592653589793));
  w.set_bool("yes", true);
  w.set_bool("no", false);
  w.set_string("str", "h\xC3\xA9llo");
  w.set_string("empty", "");
  w.set_string_array("strs", {"a", "", "ccc"});
  w.set_i32_array("ints", {1, -2, 3});
  w.set_f32_array("floats", {0.25f, -8.0f});
  w.set("bytes", gguf_array(GGUFType::UINT8,
                            {gguf_int(GGUFType::UINT8, 1), gguf_int(GGUFType::UINT8, 255)}));
  w.set("none", gguf_array(GGUFType::INT64, {}));
  w.set("nested", gguf_array(GGUFType::ARRAY,
                             {gguf_array(GGUFType::INT16, {gguf_int(GGUFType::INT16, 7)}),
                              gguf_array(GGUFType::STRING, {gguf_string("x"), gguf_string("y")})}));
  w.set_string("replaced", "old");
  w.set_string("replaced", "new");
  auto path = test::temp_dir("gw") + "/kv.gguf";
  w.write(path);

  GGUFFile f(path);
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.metadata().size(), 21u);  // "replaced" once, no general.alignment
  EXPECT_FALSE(f.has("general.alignment"));
  EXPECT_EQ(f.find("u8")->type, GGUFType::UINT8);
  EXPECT_EQ(f.get_int("u8"), 200);
  EXPECT_EQ(f.find("i8")->type, GGUFType::INT8);
  EXPECT_EQ(f.get_int("i8"), -100);
  EXPECT_EQ(f.find("u16")->type, GGUFType::UINT16);
  EXPECT_EQ(f.get_int("u16"), 60000);
  EXPECT_EQ(f.get_int("i16"), -30000);
  EXPECT_EQ(f.find("u32")->type, GGUFType::UINT32);
  EXPECT_EQ(f.get_int("u32"), 4000000000);
  EXPECT_EQ(f.find("i32")->type, GGUFType::INT32);
  EXPECT_EQ(f.get_int("i32"), -2000000000);
  EXPECT_EQ(std::get<uint64_t>(f.find("u64")->scalar), 0x8000000000000005ull);
  EXPECT_EQ(f.get_int("i64"), -(int64_t{1} << 62));
  EXPECT_EQ(f.find("f32")->type, GGUFType::FLOAT32);
  EXPECT_EQ(f.get_float("f32"), 1.5);
  EXPECT_EQ(f.find("f64")->type, GGUFType::FLOAT64);
  EXPECT_EQ(f.get_float("f64"), 3.141592653589793);  // float64 is stored exactly
  EXPECT_TRUE(f.get_bool("yes"));
  EXPECT_FALSE(f.get_bool("no"));
  EXPECT_EQ(f.get_string("str"), "h\xC3\xA9llo");
  EXPECT_EQ(f.get_string("empty"), "");
  EXPECT_EQ(f.get_string_array("strs"), (std::vector<std::string>{"a", "", "ccc"}));
  EXPECT_EQ(f.find("ints")->elem_type, GGUFType::INT32);
  EXPECT_EQ(f.get_int_array("ints"), (std::vector<int64_t>{1, -2, 3}));
  EXPECT_EQ(f.get_float_array("floats"), (std::vector<double>{0.25, -8.0}));
  EXPECT_EQ(f.find("bytes")->elem_type, GGUFType::UINT8);
  EXPECT_EQ(f.get_int_array("bytes"), (std::vector<int64_t>{1, 255}));
  EXPECT_EQ(f.find("none")->elem_type, GGUFType::INT64);
  EXPECT_TRUE(f.find("none")->array.empty());
  const GGUFValue* nested = f.find("nested");
  ASSERT_EQ(nested->elem_type, GGUFType::ARRAY);
  ASSERT_EQ(nested->array.size(), 2u);
  EXPECT_EQ(nested->array[0].elem_type, GGUFType::INT16);
  EXPECT_EQ(std::get<int64_t>(nested->array[0].array[0].scalar), 7);
  EXPECT_EQ(std::get<std::string>(nested->array[1].array[1].scalar), "y");
  EXPECT_EQ(f.get_string("replaced"), "new");
}

TEST(GGUFWriter, TensorsRoundTripWithAlignment) {
  for (size_t alignment : {size_t{32}, size_t{64}, size_t{256}}) {
    SCOPED_TRACE(alignment);
    struct Case {
      std::string name;
      DType type;
      std::vector<int64_t> shape;
      std::vector<uint8_t> data;
    };
    std::vector<Case> cases = {
        {"vec", DType::F32, {3}, pattern_bytes(12, 1)},
        {"half", DType::F16, {5, 3}, pattern_bytes(30, 2)},
        {"brain", DType::BF16, {2, 3, 2}, pattern_bytes(24, 3)},
        {"q8", DType::Q8_0, {64, 3}, pattern_bytes(2 * 34 * 3, 4)},
        {"q4k", DType::Q4_K, {256, 2}, pattern_bytes(144 * 2, 5)},
        {"four_d", DType::F32, {1, 2, 3, 4}, pattern_bytes(96, 6)},
    };
    GGUFWriter w(alignment);
    w.set_string("general.architecture", "test");
    for (const auto& c : cases) w.add_tensor(c.name, c.type, c.shape, c.data);
    auto path = test::temp_dir("gw") + "/t.gguf";
    w.write(path);

    GGUFFile f(path);
    EXPECT_EQ(f.alignment(), alignment);
    EXPECT_EQ(f.has("general.alignment"), alignment != 32);
    if (alignment != 32) {
      EXPECT_EQ(f.get_int("general.alignment"), int64_t(alignment));
    }
    ASSERT_EQ(f.tensors().size(), cases.size());
    for (size_t i = 0; i < cases.size(); ++i) {
      const auto& c = cases[i];
      const TensorView* t = f.find_tensor(c.name);
      ASSERT_NE(t, nullptr) << c.name;
      EXPECT_EQ(t->type, c.type) << c.name;
      EXPECT_EQ(t->shape, c.shape) << c.name;
      ASSERT_EQ(t->nbytes, c.data.size()) << c.name;
      EXPECT_EQ(0, std::memcmp(t->data, c.data.data(), c.data.size())) << c.name;
      // The mapping starts on a page boundary, so file offsets and addresses
      // share their alignment.
      EXPECT_EQ(reinterpret_cast<uintptr_t>(t->data) % alignment, 0u) << c.name;
      if (i + 1 < cases.size()) {
        // Padding between tensors: less than one alignment unit, all zeros.
        const uint8_t* end = t->data + t->nbytes;
        const uint8_t* next = f.find_tensor(cases[i + 1].name)->data;
        ASSERT_GE(next, end);
        EXPECT_LT(size_t(next - end), alignment);
        for (const uint8_t* p = end; p < next; ++p) ASSERT_EQ(*p, 0) << "padding after " << c.name;
      }
    }
  }
}

TEST(GGUFWriter, AddTensorF32EncodesValues) {
  std::vector<float> v(64);
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(0.3f * i) * 2.0f;
  GGUFWriter w;
  w.add_tensor_f32("f32", DType::F32, {32, 2}, v);
  w.add_tensor_f32("q8", DType::Q8_0, {32, 2}, v);
  w.add_tensor_f32("f16", DType::F16, {64}, v);
  auto path = test::temp_dir("gw") + "/f.gguf";
  w.write(path);
  GGUFFile f(path);
  EXPECT_EQ(0, std::memcmp(f.find_tensor("f32")->data, v.data(), v.size() * 4));
  std::vector<float> back(64);
  dequantize_row(DType::Q8_0, f.find_tensor("q8")->data, back.data(), 64);
  // Q8_0 rounds to steps d = amax/127 per 32-value block (amax <= 2): half a step,
  // 1/127, plus the f16 rounding of d times |q| <= 127, amax * 2^-11 <= 1/1024.
  for (size_t i = 0; i < v.size(); ++i) EXPECT_NEAR(back[i], v[i], 1.0f / 127 + 1.0f / 1024) << i;
  dequantize_row(DType::F16, f.find_tensor("f16")->data, back.data(), 64);
  // F16 keeps 11 significant bits: relative error <= 2^-11.
  for (size_t i = 0; i < v.size(); ++i)
    EXPECT_NEAR(back[i], v[i], std::fabs(v[i]) * (1.0f / 2048) + 1e-7f) << i;
}

TEST(GGUFWriter, RejectsMisuse) {
  GGUFWriter w;
  auto msg = test::error_of([&] { w.set("small", gguf_int(GGUFType::UINT8, 256)); });
  EXPECT_NE(msg.find("'small'"), std::string::npos) << msg;
  msg = test::error_of([&] { w.set("neg", gguf_int(GGUFType::UINT32, -1)); });
  EXPECT_NE(msg.find("'neg'"), std::string::npos) << msg;
  msg = test::error_of([&] {
    w.set("mixed", gguf_array(GGUFType::INT32, {gguf_int(GGUFType::INT32, 1), gguf_string("x")}));
  });
  EXPECT_NE(msg.find("'mixed'"), std::string::npos) << msg;
  EXPECT_THROW(gguf_int(GGUFType::STRING, 1), Error);
  EXPECT_THROW(GGUFWriter(48), Error);  // not a power of two
  EXPECT_THROW(GGUFWriter(0), Error);

  msg = test::error_of([&] { w.add_tensor("t", DType::F32, {4}, std::vector<uint8_t>(15)); });
  EXPECT_NE(msg.find("'t'"), std::string::npos) << msg;
  EXPECT_THROW(w.add_tensor("q", DType::Q4_0, {16}, std::vector<uint8_t>(9)), Error);
  EXPECT_THROW(w.add_tensor("z", DType::F32, {0}, {}), Error);
  EXPECT_THROW(w.add_tensor("five", DType::F32, {1, 1, 1, 1, 1}, std::vector<uint8_t>(4)), Error);
  w.add_tensor("ok", DType::F32, {1}, std::vector<uint8_t>(4));
  msg = test::error_of([&] { w.add_tensor("ok", DType::F32, {1}, std::vector<uint8_t>(4)); });
  EXPECT_NE(msg.find("duplicate"), std::string::npos) << msg;
  EXPECT_THROW(w.add_tensor_f32("few", DType::F32, {4}, {1.0f, 2.0f}), Error);

  GGUFWriter a(64);
  a.set_u32("general.alignment", 128);
  auto dir = test::temp_dir("gw");
  msg = test::error_of([&] { a.write(dir + "/conflict.gguf"); });
  EXPECT_NE(msg.find("general.alignment"), std::string::npos) << msg;
  a.set_string("general.alignment", "64");
  msg = test::error_of([&] { a.write(dir + "/conflict.gguf"); });
  EXPECT_NE(msg.find("general.alignment"), std::string::npos) << msg;
  EXPECT_FALSE(fs::exists(dir + "/conflict.gguf"));
}

TEST(GGUFWriter, IOErrorsNameThePathAndLeaveNothingBehind) {
  auto dir = test::temp_dir("gw");
  GGUFWriter w;
  w.set_string("general.architecture", "test");
  auto missing = dir + "/no/such/dir/m.gguf";
  auto msg = test::error_of([&] { w.write(missing); });
  EXPECT_NE(msg.find(missing), std::string::npos) << msg;

  // A directory in the way: the rename fails and the temporary file is removed.
  fs::create_directories(dir + "/taken.gguf/sub");
  msg = test::error_of([&] { w.write(dir + "/taken.gguf"); });
  EXPECT_NE(msg.find("taken.gguf"), std::string::npos) << msg;
  for (const auto& e : fs::directory_iterator(dir))
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path();

  // Writing over an existing file replaces it whole.
  auto path = dir + "/m.gguf";
  std::ofstream(path) << std::string(10000, 'x');
  w.write(path);
  GGUFFile f(path);
  EXPECT_EQ(f.get_string("general.architecture"), "test");
  EXPECT_LT(fs::file_size(path), 10000u);
}
