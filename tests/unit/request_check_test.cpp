// The one check of a request's parameters (engine/request_check.h): every field
// out of range is refused with a RequestError naming it, with the reason the
// server reports; everything within range passes, at the exact edges too.
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "engine/engine.h"
#include "engine/request_check.h"
#include "support/paths.h"
#include "support/synthetic_model.h"
#include "support/test_util.h"

using namespace tandem;

namespace {

RequestLimits limits() {
  RequestLimits l;
  l.vocab_size = 100;
  l.n_ctx = 64;
  l.kv_positions = 1024;
  return l;
}

Request request(int n_prompt = 4, int max_tokens = 8) {
  Request r;
  r.prompt.assign(n_prompt, 1);
  r.params.max_tokens = max_tokens;
  return r;
}

// The error check_request throws (fails the test when it passes).
RequestError error_of(const Request& r, const RequestLimits& l = limits()) {
  try {
    check_request(r, l);
  } catch (const RequestError& e) {
    return e;
  }
  ADD_FAILURE() << "no error";
  return RequestError("", "");
}

void expect_refused(const Request& r, const std::string& field, const std::string& code,
                    const RequestLimits& l = limits()) {
  const RequestError e = error_of(r, l);
  EXPECT_EQ(e.field, field) << e.what();
  EXPECT_EQ(e.code, code) << e.what();
  EXPECT_NE(std::string(e.what()).find(field == "" ? "" : field.substr(0, 3)), std::string::npos)
      << "the message should name the field: " << e.what();
}

}  // namespace

TEST(RequestCheck, WithinRangePasses) {
  EXPECT_NO_THROW(check_request(request(), limits()));
  Request r = request(4, 60);  // exactly fills the context
  r.params.sampling.temperature = 0;
  r.params.sampling.top_p = 1;
  r.params.sampling.min_p = 1;
  r.params.sampling.penalty_last_n = -1;
  r.params.logprobs = 20;
  r.params.stop_strings.assign(kMaxStopStrings, std::string(kMaxStopStringBytes, 's'));
  EXPECT_NO_THROW(check_request(r, limits()));
}

TEST(RequestCheck, PromptAndRoom) {
  expect_refused(request(0), "prompt", "empty_prompt");
  Request r = request();
  r.prompt[2] = 100;
  expect_refused(r, "prompt", "invalid_value");
  r.prompt[2] = -1;
  expect_refused(r, "prompt", "invalid_value");
  expect_refused(request(64, 1), "prompt", "context_length_exceeded");
  expect_refused(request(4, 61), "max_tokens", "context_length_exceeded");
  expect_refused(request(4, 0), "max_tokens", "invalid_value");
  RequestLimits l = limits();
  l.max_prompt_tokens = 3;
  expect_refused(request(4), "prompt", "prompt_too_long", l);
  // The KV cache bounds a request when it is smaller than the context, and the
  // message says which limit it met.
  l = limits();
  l.kv_positions = 10;
  EXPECT_NE(std::string(error_of(request(4, 7), l).what()).find("KV cache"), std::string::npos);
  // The edge names the prompt's field as its API does.
  l = limits();
  l.prompt_field = "messages";
  EXPECT_EQ(error_of(request(0), l).field, "messages");
}

TEST(RequestCheck, SamplingParameters) {
  auto with = [](auto set) {
    Request r = request();
    set(r.params.sampling);
    return r;
  };
  expect_refused(with([](SamplingParams& s) { s.temperature = -0.1f; }), "temperature",
                 "invalid_value");
  expect_refused(with([](SamplingParams& s) { s.temperature = INFINITY; }), "temperature",
                 "invalid_value");
  expect_refused(with([](SamplingParams& s) { s.top_p = 0; }), "top_p", "invalid_value");
  expect_refused(with([](SamplingParams& s) { s.top_p = 1.01f; }), "top_p", "invalid_value");
  expect_refused(with([](SamplingParams& s) { s.top_k = -2; }), "top_k", "invalid_value");
  expect_refused(with([](SamplingParams& s) { s.min_p = 1.5f; }), "min_p", "invalid_value");
  expect_refused(with([](SamplingParams& s) { s.repetition_penalty = 0; }), "repetition_penalty",
                 "invalid_value");
  expect_refused(with([](SamplingParams& s) { s.penalty_last_n = -2; }), "repeat_last_n",
                 "invalid_value");
  SamplingParams bad;
  bad.temperature = -1;
  EXPECT_THROW(check_sampling(bad), RequestError);
}

TEST(RequestCheck, OutputOptions) {
  Request r = request();
  r.params.logprobs = 21;
  expect_refused(r, "logprobs", "invalid_value");
  RequestLimits l = limits();
  l.max_top_logprobs = 5;
  l.logprobs_field = "top_logprobs";
  r.params.logprobs = 6;
  expect_refused(r, "top_logprobs", "invalid_value", l);
  r = request();
  r.params.stop_strings.assign(kMaxStopStrings + 1, "s");
  expect_refused(r, "stop", "invalid_value");
  r.params.stop_strings = {""};
  expect_refused(r, "stop", "invalid_value");
  r.params.stop_strings = {std::string(kMaxStopStringBytes + 1, 's')};
  expect_refused(r, "stop", "invalid_value");
}

// The engine states its limits; what it refuses to fit is what check_request
// refuses against them.
TEST(RequestCheck, AgainstAnEnginesLimits) {
  test::SyntheticSpec s;
  s.vocab_size = 384;
  auto target = Model::load(test::write_synthetic_gguf(s, test::temp_dir("check") + "/t.gguf"));
  ThreadPool pool(1);
  EngineOptions eo;
  eo.n_ctx = 32;
  Engine e(*target, pool, eo);
  const RequestLimits l = e.limits();
  EXPECT_EQ(l.vocab_size, 384);
  EXPECT_EQ(l.n_ctx, 32);
  EXPECT_GE(l.kv_positions, 32);
  EXPECT_NO_THROW(check_request(request(4, 28), l));
  EXPECT_THROW(check_request(request(4, 29), l), RequestError);
  Request r = request();
  r.prompt[0] = 384;
  EXPECT_THROW(check_request(r, l), RequestError);
}
