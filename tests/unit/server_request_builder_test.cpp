// From a parsed API request to an engine Request on synthetic models (Llama 3
// and ChatML templates): prompt encoding, chat rendering, max_tokens defaults,
// and every parameter out of range (the context and KV cache limits included)
// refused up front with a 400 naming the field.
#include <gtest/gtest.h>

#include <algorithm>

#include "model/model.h"
#include "server/api_error.h"
#include "server/openai_request.h"
#include "server/request_builder.h"
#include "structured/json_schema.h"
#include "support/paths.h"
#include "support/synthetic_model.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

using namespace tandem;
using namespace tandem::server;

namespace {

std::unique_ptr<Model> synthetic(Arch arch, bool with_tokenizer = true) {
  test::SyntheticSpec s;
  s.arch = arch;
  s.context_length = 128;
  s.with_tokenizer = with_tokenizer;
  const std::string dir = test::temp_dir("server_builder");
  return Model::load(test::write_synthetic_gguf(s, dir + "/m.gguf"));
}

ParsedRequest completion(const std::string& text) {
  ParsedRequest p;
  p.prompt = text;
  return p;
}

ParsedRequest chat(std::vector<ChatMessage> messages) {
  ParsedRequest p;
  p.endpoint = Endpoint::ChatCompletions;
  p.messages = std::move(messages);
  return p;
}

ApiError error_of(const RequestBuilder& b, const ParsedRequest& p) {
  try {
    b.build(p);
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "no error";
  return ApiError(0, "", "");
}

}  // namespace

TEST(ServerRequestBuilder, CompletionPromptUsesTheTokenizersBos) {
  auto m = synthetic(Arch::Llama);
  RequestBuilder b(*m, {128, 1024});
  Request r = b.build(completion("hello world"));
  const Tokenizer& tok = m->require_tokenizer();
  EXPECT_EQ(r.prompt, tok.encode("hello world", tok.add_bos(), false));
  ASSERT_TRUE(tok.add_bos());
  EXPECT_EQ(r.prompt.front(), tok.bos_id());
  EXPECT_EQ(r.params.max_tokens, kDefaultCompletionMaxTokens);
  // Control-token text in a completion prompt stays text.
  Request s = b.build(completion("<|eot_id|>"));
  EXPECT_EQ(std::count(s.prompt.begin(), s.prompt.end(), tok.eog_ids().front()), 0);
}

TEST(ServerRequestBuilder, ChatIsRenderedWithTheModelsTemplate) {
  for (Arch arch : {Arch::Llama, Arch::Qwen2}) {
    auto m = synthetic(arch);
    RequestBuilder b(*m, {128, 1024});
    EXPECT_TRUE(b.chat_unavailable_reason().empty());
    std::vector<ChatMessage> msgs = {{"system", "be brief"}, {"user", "hi"}};
    Request r = b.build(chat(msgs));
    const auto family = detect_chat_template(m->chat_template());
    const std::string rendered = render_chat(family, m->chat_template(), msgs, true);
    EXPECT_EQ(r.prompt, m->require_tokenizer().encode(rendered, false, true));
    EXPECT_EQ(b.chat_family(), chat_family_name(family));
    // Without max_tokens a chat may use the rest of the context.
    EXPECT_EQ(r.params.max_tokens, 128 - static_cast<int>(r.prompt.size()));
    ApiError e = error_of(b, chat({{"robot", "x"}}));
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.param, "messages");
  }
}

TEST(ServerRequestBuilder, ParamsAreCarriedOver) {
  auto m = synthetic(Arch::Qwen2);
  RequestBuilder b(*m, {128, 1024});
  ParsedRequest p = completion("abc");
  p.max_tokens = 5;
  p.sampling.temperature = 0.7f;
  p.sampling.top_k = 3;
  p.seed = 99;
  p.stop = {"x"};
  p.ignore_eos = true;
  p.speculate = false;
  Request r = b.build(p);
  EXPECT_EQ(r.params.max_tokens, 5);
  EXPECT_FLOAT_EQ(r.params.sampling.temperature, 0.7f);
  EXPECT_EQ(r.params.sampling.top_k, 3);
  EXPECT_EQ(r.params.sampling.seed, 99u);
  EXPECT_EQ(r.params.stop_strings, std::vector<std::string>{"x"});
  EXPECT_TRUE(r.params.ignore_eos);
  EXPECT_FALSE(r.params.speculate);
  // Without a seed each request draws its own (equal by chance with probability 2^-64).
  p.seed.reset();
  EXPECT_NE(b.build(p).params.sampling.seed, b.build(p).params.sampling.seed);
}

TEST(ServerRequestBuilder, LimitsAreCheckedUpFront) {
  auto m = synthetic(Arch::Qwen2);
  RequestBuilder b(*m, {64, 1024});
  ParsedRequest p = completion("abc");
  const int n_prompt = static_cast<int>(b.prompt_tokens(p).size());
  p.max_tokens = 64 - n_prompt;
  EXPECT_EQ(b.build(p).params.max_tokens, 64 - n_prompt);  // exactly fits
  p.max_tokens = 65 - n_prompt;
  ApiError e = error_of(b, p);
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.param, "max_tokens");
  EXPECT_EQ(e.code, "context_length_exceeded");
  EXPECT_NE(std::string(e.what()).find("64"), std::string::npos) << e.what();

  // A prompt filling the context leaves no room at all.
  ParsedRequest big;
  big.prompt_ids.assign(64, 1);
  e = error_of(b, big);
  EXPECT_EQ(e.param, "prompt");
  EXPECT_EQ(e.code, "context_length_exceeded");

  // The KV cache bounds a request too when it is smaller than the context.
  RequestBuilder small(*m, {64, 32});
  p.max_tokens.reset();
  EXPECT_EQ(small.build(p).params.max_tokens, kDefaultCompletionMaxTokens);
  p.max_tokens = 32;
  e = error_of(small, p);
  EXPECT_NE(std::string(e.what()).find("KV cache"), std::string::npos) << e.what();
  // The completions default shrinks to fit rather than failing.
  ParsedRequest near;
  near.prompt_ids.assign(30, 1);
  EXPECT_EQ(small.build(near).params.max_tokens, 2);
}

TEST(ServerRequestBuilder, TokenIdPrompts) {
  auto m = synthetic(Arch::Llama);
  RequestBuilder b(*m, {128, 1024});
  ParsedRequest p;
  p.prompt_ids = {1, 2, 3};
  EXPECT_EQ(b.build(p).prompt, (std::vector<int>{1, 2, 3}));
  p.prompt_ids = {1, m->config().vocab_size};
  ApiError e = error_of(b, p);
  EXPECT_EQ(e.param, "prompt");
  EXPECT_NE(std::string(e.what()).find(std::to_string(m->config().vocab_size)), std::string::npos);
}

TEST(ServerRequestBuilder, ModelWithoutTokenizer) {
  auto m = synthetic(Arch::Llama, false);
  RequestBuilder b(*m, {128, 1024});
  EXPECT_FALSE(b.chat_unavailable_reason().empty());
  ApiError e = error_of(b, chat({{"user", "hi"}}));
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.code, "chat_template_unsupported");
  EXPECT_EQ(error_of(b, completion("text")).param, "prompt");
  ParsedRequest ids;
  ids.prompt_ids = {4, 5};
  EXPECT_EQ(b.build(ids).prompt.size(), 2u);
}

// Parsed in full, but refused until the engine can honour them: never ignored.
// A response_format becomes the request's constraint (in the grammar's start
// state), logprobs its count of alternatives; ignore_eos, which would write the
// end of the document into the output, cannot go with a response_format.
TEST(ServerRequestBuilder, StructuredOutputAndLogprobsReachTheEngine) {
  auto m = synthetic(Arch::Llama);
  RequestBuilder b(*m, {128, 1024});
  ParsedRequest p = completion("hello");
  p.response_format.kind = ResponseFormat::Kind::JsonObject;
  p.response_format.grammar = structured::any_json_object_grammar();
  p.logprobs = {true, 3};
  Request r = b.build(p);
  ASSERT_NE(r.params.constraint, nullptr);
  const int open = m->tokenizer()->encode("{", false, false).at(0);
  EXPECT_TRUE(r.params.constraint->allows(open)) << "a JSON object starts with {";
  EXPECT_EQ(r.params.logprobs, 3);

  ParsedRequest text = completion("hello");
  Request plain = b.build(text);
  EXPECT_EQ(plain.params.constraint, nullptr);
  EXPECT_EQ(plain.params.logprobs, -1);

  p.ignore_eos = true;
  ApiError e = error_of(b, p);
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.param, "ignore_eos");
}

// Ranges are checked once, on the built request (engine/request_check.h): the
// client's body, parsed as sent, gets a 400 naming the field in the API's words.
TEST(ServerRequestBuilder, RangesAreRefusedNamingTheField) {
  auto m = synthetic(Arch::Qwen2);
  RequestBuilder b(*m, {128, 1024});
  auto refused = [&](const std::string& body, Endpoint ep, const std::string& field) {
    const ApiError e = error_of(b, parse_request(body, ep));
    EXPECT_EQ(e.status, 400) << body;
    EXPECT_EQ(e.param, field) << body << ": " << e.what();
    EXPECT_EQ(e.type, "invalid_request_error");
    EXPECT_EQ(e.code, "invalid_value") << body;
  };
  const auto C = Endpoint::Completions, H = Endpoint::ChatCompletions;
  refused(R"({"prompt": "x", "max_tokens": 0})", C, "max_tokens");
  refused(R"({"prompt": "x", "max_tokens": -3})", C, "max_tokens");
  refused(R"({"prompt": "x", "temperature": -0.1})", C, "temperature");
  refused(R"({"prompt": "x", "top_p": 0})", C, "top_p");
  refused(R"({"prompt": "x", "top_p": 1.01})", C, "top_p");
  refused(R"({"prompt": "x", "top_k": -2})", C, "top_k");
  refused(R"({"prompt": "x", "min_p": 2})", C, "min_p");
  refused(R"({"prompt": "x", "repetition_penalty": 0})", C, "repetition_penalty");
  refused(R"({"prompt": "x", "repeat_last_n": -5})", C, "repeat_last_n");
  refused(R"({"prompt": "x", "stop": [""]})", C, "stop");
  refused(
      R"({"prompt": "x", "stop": ["a","b","c","d","e","f","g","h","i","j","k","l","m","n","o","p","q"]})",
      C, "stop");
  refused(R"({"prompt": "x", "logprobs": 6})", C, "logprobs");
  refused(
      R"({"messages": [{"role": "user", "content": "x"}], "logprobs": true, "top_logprobs": 21})",
      H, "top_logprobs");
  refused(R"({"messages": [{"role": "user", "content": "x"}], "max_completion_tokens": 0})", H,
          "max_tokens");
  // At the edges: accepted.
  EXPECT_NO_THROW(
      b.build(parse_request(R"({"prompt": "x", "logprobs": 5, "top_p": 1, "min_p": 0})", C)));
  EXPECT_NO_THROW(b.build(parse_request(
      R"({"messages": [{"role": "user", "content": "x"}], "logprobs": true, "top_logprobs": 20})",
      H)));
}

// The tenant the server derives from the API key (AccessControl::tenant) is the
// request's: whose text the suffix drafter may draft it from.
TEST(ServerRequestBuilder, TheRequestCarriesItsTenant) {
  auto m = synthetic(Arch::Llama);
  RequestBuilder b(*m, {128, 1024});
  EXPECT_EQ(b.build(completion("Hello")).params.tenant, 0u) << "no keys: the shared tenant";
  EXPECT_EQ(b.build(completion("Hello"), 2).params.tenant, 2u);
}
