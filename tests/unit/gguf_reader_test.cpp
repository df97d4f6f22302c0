// GGUF reader on real vocab-only files from ../shared and on damaged copies.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "io/gguf_reader.h"
#include "support/paths.h"

using namespace tandem;
namespace fs = std::filesystem;

static std::string vocab(const std::string& name) {
  return test::shared_testdata_dir() + "/tokenizers/llamacpp-vocab/ggml-vocab-" + name + ".gguf";
}

TEST(GGUFReader, ReadsVocabOnlyFile) {
  GGUFFile f(vocab("llama-spm"));
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.get_string("tokenizer.ggml.model"), "llama");
  auto tokens = f.get_string_array("tokenizer.ggml.tokens");
  EXPECT_EQ(tokens.size(), 32000u);
  EXPECT_EQ(tokens[1], "<s>");
  EXPECT_EQ(f.get_float_array("tokenizer.ggml.scores").size(), 32000u);
  EXPECT_EQ(f.get_int("tokenizer.ggml.bos_token_id"), 1);
  EXPECT_TRUE(f.tensors().empty());
}

TEST(GGUFReader, WrongTypeNamesKey) {
  GGUFFile f(vocab("llama-spm"));
  try {
    f.get_int("general.architecture");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("general.architecture"), std::string::npos) << e.what();
  }
  EXPECT_THROW(f.get_string("no.such.key"), Error);
}

TEST(GGUFReader, TruncatedFileIsAClearError) {
  auto src = vocab("gpt-2");
  auto dir = test::temp_dir("gguf");
  std::ifstream in(src, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // Cut at many points: each must raise tandem::Error, never crash.
  for (size_t cut : {size_t{0}, size_t{3}, size_t{8}, size_t{23}, size_t{100}, bytes.size() / 2,
                     bytes.size() - 1}) {
    auto p = dir + "/cut.gguf";
    std::ofstream(p, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(cut));
    try {
      GGUFFile f(p);
      FAIL() << "no error at cut " << cut;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("cut.gguf"), std::string::npos) << e.what();
    }
  }
}

TEST(GGUFReader, BadMagicAndVersion) {
  auto dir = test::temp_dir("gguf");
  auto p = dir + "/bad.gguf";
  std::ofstream(p, std::ios::binary) << "NOTAGGUFFILE-------------------";
  EXPECT_THROW(GGUFFile f(p), Error);
  std::string v9("GGUF\x09\0\0\0", 8);
  v9 += std::string(16, '\0');
  std::ofstream(p, std::ios::binary).write(v9.data(), static_cast<std::streamsize>(v9.size()));
  try {
    GGUFFile f(p);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("version 9"), std::string::npos) << e.what();
  }
  EXPECT_THROW(GGUFFile f(dir + "/missing.gguf"), Error);
}
