// Tool calling at the server's edge: `tools`, `tool_choice`,
// `parallel_tool_calls` and the history's tool calls and results parsed, with a
// 400 naming the field for each malformed form; calls read back out of output
// text, whole and streamed in any cut, in OpenAI's response shapes.
#include <gtest/gtest.h>

#include <random>

#include <nlohmann/json.hpp>

#include "server/api_error.h"
#include "server/openai_request.h"
#include "server/openai_response.h"
#include "server/tool_call_output.h"
#include "tokenizer/chat_template.h"

using namespace tandem;
using namespace tandem::server;
using json = nlohmann::json;

namespace {

const json kUser = json::array({{{"role", "user"}, {"content", "hi"}}});
const json kWeather = {{"type", "function"},
                       {"function",
                        {{"name", "get_weather"},
                         {"description", "Weather"},
                         {"parameters",
                          {{"type", "object"},
                           {"properties", {{"city", {{"type", "string"}}}}},
                           {"required", {"city"}}}}}}};
const json kNow = {{"type", "function"}, {"function", {{"name", "now"}}}};

ParsedRequest chat(const json& body) {
  return parse_request(body.dump(), Endpoint::ChatCompletions);
}

ApiError error_of(const json& body) {
  try {
    chat(body);
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "no error for " << body.dump();
  return ApiError(0, "", "");
}

ToolCallFormat hermes() {
  return *tool_call_format(ChatTemplateFamily::ChatML,
                           "<|im_start|><|im_end|> {{- '<tools>' }} <tool_call>");
}
ToolCallFormat llama() {
  return *tool_call_format(ChatTemplateFamily::Llama3,
                           "<|start_header_id|><|end_header_id|><|eot_id|> tool_calls "
                           "Cutting Knowledge Date: December 2023");
}

}  // namespace

TEST(ServerTools, ToolsAndChoiceAreParsed) {
  ParsedRequest r = chat({{"messages", kUser}, {"tools", {kWeather, kNow}}});
  ASSERT_EQ(r.tools.tools.size(), 2u);
  EXPECT_EQ(r.tools.tools[0].name, "get_weather");
  EXPECT_EQ(r.tools.tools[0].parameters["required"][0], "city");
  EXPECT_EQ(json::parse(r.tools.tools[0].definition), kWeather);       // as sent, for the template
  EXPECT_EQ(r.tools.tools[1].parameters, json({{"type", "object"}}));  // no parameters: any object
  EXPECT_EQ(r.tools.choice.kind, ToolChoice::Kind::Auto);              // the default with tools
  EXPECT_TRUE(r.tools.parallel);
  EXPECT_TRUE(r.tools.calls_possible());

  EXPECT_EQ(chat({{"messages", kUser}}).tools.choice.kind, ToolChoice::Kind::None);
  EXPECT_FALSE(chat({{"messages", kUser}, {"tool_choice", "auto"}}).tools.calls_possible());
  auto with_choice = [&](json c) {
    return chat({{"messages", kUser}, {"tools", {kWeather, kNow}}, {"tool_choice", c}}).tools;
  };
  EXPECT_EQ(with_choice("none").choice.kind, ToolChoice::Kind::None);
  EXPECT_FALSE(with_choice("none").calls_possible());
  EXPECT_EQ(with_choice("required").choice.kind, ToolChoice::Kind::Required);
  ToolsRequest named = with_choice({{"type", "function"}, {"function", {{"name", "now"}}}});
  EXPECT_EQ(named.choice.kind, ToolChoice::Kind::Function);
  EXPECT_EQ(named.choice.function, "now");
  EXPECT_FALSE(chat({{"messages", kUser}, {"tools", {kWeather}}, {"parallel_tool_calls", false}})
                   .tools.parallel);
}

TEST(ServerTools, HistoryWithCallsAndResults) {
  json msgs = json::array(
      {{{"role", "user"}, {"content", "weather?"}},
       {{"role", "assistant"},
        {"content", nullptr},
        {"tool_calls",
         {{{"id", "c1"},
           {"type", "function"},
           {"function", {{"name", "get_weather"}, {"arguments", "{\"city\": \"Paris\"}"}}}}}}},
       {{"role", "tool"}, {"tool_call_id", "c1"}, {"content", "sunny"}}});
  ParsedRequest r = chat({{"messages", msgs}, {"tools", {kWeather}}});
  ASSERT_EQ(r.messages.size(), 3u);
  ASSERT_EQ(r.messages[1].tool_calls.size(), 1u);
  EXPECT_EQ(r.messages[1].content, "");
  EXPECT_EQ(r.messages[1].tool_calls[0].id, "c1");
  EXPECT_EQ(r.messages[1].tool_calls[0].name, "get_weather");
  EXPECT_EQ(r.messages[1].tool_calls[0].arguments, "{\"city\": \"Paris\"}");
  EXPECT_EQ(r.messages[2].role, "tool");
  EXPECT_EQ(r.messages[2].tool_call_id, "c1");
  EXPECT_EQ(r.messages[2].content, "sunny");
}

TEST(ServerTools, MalformedToolsAreRefusedByName) {
  auto bad_call = [](json call) {
    return json{
        {"messages",
         {{{"role", "user"}, {"content", "x"}}, {{"role", "assistant"}, {"tool_calls", {call}}}}}};
  };
  const json fn = {{"name", "f"}, {"arguments", "{}"}};
  const std::vector<std::tuple<json, std::string, std::string>> cases = {
      {{{"messages", kUser}, {"tools", kWeather}}, "tools", "must be an array"},
      {{{"messages", kUser}, {"tools", {{{"type", "retrieval"}}}}}, "tools", "'function'"},
      {{{"messages", kUser}, {"tools", {{{"type", "function"}}}}}, "tools", "function is missing"},
      {{{"messages", kUser},
        {"tools", {{{"type", "function"}, {"function", {{"name", "has space"}}}}}}},
       "tools",
       "'has space'"},
      {{{"messages", kUser},
        {"tools", {{{"type", "function"}, {"function", {{"name", "f"}, {"parameters", "x"}}}}}}},
       "tools",
       "parameters must be a JSON Schema"},
      {{{"messages", kUser}, {"tools", {kWeather, kWeather}}}, "tools", "used twice"},
      {{{"messages", kUser}, {"tool_choice", "required"}}, "tool_choice", "requires 'tools'"},
      {{{"messages", kUser}, {"tools", {kWeather}}, {"tool_choice", "always"}},
       "tool_choice",
       "'always'"},
      {{{"messages", kUser},
        {"tools", {kWeather}},
        {"tool_choice", {{"type", "function"}, {"function", {{"name", "nope"}}}}}},
       "tool_choice",
       "'nope'"},
      {{{"messages", kUser}, {"functions", {{{"name", "f"}}}}}, "functions", "send 'tools'"},
      {{{"messages", kUser}, {"tools", {kWeather}}, {"response_format", {{"type", "json_object"}}}},
       "response_format",
       "together with tools"},
      {bad_call({{"function", {{"name", "f"}, {"arguments", "{not json"}}}}), "messages",
       "messages[1].tool_calls[0].function.arguments"},
      {bad_call({{"function", {{"name", "f"}, {"arguments", "[1]"}}}}), "messages",
       "a JSON object"},
      {bad_call({{"function", {{"name", "f"}, {"arguments", json::object()}}}}), "messages",
       "must be a string"},
      {bad_call({{"id", 3}, {"function", fn}}), "messages", ".id must be a string"},
      {{{"messages", {{{"role", "user"}, {"content", "x"}, {"tool_calls", {{{"function", fn}}}}}}}},
       "messages",
       "only assistant messages"},
  };
  for (const auto& [body, param, needle] : cases) {
    ApiError e = error_of(body);
    EXPECT_EQ(e.status, 400) << body.dump();
    EXPECT_EQ(e.param, param) << body.dump() << ": " << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
        << e.what() << " (wanted '" << needle << "')";
  }
  // Completions take only the neutral values.
  try {
    parse_request(json{{"prompt", "x"}, {"tools", {kWeather}}}.dump(), Endpoint::Completions);
    ADD_FAILURE() << "tools on completions";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.param, "tools");
  }
}

TEST(ServerTools, HermesCallsAreReadBack) {
  const ToolCallFormat f = hermes();
  const std::string text =
      "Let me look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
      "\"Paris \\\"x\\\" }\"}}\n</tool_call>\n<tool_call>\n{\"name\":\"now\",\"arguments\":{}}\n"
      "</tool_call>";
  ToolCallOutput out = read_tool_calls(f, text);
  EXPECT_EQ(out.content, "Let me look.\n");
  ASSERT_EQ(out.calls.size(), 2u);
  EXPECT_EQ(out.calls[0].name, "get_weather");
  EXPECT_EQ(out.calls[0].arguments, "{\"city\": \"Paris \\\"x\\\" }\"}");
  EXPECT_TRUE(out.calls[0].complete);
  EXPECT_EQ(out.calls[1].name, "now");
  EXPECT_EQ(out.calls[1].arguments, "{}");
  EXPECT_TRUE(out.calls[1].complete);

  // Cut short: the call is there, not complete.
  out = read_tool_calls(f, text.substr(0, text.find("}}\n</tool_call>")));
  ASSERT_EQ(out.calls.size(), 1u);
  EXPECT_FALSE(out.calls[0].complete);
  EXPECT_EQ(out.calls[0].name, "get_weather");

  // A fenced call, and a code block that is not one.
  out = read_tool_calls(f, "```json\n{\n  \"name\": \"now\",\n  \"arguments\": {}\n}\n```");
  ASSERT_EQ(out.calls.size(), 1u);
  EXPECT_TRUE(out.calls[0].complete);
  EXPECT_EQ(out.content, "");
  out = read_tool_calls(f, "Here:\n```json\n[1, 2]\n```\nDone.");
  EXPECT_TRUE(out.calls.empty());
  EXPECT_EQ(out.content, "Here:\n```json\n[1, 2]\n```\nDone.");
  EXPECT_EQ(out.content_final, out.content.size());
  // Text that may still become a fence is held back from the final content.
  out = read_tool_calls(f, "Sure ``");
  EXPECT_EQ(out.content_final, 5u);
}

TEST(ServerTools, LlamaCallsAreReadBack) {
  const ToolCallFormat f = llama();
  ToolCallOutput out =
      read_tool_calls(f, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Rome\"}}");
  ASSERT_EQ(out.calls.size(), 1u);
  EXPECT_TRUE(out.calls[0].complete);
  EXPECT_EQ(out.calls[0].arguments, "{\"city\": \"Rome\"}");
  out = read_tool_calls(f, "It is sunny {\"name\": 1}");
  EXPECT_TRUE(out.calls.empty());
  EXPECT_EQ(out.content, "It is sunny {\"name\": 1}");
}

// However the text is cut into pieces, the stream's deltas add up to what the
// whole text reads as, and a call's name arrives whole in its first delta.
TEST(ServerTools, StreamedDeltasAddUpInAnyCut) {
  const std::vector<std::pair<ToolCallFormat, std::string>> texts = {
      {hermes(),
       "Checking.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Zü}rich\", "
       "\"n\": [1, {\"a\": \"]\"}]}}\n</tool_call>\n<tool_call>\n{\"name\": \"now\", "
       "\"arguments\": {}}\n</tool_call>"},
      {hermes(), "Sure:\n```json\n{\"name\": \"now\", \"arguments\": {\"x\": 1}}\n```"},
      {hermes(), "A block: ```json\n[1]\n``` and more text with ` and ``"},
      {llama(), "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}"},
      {llama(), "No call here."},
  };
  std::mt19937 rng(5);
  for (const auto& [format, text] : texts) {
    const ToolCallOutput whole = read_tool_calls(format, text);
    for (int trial = 0; trial < 50; ++trial) {
      ToolCallStream stream(format);
      std::string content;
      std::vector<std::string> names, args;
      size_t at = 0;
      while (at < text.size()) {
        const size_t n = std::min<size_t>(text.size() - at, 1 + rng() % 7);
        auto d = stream.push(std::string_view(text).substr(at, n));
        at += n;
        content += d.content;
        for (const auto& c : d.calls) {
          if (c.start) {
            ASSERT_EQ(static_cast<size_t>(c.index), names.size());
            names.push_back(c.name);
            args.emplace_back();
          }
          ASSERT_LT(static_cast<size_t>(c.index), args.size());
          args[c.index] += c.arguments;
        }
      }
      content += stream.finish();
      EXPECT_EQ(content, whole.calls.empty() ? text : whole.content) << text;
      ASSERT_EQ(names.size(), whole.calls.size()) << text;
      for (size_t k = 0; k < names.size(); ++k) {
        EXPECT_EQ(names[k], whole.calls[k].name);
        EXPECT_EQ(args[k], whole.calls[k].arguments);
      }
      EXPECT_EQ(stream.complete_calls(), static_cast<int>(whole.calls.size()));
    }
  }
}

TEST(ServerTools, ResponseShapes) {
  ResponseMeta meta = make_meta(Endpoint::ChatCompletions, "m");
  meta.tool_format = hermes();
  RequestResult r;
  r.finish_reason = FinishReason::Stop;
  r.text = "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>";
  json j = completion_json(meta, r);
  const json& choice = j["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  EXPECT_TRUE(choice["message"]["content"].is_null());
  const json& call = choice["message"]["tool_calls"][0];
  EXPECT_EQ(call["type"], "function");
  EXPECT_EQ(call["function"]["name"], "now");
  EXPECT_EQ(call["function"]["arguments"], "{}");
  EXPECT_EQ(call["id"].get<std::string>().rfind("call_", 0), 0u);

  // Cut short by max_tokens: no call, the text as it is, "length".
  r.finish_reason = FinishReason::Length;
  r.text = "<tool_call>\n{\"name\": \"now\", \"argu";
  j = completion_json(meta, r);
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_FALSE(j["choices"][0]["message"].contains("tool_calls"));
  EXPECT_EQ(j["choices"][0]["message"]["content"], r.text);

  // Streamed: the first delta of a call carries id, type and name; later ones arguments.
  ToolCallStream stream(*meta.tool_format);
  RequestChannel::News news;
  news.text = "<tool_call>\n{\"name\": \"now\", \"arguments\": {\"a";
  news.tokens.resize(1);
  size_t offset = 0;
  json first = text_chunk(meta, news, false, &offset, &stream);
  const json& d1 = first["choices"][0]["delta"];
  EXPECT_TRUE(d1["content"].is_null());
  EXPECT_EQ(d1["tool_calls"][0]["index"], 0);
  EXPECT_EQ(d1["tool_calls"][0]["function"]["name"], "now");
  EXPECT_EQ(d1["tool_calls"][0]["function"]["arguments"], "{\"a");
  EXPECT_TRUE(d1["tool_calls"][0].contains("id"));
  news.text = "\": 1}}\n</tool_call>";
  json second = text_chunk(meta, news, false, &offset, &stream);
  const json& d2 = second["choices"][0]["delta"];
  EXPECT_FALSE(d2["tool_calls"][0].contains("id"));
  EXPECT_EQ(d2["tool_calls"][0]["function"]["arguments"], "\": 1}");
  RequestResult done;
  done.finish_reason = FinishReason::Stop;
  EXPECT_EQ(
      finish_chunk(meta, done, false, stream.complete_calls() > 0)["choices"][0]["finish_reason"],
      "tool_calls");
}
