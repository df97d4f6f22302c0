// The OpenAI request parser and response shapes of the HTTP server: defaults,
// every accepted form of a field, a 400 naming the field for every wrong type or
// unsupported option (ranges are checked once the request is built:
// server_request_builder_test), and the exact JSON shapes clients rely on.
#include <gtest/gtest.h>

#include <climits>

#include <nlohmann/json.hpp>

#include "server/api_error.h"
#include "server/openai_request.h"
#include "server/openai_response.h"
#include "server/sse.h"
#include "structured/grammar_matcher.h"
#include "support/byte_vocabulary.h"

using namespace tandem;
using namespace tandem::server;
using json = nlohmann::json;

namespace {

ParsedRequest completion(const json& body) {
  return parse_request(body.dump(), Endpoint::Completions);
}
ParsedRequest chat(const json& body) {
  return parse_request(body.dump(), Endpoint::ChatCompletions);
}

// The ApiError a body gets (fails the test when it parses).
ApiError error_of(const std::string& body, Endpoint ep = Endpoint::Completions) {
  try {
    parse_request(body, ep);
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "no error for " << body;
  return ApiError(0, "", "");
}

void expect_400(const json& body, const std::string& param, Endpoint ep = Endpoint::Completions) {
  ApiError e = error_of(body.dump(), ep);
  EXPECT_EQ(e.status, 400) << body.dump();
  EXPECT_EQ(e.param, param) << body.dump() << ": " << e.what();
  EXPECT_EQ(e.type, "invalid_request_error");
  EXPECT_FALSE(std::string(e.what()).empty());
}

const json kUser = json::array({{{"role", "user"}, {"content", "hi"}}});

}  // namespace

TEST(ServerProtocol, CompletionDefaults) {
  ParsedRequest r = completion({{"prompt", "Hello"}});
  EXPECT_EQ(r.endpoint, Endpoint::Completions);
  ASSERT_TRUE(r.prompt.has_value());
  EXPECT_EQ(*r.prompt, "Hello");
  EXPECT_TRUE(r.model.empty());
  EXPECT_FALSE(r.max_tokens.has_value());
  EXPECT_EQ(r.sampling.temperature, kDefaultTemperature);
  EXPECT_EQ(r.sampling.top_k, 0);
  EXPECT_EQ(r.sampling.top_p, 1.0f);
  EXPECT_EQ(r.sampling.min_p, 0.0f);
  EXPECT_EQ(r.sampling.repetition_penalty, 1.0f);
  EXPECT_FALSE(r.seed.has_value());
  EXPECT_TRUE(r.stop.empty());
  EXPECT_TRUE(r.speculate);
  EXPECT_FALSE(r.stream);
  EXPECT_FALSE(r.include_usage);
  EXPECT_FALSE(r.ignore_eos);
}

TEST(ServerProtocol, EveryField) {
  ParsedRequest r = completion({{"model", "m"},
                                {"prompt", "Hi"},
                                {"max_tokens", 7},
                                {"temperature", 0.5},
                                {"top_p", 0.9},
                                {"top_k", 40},
                                {"min_p", 0.05},
                                {"repetition_penalty", 1.2},
                                {"repeat_last_n", -1},
                                {"seed", -3},
                                {"stop", "\n\n"},
                                {"ignore_eos", true},
                                {"speculate", false},
                                {"stream", true},
                                {"stream_options", {{"include_usage", true}}},
                                {"n", 1},
                                {"presence_penalty", 0},
                                {"logprobs", nullptr},
                                {"user", "someone"},
                                {"some_future_field", 1}});
  EXPECT_EQ(r.model, "m");
  EXPECT_EQ(r.max_tokens, 7);
  EXPECT_FLOAT_EQ(r.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(r.sampling.top_p, 0.9f);
  EXPECT_EQ(r.sampling.top_k, 40);
  EXPECT_FLOAT_EQ(r.sampling.min_p, 0.05f);
  EXPECT_FLOAT_EQ(r.sampling.repetition_penalty, 1.2f);
  EXPECT_EQ(r.sampling.penalty_last_n, -1);
  EXPECT_EQ(r.seed, static_cast<uint64_t>(int64_t{-3}));
  EXPECT_EQ(r.stop, std::vector<std::string>{"\n\n"});
  EXPECT_TRUE(r.ignore_eos);
  EXPECT_FALSE(r.speculate);
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
}

TEST(ServerProtocol, NullMeansAbsent) {
  ParsedRequest r = completion({{"prompt", "x"},
                                {"temperature", nullptr},
                                {"stop", nullptr},
                                {"max_tokens", nullptr},
                                {"stream", nullptr}});
  EXPECT_EQ(r.sampling.temperature, kDefaultTemperature);
  EXPECT_TRUE(r.stop.empty());
  EXPECT_FALSE(r.max_tokens.has_value());
  EXPECT_FALSE(r.stream);
}

TEST(ServerProtocol, PromptForms) {
  EXPECT_EQ(*completion({{"prompt", json::array({"one"})}}).prompt, "one");
  EXPECT_EQ(completion({{"prompt", {1, 2, 3}}}).prompt_ids, (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(completion({{"prompt", json::array({json::array({4, 5})})}}).prompt_ids,
            (std::vector<int>{4, 5}));
  EXPECT_FALSE(completion({{"prompt", {1, 2}}}).prompt.has_value());
  expect_400({{"prompt", {"a", "b"}}}, "prompt");  // a batch
  expect_400({{"prompt", {1, -2}}}, "prompt");
  expect_400({{"prompt", {1, "x"}}}, "prompt");
  expect_400({{"prompt", ""}}, "prompt");
  expect_400({{"prompt", json::array()}}, "prompt");
  expect_400({{"prompt", 5}}, "prompt");
  expect_400({{"prompt", {{"a", 1}}}}, "prompt");
  expect_400({{"max_tokens", 5}}, "prompt");  // missing
}

TEST(ServerProtocol, StopForms) {
  EXPECT_EQ(completion({{"prompt", "x"}, {"stop", {"a", "bc"}}}).stop,
            (std::vector<std::string>{"a", "bc"}));
  expect_400({{"prompt", "x"}, {"stop", 3}}, "stop");
  expect_400({{"prompt", "x"}, {"stop", {"a", 3}}}, "stop");
}

TEST(ServerProtocol, ChatMessages) {
  ParsedRequest r = chat(
      {{"messages",
        {{{"role", "developer"}, {"content", "Be brief."}},
         {{"role", "user"},
          {"content",
           {{{"type", "text"}, {"text", "Hello, "}}, {{"type", "text"}, {"text", "world"}}}}}}},
       {"max_completion_tokens", 9}});
  ASSERT_EQ(r.messages.size(), 2u);
  EXPECT_EQ(r.messages[0].role, "system");  // developer is OpenAI's newer name for it
  EXPECT_EQ(r.messages[0].content, "Be brief.");
  EXPECT_EQ(r.messages[1].content, "Hello, world");
  EXPECT_EQ(r.max_tokens, 9);
  const auto C = Endpoint::ChatCompletions;
  expect_400({{"messages", json::array()}}, "messages", C);
  expect_400({{"messages", "hi"}}, "messages", C);
  expect_400({{"prompt", "hi"}}, "messages", C);
  expect_400({{"messages", {{{"content", "x"}}}}}, "messages", C);  // no role
  expect_400({{"messages", {{{"role", "user"}, {"content", 3}}}}}, "messages", C);
  expect_400({{"messages", {{{"role", "user"}}}}}, "messages", C);
  expect_400({{"messages",
               {{{"role", "user"}, {"content", {{{"type", "image_url"}, {"image_url", "u"}}}}}}}},
             "messages", C);
  expect_400({{"messages", {1}}}, "messages", C);
}

TEST(ServerProtocol, WrongTypes) {
  auto with = [](const char* k, json v) { return json{{"prompt", "x"}, {k, v}}; };
  expect_400(with("max_tokens", "10"), "max_tokens");
  expect_400(with("max_tokens", 1.5), "max_tokens");
  expect_400(with("max_tokens", 18446744073709551615ull), "max_tokens");
  expect_400(with("temperature", "hot"), "temperature");
  expect_400(with("top_p", "all"), "top_p");
  expect_400(with("top_k", 2.5), "top_k");
  expect_400(with("min_p", true), "min_p");
  expect_400(with("repetition_penalty", "1.1"), "repetition_penalty");
  expect_400(with("seed", "7"), "seed");
  expect_400(with("stream", 1), "stream");
  expect_400(with("speculate", "no"), "speculate");
  expect_400(with("model", 3), "model");
  expect_400(with("stream_options", {{"include_usage", true}}), "stream_options");
  expect_400(json{{"prompt", "x"}, {"stream", true}, {"stream_options", 1}}, "stream_options");
  EXPECT_EQ(completion(with("top_k", -1)).sampling.top_k, 0);  // vLLM's "off"
  // Values are taken as sent; their ranges are checked with the built request.
  EXPECT_FLOAT_EQ(completion(with("temperature", -0.1)).sampling.temperature, -0.1f);
  EXPECT_EQ(completion(with("max_tokens", int64_t{1} << 40)).max_tokens, INT_MAX);
}

TEST(ServerProtocol, UnsupportedOptionsAreNamed) {
  auto with = [](const char* k, json v) { return json{{"prompt", "x"}, {k, v}}; };
  for (const auto& [name, value] :
       std::vector<std::pair<const char*, json>>{{"n", 2},
                                                 {"best_of", 3},
                                                 {"echo", true},
                                                 {"presence_penalty", 0.5},
                                                 {"frequency_penalty", -1},
                                                 {"logit_bias", {{"50256", -100}}},
                                                 {"suffix", "end"},
                                                 {"tools", {{{"type", "function"}}}},
                                                 {"tool_choice", "required"},
                                                 {"response_format", {{"type", "grammar"}}}}) {
    ApiError e = error_of(with(name, value).dump());
    EXPECT_EQ(e.status, 400) << name;
    EXPECT_EQ(e.param, name);
    EXPECT_EQ(e.code, "unsupported_value") << name;
    EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
  }
  // Their neutral values are fine.
  EXPECT_NO_THROW(completion({{"prompt", "x"},
                              {"n", 1},
                              {"best_of", 1},
                              {"echo", false},
                              {"logprobs", nullptr},
                              {"frequency_penalty", 0},
                              {"logit_bias", json::object()},
                              {"suffix", ""},
                              {"tools", json::array()},
                              {"tool_choice", "none"},
                              {"response_format", {{"type", "text"}}}}));
}

TEST(ServerProtocol, ResponseFormatIsParsedAndCompiled) {
  const json msgs = json::array({{{"role", "user"}, {"content", "x"}}});
  auto with_format = [&](json rf) { return json{{"messages", msgs}, {"response_format", rf}}; };
  EXPECT_EQ(chat(with_format({{"type", "text"}})).response_format.kind, ResponseFormat::Kind::Text);
  EXPECT_EQ(chat({{"messages", msgs}}).response_format.grammar, nullptr);
  ParsedRequest obj = chat(with_format({{"type", "json_object"}}));
  EXPECT_EQ(obj.response_format.kind, ResponseFormat::Kind::JsonObject);
  EXPECT_NE(obj.response_format.grammar, nullptr);
  // The schema's properties keep the order of the request body ("zeta" before "alpha").
  const std::string body = R"({"prompt": "x", "response_format": {"type": "json_schema",
      "json_schema": {"name": "pair", "strict": true, "schema": {"type": "object",
      "properties": {"zeta": {"type": "integer"}, "alpha": {"type": "integer"}},
      "required": ["zeta", "alpha"]}}}})";
  ParsedRequest p = parse_request(body, Endpoint::Completions);
  EXPECT_EQ(p.response_format.kind, ResponseFormat::Kind::JsonSchema);
  EXPECT_EQ(p.response_format.name, "pair");
  EXPECT_TRUE(p.response_format.strict);
  ASSERT_NE(p.response_format.grammar, nullptr);
  auto vocab = test::byte_vocabulary();
  structured::GrammarMatcher ordered(p.response_format.grammar, vocab);
  EXPECT_TRUE(ordered.accept_bytes(R"({"zeta":1,"alpha":2})") && ordered.is_complete());
  structured::GrammarMatcher sorted(p.response_format.grammar, vocab);
  EXPECT_FALSE(sorted.accept_bytes(R"({"alpha")"));

  // Errors name the field; an unsupported schema names the place in the schema.
  for (const json& bad :
       {json("json"), json{{"type", 1}}, json::object(), json{{"type", "json_schema"}},
        json{{"type", "json_schema"}, {"json_schema", {{"name", "x"}}}},
        json{{"type", "json_schema"}, {"json_schema", {{"schema", "string"}}}},
        json{{"type", "regex"}}}) {
    ApiError e = error_of(with_format(bad).dump(), Endpoint::ChatCompletions);
    EXPECT_EQ(e.status, 400) << bad.dump();
    EXPECT_EQ(e.param, "response_format") << bad.dump();
  }
  ApiError e = error_of(
      with_format({{"type", "json_schema"},
                   {"json_schema",
                    {{"name", "x"},
                     {"schema",
                      {{"type", "object"},
                       {"properties", {{"n", {{"type", "integer"}, {"multipleOf", 3}}}}}}}}}})
          .dump(),
      Endpoint::ChatCompletions);
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.param, "response_format");
  EXPECT_EQ(e.code, "unsupported_schema");
  EXPECT_NE(std::string(e.what()).find("response_format.json_schema.schema"), std::string::npos)
      << e.what();
  EXPECT_NE(std::string(e.what()).find("#/properties/n/multipleOf"), std::string::npos) << e.what();
}

TEST(ServerProtocol, LogprobsAndN) {
  const json msgs = json::array({{{"role", "user"}, {"content", "x"}}});
  ParsedRequest c = chat({{"messages", msgs}, {"logprobs", true}, {"top_logprobs", 20}});
  EXPECT_TRUE(c.logprobs.enabled);
  EXPECT_EQ(c.logprobs.top, 20);
  EXPECT_FALSE(chat({{"messages", msgs}, {"logprobs", false}}).logprobs.enabled);
  expect_400({{"messages", msgs}, {"top_logprobs", 2}}, "top_logprobs", Endpoint::ChatCompletions);
  expect_400({{"messages", msgs}, {"logprobs", 1}}, "logprobs", Endpoint::ChatCompletions);

  ParsedRequest p = completion({{"prompt", "x"}, {"logprobs", 3}});
  EXPECT_TRUE(p.logprobs.enabled);
  EXPECT_EQ(p.logprobs.top, 3);
  ParsedRequest zero = completion({{"prompt", "x"}, {"logprobs", 0}});  // the chosen tokens only
  EXPECT_TRUE(zero.logprobs.enabled);
  EXPECT_EQ(zero.logprobs.top, 0);
  EXPECT_FALSE(completion({{"prompt", "x"}, {"logprobs", nullptr}}).logprobs.enabled);
  expect_400({{"prompt", "x"}, {"logprobs", true}}, "logprobs");
  expect_400({{"prompt", "x"}, {"top_logprobs", 2}}, "top_logprobs");

  EXPECT_NO_THROW(completion({{"prompt", "x"}, {"n", 1}}));
  expect_400({{"prompt", "x"}, {"n", 0}}, "n");
  EXPECT_EQ(error_of(json{{"prompt", "x"}, {"n", 2}}.dump()).code, "unsupported_value");
  EXPECT_TRUE(
      chat({{"messages", msgs}, {"stream", true}, {"stream_options", {{"include_usage", true}}}})
          .include_usage);
}

TEST(ServerProtocol, InvalidJson) {
  for (std::string body : {"", "{", "{\"prompt\": }", "[1, 2]", "\"text\"", "nul"}) {
    ApiError e = error_of(body);
    EXPECT_EQ(e.status, 400) << body;
    EXPECT_EQ(e.code, "invalid_json") << body;
  }
  // Bytes that are not UTF-8 inside a string are invalid JSON, not a crash.
  EXPECT_EQ(error_of("{\"prompt\": \"\xff\xfe\"}").code, "invalid_json");
}

TEST(ServerProtocol, ErrorObjectShape) {
  json j = error_json(
      ApiError(400, "bad temperature", "invalid_request_error", "temperature", "invalid_value"));
  EXPECT_EQ(j, json::parse(R"({"error": {"message": "bad temperature",
      "type": "invalid_request_error", "param": "temperature", "code": "invalid_value"}})"));
  json k = error_json(ApiError(500, "boom", "server_error"));
  EXPECT_TRUE(k["error"]["param"].is_null());
  EXPECT_TRUE(k["error"]["code"].is_null());
  EXPECT_EQ(error_for_status(404).status, 404);
  EXPECT_EQ(error_for_status(413).code, "request_too_large");
  EXPECT_EQ(error_for_status(503).type, "server_error");
}

namespace {

RequestResult sample_result() {
  RequestResult r;
  r.tokens = {5, 6, 7};
  r.text = "abc";
  r.finish_reason = FinishReason::Length;
  r.stats.n_prompt = 4;
  r.stats.n_generated = 3;
  r.stats.rounds = 1;
  r.stats.drafted = 4;
  r.stats.accepted = 1;
  return r;
}

// Output as the channel hands it over: one piece of text, the target's token.
RequestChannel::News news(const std::string& text) {
  RequestChannel::News n;
  n.text = text;
  n.tokens.push_back({5, false, text, std::nullopt});
  return n;
}

// Log-probabilities of tokens 5, 6 (alternatives 6 and 9).
std::vector<TokenLogprobs> sample_logprobs() {
  return {{{5, -0.5f}, {{5, -0.5f}, {9, -1.5f}}}, {{6, -0.25f}, {{6, -0.25f}, {9, -2.0f}}}};
}

}  // namespace

// Every content chunk says, token by token, what each output wrote and whether
// it was an accepted draft, with the request's counts so far.
TEST(ServerProtocol, ChunksCarryTheirTokensAndDraftFlags) {
  ResponseMeta meta = make_meta(Endpoint::ChatCompletions, "tiny");
  RequestChannel::News n;
  n.text = "abc";
  n.tokens = {{5, true, "a", std::nullopt},
              {6, false, "", std::nullopt},  // an incomplete character: no text yet
              {7, false, "bc", std::nullopt}};
  n.drafted = 3;
  n.accepted = 1;
  json j = text_chunk(meta, n, false, nullptr);
  EXPECT_EQ(j["choices"][0]["delta"]["content"], "abc");
  EXPECT_TRUE(j["choices"][0]["logprobs"].is_null()) << "not asked for";
  EXPECT_EQ(j["tandem"]["tokens"], json::parse(R"([{"text": "a", "draft": true},
      {"text": "", "draft": false}, {"text": "bc", "draft": false}])"));
  EXPECT_EQ(j["tandem"]["drafted"], 3);
  EXPECT_EQ(j["tandem"]["accepted"], 1);
}

// Chat's logprobs: content entries with token, logprob, bytes and
// top_logprobs; completions': parallel lists with running text offsets.
TEST(ServerProtocol, LogprobsInEachEndpointsShape) {
  const auto lp = sample_logprobs();
  const std::vector<const TokenLogprobs*> ptrs{&lp[0], &lp[1]};
  ResponseMeta chat = make_meta(Endpoint::ChatCompletions, "tiny");
  chat.logprobs = true;  // no tokenizer: tokens are spelled as their ids
  size_t offset = 0;
  json c = logprobs_json(chat, ptrs, &offset);
  ASSERT_EQ(c["content"].size(), 2u);
  EXPECT_EQ(c["content"][0]["token"], "5");
  EXPECT_FLOAT_EQ(c["content"][0]["logprob"].get<float>(), -0.5f);
  EXPECT_EQ(c["content"][0]["bytes"], json::array({'5'}));
  ASSERT_EQ(c["content"][1]["top_logprobs"].size(), 2u);
  EXPECT_EQ(c["content"][1]["top_logprobs"][1]["token"], "9");
  EXPECT_FLOAT_EQ(c["content"][1]["top_logprobs"][1]["logprob"].get<float>(), -2.0f);

  ResponseMeta cmpl = make_meta(Endpoint::Completions, "tiny");
  cmpl.logprobs = true;
  offset = 10;
  json t = logprobs_json(cmpl, ptrs, &offset);
  EXPECT_EQ(t["tokens"], json::array({"5", "6"}));
  EXPECT_EQ(t["text_offset"], json::array({10, 11}));
  EXPECT_EQ(offset, 12u);
  EXPECT_FLOAT_EQ(t["top_logprobs"][0]["9"].get<float>(), -1.5f);

  // A whole response: one entry per generated token.
  RequestResult r = sample_result();
  r.tokens = {5, 6};
  r.logprobs = lp;
  json whole = completion_json(chat, r);
  EXPECT_EQ(whole["choices"][0]["logprobs"]["content"].size(), 2u);
}

TEST(ServerProtocol, CompletionResponseShape) {
  ResponseMeta meta = make_meta(Endpoint::Completions, "tiny");
  EXPECT_EQ(meta.id.rfind("cmpl-", 0), 0u);
  EXPECT_NE(make_meta(Endpoint::Completions, "tiny").id, meta.id);
  RequestResult r = sample_result();
  r.stats.n_cached_prompt = 2;
  json j = completion_json(meta, r);
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["model"], "tiny");
  EXPECT_EQ(j["choices"][0]["text"], "abc");
  EXPECT_EQ(j["choices"][0]["index"], 0);
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_TRUE(j["choices"][0]["logprobs"].is_null());
  EXPECT_EQ(j["usage"], json::parse(R"({"prompt_tokens": 4, "completion_tokens": 3,
                                        "total_tokens": 7,
                                        "prompt_tokens_details": {"cached_tokens": 2}})"));
  EXPECT_DOUBLE_EQ(j["tandem"]["acceptance_rate"].get<double>(), 0.25);
  EXPECT_EQ(j["tandem"]["drafted"], 4);
  EXPECT_EQ(j["tandem"]["accepted"], 1);
  EXPECT_DOUBLE_EQ(j["tandem"]["tokens_per_round"].get<double>(),
                   2.0);  // 2 tokens after prefill / 1 round
}

TEST(ServerProtocol, ChatResponseAndChunks) {
  ResponseMeta meta = make_meta(Endpoint::ChatCompletions, "tiny");
  EXPECT_EQ(meta.id.rfind("chatcmpl-", 0), 0u);
  RequestResult r = sample_result();
  json j = completion_json(meta, r);
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["choices"][0]["message"], json::parse(R"({"role": "assistant", "content": "abc"})"));

  json role = role_chunk(meta, false);
  EXPECT_EQ(role["object"], "chat.completion.chunk");
  EXPECT_EQ(role["choices"][0]["delta"]["role"], "assistant");
  EXPECT_FALSE(role.contains("usage"));
  json text = text_chunk(meta, news("ab"), true, nullptr);
  EXPECT_EQ(text["choices"][0]["delta"]["content"], "ab");
  EXPECT_TRUE(text["choices"][0]["finish_reason"].is_null());
  EXPECT_TRUE(text.contains("usage") && text["usage"].is_null());
  json fin = finish_chunk(meta, r, true);
  EXPECT_EQ(fin["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(fin["choices"][0]["delta"], json::object());
  EXPECT_EQ(fin["tandem"]["drafted"], 4);
  json usage = usage_chunk(meta, r);
  EXPECT_EQ(usage["choices"], json::array());
  EXPECT_EQ(usage["usage"]["total_tokens"], 7);
  EXPECT_EQ(usage["id"], meta.id);
}

TEST(ServerProtocol, CompletionChunks) {
  ResponseMeta meta = make_meta(Endpoint::Completions, "tiny");
  json text = text_chunk(meta, news("x"), false, nullptr);
  EXPECT_EQ(text["object"], "text_completion");
  EXPECT_EQ(text["choices"][0]["text"], "x");
  EXPECT_FALSE(text.contains("usage"));
  EXPECT_EQ(finish_chunk(meta, sample_result(), false)["choices"][0]["text"], "");
}

TEST(ServerProtocol, SseFraming) {
  EXPECT_EQ(sse_event("{\"a\":1}"), "data: {\"a\":1}\n\n");
  EXPECT_EQ(sse_done(), "data: [DONE]\n\n");
  // Text with newlines is escaped by the JSON encoder: one event stays one line.
  ResponseMeta meta = make_meta(Endpoint::Completions, "tiny");
  std::string ev = sse_event(dump(text_chunk(meta, news("a\nb\n\n"), false, nullptr)));
  EXPECT_EQ(ev.find('\n'), ev.size() - 2);
  // Invalid UTF-8 never throws on the way out.
  EXPECT_NO_THROW(dump(text_chunk(meta, news("\xff"), false, nullptr)));
}
