#include "server/openai_request.h"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <nlohmann/json.hpp>

#include "io/json_text.h"
#include "server/api_error.h"
#include "server/json_fields.h"
#include "server/openai_tools.h"
#include "structured/json_schema.h"

namespace tandem::server {
namespace {

// Ordered, so that a response_format schema keeps its properties in the order
// the client wrote them (constrained output follows that order).
using json = nlohmann::ordered_json;

[[noreturn]] void unsupported(const std::string& param, const std::string& what) {
  invalid_request(param, fmt::format("{} is not supported by tandem", what), "unsupported_value");
}

// An integer field as an int: beyond int's range it saturates, so that the
// range check (engine/request_check.h) sees a value just as far out of range.
int saturated(int64_t v) { return static_cast<int>(std::clamp<int64_t>(v, INT_MIN, INT_MAX)); }

std::vector<int> token_ids(const json& arr, const std::string& param) {
  std::vector<int> ids;
  for (const auto& v : arr) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > INT_MAX)
      invalid_request(param,
                      fmt::format("'{}' must be a string or an array of token ids "
                                  "(non-negative integers)",
                                  param),
                      "invalid_type");
    ids.push_back(v.get<int>());
  }
  return ids;
}

void parse_prompt(const json& body, ParsedRequest& r) {
  auto it = body.find("prompt");
  if (it == body.end() || it->is_null())
    invalid_request("prompt", "missing required field 'prompt'", "missing_required_parameter");
  const json* p = &*it;
  // A one-element batch is the same as its element.
  if (p->is_array() && p->size() == 1 && ((*p)[0].is_string() || (*p)[0].is_array()))
    p = &(*p)[0];
  else if (p->is_array() && !p->empty() && ((*p)[0].is_string() || (*p)[0].is_array()))
    unsupported("prompt", fmt::format("a batch of {} prompts in one request (send one request "
                                      "per prompt)",
                                      p->size()));
  if (p->is_string()) {
    r.prompt = p->get<std::string>();
    if (r.prompt->empty()) invalid_request("prompt", "'prompt' is empty", "empty_prompt");
  } else if (p->is_array()) {
    r.prompt_ids = token_ids(*p, "prompt");
    if (r.prompt_ids.empty()) invalid_request("prompt", "'prompt' is empty", "empty_prompt");
  } else {
    invalid_request(
        "prompt",
        fmt::format("'prompt' must be a string or an array of token ids, got {}", type_name(*p)),
        "invalid_type");
  }
}

std::string message_content(const json& m, size_t i) {
  const std::string where = fmt::format("messages[{}].content", i);
  auto it = m.find("content");
  if (it == m.end() || it->is_null())
    invalid_request("messages", fmt::format("{} is missing", where), "invalid_value");
  if (it->is_string()) return it->get<std::string>();
  if (!it->is_array())
    invalid_request(
        "messages",
        fmt::format("{} must be a string or an array of text parts, got {}", where, type_name(*it)),
        "invalid_type");
  // Content parts: only text is meaningful to a text model; the parts are joined.
  std::string text;
  for (size_t k = 0; k < it->size(); ++k) {
    const json& part = (*it)[k];
    const std::string pwhere = fmt::format("{}[{}]", where, k);
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string())
      invalid_request("messages", fmt::format("{} must be an object with a string 'type'", pwhere),
                      "invalid_type");
    const std::string type = part["type"].get<std::string>();
    if (type != "text") unsupported("messages", fmt::format("{} of type '{}'", pwhere, type));
    if (!part.contains("text") || !part["text"].is_string())
      invalid_request("messages", fmt::format("{}.text must be a string", pwhere), "invalid_type");
    text += part["text"].get<std::string>();
  }
  return text;
}

void parse_messages(const json& body, ParsedRequest& r) {
  auto it = body.find("messages");
  if (it == body.end() || it->is_null())
    invalid_request("messages", "missing required field 'messages'", "missing_required_parameter");
  if (!it->is_array())
    invalid_request("messages", fmt::format("'messages' must be an array, got {}", type_name(*it)),
                    "invalid_type");
  if (it->empty()) invalid_request("messages", "'messages' is empty", "empty_messages");
  for (size_t i = 0; i < it->size(); ++i) {
    const json& m = (*it)[i];
    if (!m.is_object())
      invalid_request("messages", fmt::format("messages[{}] must be an object", i), "invalid_type");
    if (!m.contains("role") || !m["role"].is_string())
      invalid_request("messages", fmt::format("messages[{}].role must be a string", i),
                      "invalid_type");
    std::string role = m["role"].get<std::string>();
    if (role == "developer") role = "system";  // OpenAI's newer name for the system role
    ChatMessage msg{role, ""};
    const Fields mf(m);
    if (const json* calls = mf.get("tool_calls")) {
      if (role != "assistant")
        invalid_request(
            "messages",
            fmt::format("messages[{}].tool_calls: only assistant messages call tools", i),
            "invalid_value");
      msg.tool_calls = parse_message_tool_calls(*calls, i);
    }
    // An assistant turn that only called tools may leave its content out.
    if (msg.tool_calls.empty() || mf.get("content")) msg.content = message_content(m, i);
    if (role == "tool")
      if (auto id = mf.string("tool_call_id")) msg.tool_call_id = *id;
    r.messages.push_back(std::move(msg));
  }
}

void parse_stop(const Fields& f, ParsedRequest& r) {
  const json* v = f.get("stop");
  if (!v) return;
  if (v->is_string()) {
    r.stop.push_back(v->get<std::string>());
  } else if (v->is_array()) {
    for (const auto& s : *v) {
      if (!s.is_string())
        invalid_request("stop", "'stop' must be a string or an array of strings", "invalid_type");
      r.stop.push_back(s.get<std::string>());
    }
  } else {
    invalid_request(
        "stop",
        fmt::format("'stop' must be a string or an array of strings, got {}", type_name(*v)),
        "invalid_type");
  }
}

void parse_sampling(const Fields& f, ParsedRequest& r) {
  SamplingParams& s = r.sampling;
  s.temperature = kDefaultTemperature;
  if (auto t = f.number("temperature")) s.temperature = static_cast<float>(*t);
  if (auto p = f.number("top_p")) s.top_p = static_cast<float>(*p);
  // -1 means off in vLLM's API, 0 in llama.cpp's: both are off.
  if (auto k = f.integer("top_k")) s.top_k = *k == -1 ? 0 : saturated(*k);
  if (auto p = f.number("min_p")) s.min_p = static_cast<float>(*p);
  if (auto p = f.number("repetition_penalty")) s.repetition_penalty = static_cast<float>(*p);
  if (auto n = f.integer("repeat_last_n")) s.penalty_last_n = saturated(*n);
  if (auto seed = f.integer("seed")) r.seed = static_cast<uint64_t>(*seed);
  if (auto mode = f.string("sampling_mode")) {
    if (*mode == "reproducible")
      r.sampling_mode = SamplingMode::Reproducible;
    else if (*mode == "optimal")
      r.sampling_mode = SamplingMode::Optimal;
    else
      invalid_request(
          "sampling_mode",
          fmt::format("'sampling_mode' must be 'reproducible' or 'optimal', got '{}'", *mode),
          "invalid_value");
  }
}

void parse_response_format(const Fields& f, ParsedRequest& r) {
  const json* rf = f.get("response_format");
  if (!rf) return;
  if (!rf->is_object())
    invalid_request("response_format",
                    fmt::format("'response_format' must be an object, got {}", type_name(*rf)),
                    "invalid_type");
  const json* t = Fields(*rf).get("type");
  if (!t || !t->is_string())
    invalid_request(
        "response_format",
        t ? "'response_format.type' must be a string" : "'response_format.type' is missing",
        t ? "invalid_type" : "missing_required_parameter");
  const std::string type = t->get<std::string>();
  ResponseFormat& out = r.response_format;
  if (type == "text") return;
  if (type == "json_object") {
    out.kind = ResponseFormat::Kind::JsonObject;
    out.grammar = structured::any_json_object_grammar();
    return;
  }
  if (type != "json_schema")
    unsupported("response_format",
                fmt::format("response_format type '{}' (supported: text, json_object, "
                            "json_schema)",
                            type));
  out.kind = ResponseFormat::Kind::JsonSchema;
  auto it = rf->find("json_schema");
  if (it == rf->end() || !it->is_object())
    invalid_request("response_format",
                    "'response_format.json_schema' must be an object with the 'schema'",
                    it == rf->end() ? "missing_required_parameter" : "invalid_type");
  const Fields js(*it);
  const json* name = js.get("name");
  const json* strict = js.get("strict");
  if ((name && !name->is_string()) || (strict && !strict->is_boolean()))
    invalid_request("response_format",
                    "'response_format.json_schema.name' must be a string and 'strict' a boolean",
                    "invalid_type");
  out.name = name ? name->get<std::string>() : "";
  out.strict = strict && strict->get<bool>();
  const json* schema = js.get("schema");
  if (!schema)
    invalid_request("response_format", "'response_format.json_schema.schema' is missing",
                    "missing_required_parameter");
  if (!schema->is_object() && !schema->is_boolean())
    invalid_request("response_format",
                    fmt::format("'response_format.json_schema.schema' must be a JSON schema "
                                "(an object), got {}",
                                type_name(*schema)),
                    "invalid_type");
  try {
    out.grammar = structured::compile_json_schema(*schema);
  } catch (const structured::SchemaError& e) {
    invalid_request("response_format",
                    fmt::format("response_format.json_schema.schema: {}", e.what()),
                    "unsupported_schema");
  }
}

void parse_logprobs(const Fields& f, Endpoint ep, ParsedRequest& r) {
  LogprobsRequest& lp = r.logprobs;
  if (ep == Endpoint::ChatCompletions) {
    lp.enabled = f.boolean("logprobs").value_or(false);
    if (auto t = f.integer("top_logprobs")) {
      lp.top = saturated(*t);
      if (lp.top != 0 && !lp.enabled)
        invalid_request("top_logprobs", "'top_logprobs' requires 'logprobs': true",
                        "invalid_value");
    }
    return;
  }
  // Completions: an integer, the alternatives per position (0: the chosen token only).
  if (const json* v = f.get("logprobs"); v && v->is_boolean())
    invalid_request("logprobs",
                    "'logprobs' on /v1/completions is the number of alternatives per position "
                    "(an integer 0-5)",
                    "invalid_type");
  if (auto n = f.integer("logprobs")) {
    lp.enabled = true;
    lp.top = saturated(*n);
  }
  if (auto t = f.integer("top_logprobs"); t && *t != 0)
    unsupported("top_logprobs", "'top_logprobs' on /v1/completions (send 'logprobs': N)");
}

// OpenAI options with no tandem equivalent: refused unless set to their neutral value.
void refuse_unsupported(const Fields& f, Endpoint ep, ParsedRequest& r) {
  if (auto n = f.integer("n"); n && *n != 1)
    unsupported("n", fmt::format("n = {} (one choice per request; send n requests for more)", *n));
  if (auto b = f.integer("best_of"); b && *b != 1) unsupported("best_of", "best_of > 1");
  if (f.boolean("echo").value_or(false)) unsupported("echo", "echo");
  for (const char* name : {"presence_penalty", "frequency_penalty"})
    if (auto p = f.number(name); p && *p != 0)
      unsupported(name, fmt::format("'{}' (use the 'repetition_penalty' extension)", name));
  if (const json* b = f.get("logit_bias"); b && !b->empty())
    unsupported("logit_bias", "logit_bias");
  if (auto s = f.string("suffix"); s && !s->empty()) unsupported("suffix", "suffix");
  // Tool calling is a chat feature; completions take the neutral values only.
  if (ep == Endpoint::Completions) {
    for (const char* name : {"tools", "functions"})
      if (const json* t = f.get(name); t && !t->empty())
        unsupported(name, fmt::format("'{}' on /v1/completions (tool calling is on "
                                      "/v1/chat/completions)",
                                      name));
    for (const char* name : {"tool_choice", "function_call"})
      if (const json* t = f.get(name); t && !(t->is_string() && (*t == "none" || *t == "auto")))
        unsupported(name, fmt::format("'{}' on /v1/completions (tool calling is on "
                                      "/v1/chat/completions)",
                                      name));
  }
  if (ep == Endpoint::ChatCompletions && f.get("audio")) unsupported("audio", "audio output");
}

}  // namespace

ParsedRequest parse_request(std::string_view body, Endpoint endpoint) {
  std::string error;
  std::optional<json> parsed = try_parse_json<json>(body, &error);
  if (!parsed)
    invalid_request("", fmt::format("the request body is not valid JSON: {}", error),
                    "invalid_json");
  const json& j = *parsed;
  if (!j.is_object())
    invalid_request("", fmt::format("the request body must be a JSON object, got {}", type_name(j)),
                    "invalid_json");
  Fields f(j);
  ParsedRequest r;
  r.endpoint = endpoint;
  r.model = f.string("model").value_or("");
  if (endpoint == Endpoint::Completions)
    parse_prompt(j, r);
  else
    parse_messages(j, r);

  if (auto n = f.integer("max_tokens")) r.max_tokens = saturated(*n);
  if (endpoint == Endpoint::ChatCompletions)
    if (auto n = f.integer("max_completion_tokens")) r.max_tokens = saturated(*n);
  parse_sampling(f, r);
  parse_stop(f, r);
  refuse_unsupported(f, endpoint, r);
  parse_logprobs(f, endpoint, r);
  parse_response_format(f, r);
  if (endpoint == Endpoint::ChatCompletions) r.tools = parse_tools(j);
  if (r.tools.calls_possible() && r.response_format.grammar)
    unsupported("response_format",
                "'response_format' together with tools the model may call (send tool_choice "
                "'none', or one of them)");
  r.ignore_eos = f.boolean("ignore_eos").value_or(false);
  r.speculate = f.boolean("speculate").value_or(true);
  r.stream = f.boolean("stream").value_or(false);
  if (const json* so = f.get("stream_options")) {
    if (!r.stream)
      invalid_request("stream_options", "'stream_options' is only allowed when 'stream' is true",
                      "invalid_value");
    if (!so->is_object())
      invalid_request("stream_options",
                      fmt::format("'stream_options' must be an object, got {}", type_name(*so)),
                      "invalid_type");
    r.include_usage = Fields(*so).boolean("include_usage").value_or(false);
  }
  return r;
}

}  // namespace tandem::server
