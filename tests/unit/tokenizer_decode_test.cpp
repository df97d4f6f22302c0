// Decoding: decode(encode(x)) == x on every tokenizer kind, StreamDecoder's
// pieces are valid UTF-8 and add up to decode(), special tokens, NFC.
#include <gtest/gtest.h>

#include <chrono>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "core/error.h"
#include "io/gguf_reader.h"
#include "support/paths.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode_nfc.h"
#include "tokenizer/utf8.h"

using namespace tandem;

namespace {

std::string vocab_file(const std::string& name) {
  return test::shared_testdata_dir() + "/tokenizers/llamacpp-vocab/ggml-vocab-" + name + ".gguf";
}

// Tokenizers are loaded once for all tests (tokenizer.json takes a moment).
const Tokenizer& tokenizer(const std::string& name) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  auto& t = cache[name];
  if (!t) {
    if (name == "llama3") {
      t = Tokenizer::from_hf_json(test::shared_testdata_dir() +
                                  "/tokenizers/llama3/tokenizer.json");
    } else if (name == "qwen2" || name == "smollm") {
      GGUFFile f(test::cached_model(name == "qwen2" ? "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
                                                    : "smollm2-135m-instruct-q4_1.gguf"));
      t = Tokenizer::from_gguf(f);
    } else {
      GGUFFile f(vocab_file(name));
      t = Tokenizer::from_gguf(f);
    }
  }
  return *t;
}

constexpr char kControlChars[] = "control\x01\x02\x7f chars, a\0b nul";

const std::vector<std::string>& sample_texts() {
  static const std::vector<std::string> texts = {
      "Hello world",
      " leading space and trailing space ",
      "multiple   spaces\tand\ttabs",
      "Ünïcödé façade naïve café Ελληνικά Привет",
      "你好，世界 日本語のテキスト 한국어 문장",
      "emoji 🦙🚀😀 flags 🇫🇷 family 👨\u200d👩\u200d👧",
      "int main() {\n  return x**2; // comment\n}\n",
      std::string(kControlChars, sizeof kControlChars - 1),
      "windows\r\nline\r\nendings\r\n",
      "\n\n\n",
      "   ",
      "1234567890 3.14159 1e-9",
      "mixed 'quotes' \"double\" `back` «guillemets» “smart”",
      "",
  };
  return texts;
}

// Decodes with StreamDecoder, checking each piece is valid UTF-8.
std::string stream_decode(const Tokenizer& tok, const std::vector<int>& ids, bool include_special) {
  StreamDecoder dec(tok, include_special);
  std::string all;
  for (int id : ids) {
    std::string piece = dec.push(id);
    EXPECT_TRUE(utf8::is_valid(piece)) << "token " << id << " gave invalid UTF-8";
    all += piece;
  }
  std::string rest = dec.flush();
  EXPECT_TRUE(utf8::is_valid(rest));
  all += rest;
  return all;
}

class TokenizerRoundTrip : public ::testing::TestWithParam<std::string> {};

}  // namespace

TEST_P(TokenizerRoundTrip, DecodeEncodeIsIdentity) {
  const Tokenizer& tok = tokenizer(GetParam());
  for (const auto& text : sample_texts()) {
    auto ids = tok.encode(text, false, false);
    EXPECT_EQ(tok.decode(ids), text) << GetParam();
    EXPECT_EQ(stream_decode(tok, ids, true), text) << GetParam();
    if (tok.bos_id() >= 0) {  // BOS is skipped without include_special
      auto with_bos = tok.encode(text, true, false);
      ASSERT_FALSE(with_bos.empty());
      EXPECT_EQ(with_bos[0], tok.bos_id());
      EXPECT_EQ(tok.decode(with_bos, false), text) << GetParam();
      EXPECT_EQ(stream_decode(tok, with_bos, false), text) << GetParam();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllKinds, TokenizerRoundTrip,
                         ::testing::Values("gpt-2", "llama-spm", "phi-3", "deepseek-coder",
                                           "starcoder", "llama3", "qwen2", "smollm"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

TEST(TokenizerRoundTripBytes, InvalidUtf8IsEncodedAsBytes) {
  // Not text, but still encodable: every byte survives the round trip.
  const std::string bytes = "bad \xFF\xC3 and cut \xF0\x9F\xA6 end\x80";
  for (const char* name : {"gpt-2", "llama-spm", "llama3", "qwen2"}) {
    const Tokenizer& tok = tokenizer(name);
    EXPECT_EQ(tok.decode(tok.encode(bytes, false, true)), bytes) << name;
  }
}

TEST(TokenizerRoundTripBytes, RandomInputs) {
  // Random mixes of bytes, multi-byte characters, whitespace and pieces of
  // special-token text (fixed seed): encoding never fails and decodes back.
  // (Not "▁": SentencePiece cannot tell it from a space, by design.)
  const std::vector<std::string> atoms = {
      "a",    "Z",          " ",          "  ",     "\n",   "\r\n",     "\t",   "7",  "'s", "é",
      "ß",    "世",         "🦙",       "\u0301", "<",    "|",        ">",    "<|", "|>", "<s>",
      "</s>", "<|im_end|>", "<|eot_id|>", "\xFF",   "\xC3", "\xF0\x9F", "\x00", "Ġ"};
  std::mt19937 rng(1234);
  for (const char* name : {"gpt-2", "llama-spm", "phi-3", "llama3", "qwen2"}) {
    const Tokenizer& tok = tokenizer(name);
    for (int n = 0; n < 200; ++n) {
      std::string text;
      int len = static_cast<int>(rng() % 24);
      for (int i = 0; i < len; ++i) text += atoms[rng() % atoms.size()];
      auto ids = tok.encode(text, false, false);
      ASSERT_EQ(tok.decode(ids), text)
          << name << " " << nlohmann::json(utf8::sanitize(text)).dump();
      for (int id : ids) ASSERT_TRUE(id >= 0 && id < tok.vocab_size());
      // With special tokens parsed the bytes still come back (specials included).
      ASSERT_EQ(tok.decode(tok.encode(text, false, true), true), text) << name;
    }
  }
}

TEST(TokenizerKinds, ReportKindAndPre) {
  EXPECT_EQ(tokenizer("llama-spm").kind(), "spm");
  EXPECT_TRUE(tokenizer("llama-spm").strips_leading_space());
  EXPECT_EQ(tokenizer("gpt-2").kind(), "bpe");
  EXPECT_EQ(tokenizer("gpt-2").pre(), "gpt-2");
  EXPECT_EQ(tokenizer("llama3").pre(), "llama-bpe");  // recognised from tokenizer.json's regex
  EXPECT_EQ(tokenizer("qwen2").pre(), "qwen2");
  EXPECT_EQ(tokenizer("smollm").pre(), "smollm");
  EXPECT_FALSE(tokenizer("qwen2").strips_leading_space());
}

TEST(TokenizerSpecialIds, FromMetadataAndConfig) {
  const Tokenizer& spm = tokenizer("llama-spm");
  EXPECT_EQ(spm.bos_id(), 1);
  EXPECT_EQ(spm.eos_id(), 2);
  EXPECT_TRUE(spm.add_bos());
  EXPECT_EQ(spm.vocab_size(), 32000);

  // Qwen2.5: EOS <|im_end|>; <|endoftext|> also ends generation.
  const Tokenizer& qwen = tokenizer("qwen2");
  EXPECT_EQ(qwen.eos_id(), 151645);
  EXPECT_FALSE(qwen.add_bos());
  EXPECT_TRUE(qwen.is_eog(151645));
  EXPECT_TRUE(qwen.is_eog(151643));
  EXPECT_FALSE(qwen.is_eog(151644));  // <|im_start|>

  // Llama 3 from tokenizer.json + tokenizer_config.json: BOS <|begin_of_text|>,
  // EOS <|eot_id|>, and <|end_of_text|> ends generation too (this Llama 3.0
  // vocabulary has no <|eom_id|>). The config has no add_bos_token and the
  // post-processor adds nothing, so BOS is not added by default.
  const Tokenizer& l3 = tokenizer("llama3");
  EXPECT_EQ(l3.bos_id(), 128000);
  EXPECT_EQ(l3.eos_id(), 128009);
  EXPECT_FALSE(l3.add_bos());
  EXPECT_TRUE(l3.is_eog(128009));
  EXPECT_TRUE(l3.is_eog(128001));
  EXPECT_EQ(l3.eog_ids().size(), 2u);
  EXPECT_FALSE(l3.is_eog(128006));  // <|start_header_id|>
  EXPECT_EQ(l3.find_piece("<|eot_id|>"), 128009);
  EXPECT_EQ(l3.find_piece("no such piece"), std::nullopt);
  EXPECT_TRUE(l3.is_special(128009));
  EXPECT_FALSE(l3.is_special(9906));
}

TEST(TokenizerSpecial, ParsedOnlyWhenAsked) {
  const Tokenizer& l3 = tokenizer("llama3");
  const std::string text = "<|begin_of_text|>Hi<|eot_id|>";
  auto parsed = l3.encode(text, false, true);
  EXPECT_EQ(parsed, (std::vector<int>{128000, 13347, 128009}));
  auto plain = l3.encode(text, false, false);
  EXPECT_GT(plain.size(), 3u);
  for (int id : plain) EXPECT_FALSE(l3.is_special(id));
  EXPECT_EQ(l3.decode(plain), text);
  // Special token text appears only with include_special.
  EXPECT_EQ(l3.decode(parsed, true), text);
  EXPECT_EQ(l3.decode(parsed, false), "Hi");
  EXPECT_EQ(l3.token_bytes(128009, false), "");
  EXPECT_EQ(l3.token_bytes(128009, true), "<|eot_id|>");
  EXPECT_THROW(l3.token_bytes(l3.vocab_size()), Error);
  EXPECT_THROW(l3.token_bytes(-1), Error);

  // SentencePiece: a space is put before text that follows a special token,
  // and decoding takes it away again.
  const Tokenizer& spm = tokenizer("llama-spm");
  auto ids = spm.encode("<s>Hello</s>", false, true);
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_EQ(ids[0], 1);
  EXPECT_EQ(spm.piece(ids[1]), "\xE2\x96\x81Hello");
  EXPECT_EQ(ids[2], 2);
  EXPECT_EQ(spm.decode(ids), "<s>Hello</s>");
}

TEST(TokenizerSpecial, UserDefinedTokensAreAlwaysMatched) {
  // Qwen2.5's <tool_call> is a user-defined token: it stands for its text and
  // is matched even without parse_special, as llama.cpp does.
  const Tokenizer& qwen = tokenizer("qwen2");
  auto ids = qwen.encode("<tool_call>", false, false);
  EXPECT_EQ(ids, (std::vector<int>{151657}));
  EXPECT_EQ(qwen.token_bytes(151657, false), "<tool_call>");
}

TEST(StreamDecoder, HoldsBackSplitCharacters) {
  // Llama 2 has no token for 🦙: it is four <0xNN> byte tokens, and the stream
  // must not emit anything until the fourth.
  const Tokenizer& spm = tokenizer("llama-spm");
  auto ids = spm.encode("🦙", false, false);
  ASSERT_EQ(ids.size(), 5u);  // "▁" then the four bytes
  EXPECT_EQ(spm.piece(ids[1]), "<0xF0>");
  StreamDecoder dec(spm);
  EXPECT_EQ(dec.push(ids[0]), "");  // the added space is dropped
  EXPECT_EQ(dec.push(ids[1]), "");
  EXPECT_EQ(dec.push(ids[2]), "");
  EXPECT_EQ(dec.push(ids[3]), "");
  EXPECT_EQ(dec.push(ids[4]), "🦙");
  EXPECT_EQ(dec.flush(), "");

  // Byte-level BPE: " 🌅" is [11410, 234, 227] (see the chat cases), the first
  // token being " " plus the emoji's first two bytes.
  const Tokenizer& l3 = tokenizer("llama3");
  auto e = l3.encode(" 🌅", false, false);
  ASSERT_EQ(e, (std::vector<int>{11410, 234, 227}));
  StreamDecoder d3(l3);
  EXPECT_EQ(d3.push(e[0]), " ");
  EXPECT_EQ(d3.push(e[1]), "");
  EXPECT_EQ(d3.push(e[2]), "🌅");
  EXPECT_EQ(d3.flush(), "");
}

TEST(StreamDecoder, InvalidBytesBecomeReplacementCharacters) {
  const Tokenizer& spm = tokenizer("llama-spm");
  auto byte = [&](int b) { return *spm.find_piece(fmt::format("<0x{:02X}>", b)); };
  const std::string fffd = "\xEF\xBF\xBD";
  {
    StreamDecoder dec(spm);
    EXPECT_EQ(dec.push(byte(0xFF)), fffd);        // never valid
    EXPECT_EQ(dec.push(byte(0xE2)), "");          // could start a character...
    EXPECT_EQ(dec.push(byte(0x41)), fffd + "A");  // ...but 'A' cannot continue it
  }
  {
    StreamDecoder dec(spm);
    EXPECT_EQ(dec.push(byte(0xF0)), "");
    EXPECT_EQ(dec.push(byte(0x9F)), "");
    EXPECT_EQ(dec.flush(), fffd);  // cut short at the end: one replacement
  }
}

TEST(Utf8, SanitizeAndTruncation) {
  EXPECT_TRUE(utf8::is_valid("héllo 🦙"));
  EXPECT_FALSE(utf8::is_valid("\xC0\x80"));          // overlong
  EXPECT_FALSE(utf8::is_valid("\xED\xA0\x80"));      // surrogate
  EXPECT_FALSE(utf8::is_valid("\xF4\x90\x80\x80"));  // above U+10FFFF
  EXPECT_EQ(utf8::truncated_length("a\xF0\x9F", 1), 2u);
  EXPECT_EQ(utf8::truncated_length("a\xF0\x41", 1), 0u);
  EXPECT_EQ(utf8::sanitize("a\xFF"
                           "b\xE2\x82"),
            "a\xEF\xBF\xBD"
            "b\xEF\xBF\xBD");
}

TEST(Nfc, MatchesUnicodeNormalization) {
  // Expected values from Python's unicodedata.normalize("NFC", ...).
  EXPECT_EQ(nfc_normalize("e\u0301"), "\u00e9");
  EXPECT_EQ(nfc_normalize("\u1100\u1161\u11a8"), "\uac01");    // Hangul jamo compose
  EXPECT_EQ(nfc_normalize("q\u0307\u0323"), "q\u0323\u0307");  // reordered by class
  EXPECT_EQ(nfc_normalize("\u212b"), "\u00c5");                // singleton
  EXPECT_EQ(nfc_normalize("\u0958"), "\u0915\u093c");          // composition exclusion
  EXPECT_EQ(nfc_normalize("a\u0328\u0301"), "\u0105\u0301");
  EXPECT_EQ(nfc_normalize("\u1e0b\u0323"), "\u1e0d\u0307");
  EXPECT_EQ(nfc_normalize("x\u0301\u0301"), "x\u0301\u0301");
  EXPECT_EQ(nfc_normalize("\u0301a"), "\u0301a");
  EXPECT_EQ(nfc_normalize("\ufb01"), "\ufb01");  // compatibility only: unchanged
  EXPECT_EQ(nfc_normalize("plain ascii"), "plain ascii");
  EXPECT_EQ(nfc_normalize("bad \xFF byte e\u0301"), "bad \xFF byte \u00e9");
}

TEST(TokenizerSpeed, HundredKilobytesIsQuick) {
  // Not a timed assertion: prints the time, and checks the result decodes back.
  std::string text;
  const char* parts[] = {"The quick brown fox. ", "Ünïcödé 你好 😀 ", "x = f(y)**2;\n\t", "     ",
                         "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"};
  for (int i = 0; text.size() < 100000; ++i) text += parts[i % 5];
  for (const char* name : {"llama3", "llama-spm"}) {
    const Tokenizer& tok = tokenizer(name);
    auto t0 = std::chrono::steady_clock::now();
    auto ids = tok.encode(text, false, false);
    double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::cout << "[ speed    ] " << name << ": " << text.size() << " bytes -> " << ids.size()
              << " tokens in " << ms << " ms\n";
    EXPECT_EQ(tok.decode(ids), text);
  }
}
