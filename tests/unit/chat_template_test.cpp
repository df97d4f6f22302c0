// Chat templates: the family is recognised from the model's own template and
// rendering matches what the Jinja template produces.
//  - Llama 3: the Hugging Face renderings in ../shared/testdata/chat (text and ids).
//  - ChatML: SmolLM2's and Qwen2.5-Coder's templates read from the real GGUF
//    files, against strings written from reading those templates.
#include "tokenizer/chat_template.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "io/gguf_reader.h"
#include "support/paths.h"
#include "support/test_util.h"
#include "tokenizer/tokenizer.h"

using namespace tandem;
using nlohmann::json;

namespace {

json read_json(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  std::ostringstream ss;
  ss << in.rdbuf();
  return json::parse(ss.str());
}

std::string gguf_template(const std::string& model) {
  GGUFFile f(test::cached_model(model));
  return f.get_string("tokenizer.chat_template");
}

std::string llama3_template() {
  return read_json(test::shared_testdata_dir() + "/tokenizers/llama3/tokenizer_config.json")
      .at("chat_template");
}

const std::vector<ChatMessage> kOneTurn = {{"user", "Hi"}};
const std::vector<ChatMessage> kWithSystem = {{"system", "Be brief."}, {"user", "Hi"}};
const std::vector<ChatMessage> kMultiTurn = {
    {"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello! "}, {"user", "Bye\n"}};

}  // namespace

TEST(ChatTemplate, DetectsFamilies) {
  EXPECT_EQ(detect_chat_template(llama3_template()), ChatTemplateFamily::Llama3);
  EXPECT_EQ(detect_chat_template(gguf_template("smollm2-135m-instruct-q4_1.gguf")),
            ChatTemplateFamily::ChatML);
  EXPECT_EQ(detect_chat_template(gguf_template("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf")),
            ChatTemplateFamily::ChatML);
  EXPECT_STREQ(chat_family_name(ChatTemplateFamily::Llama3), "llama3");
  EXPECT_STREQ(chat_family_name(ChatTemplateFamily::ChatML), "chatml");

  EXPECT_NE(test::error_of([] { detect_chat_template(""); }).find("no chat template"),
            std::string::npos);
  // Phi-3's template (from its vocab GGUF) is neither family: an error, not a guess.
  GGUFFile phi3(test::shared_testdata_dir() + "/tokenizers/llamacpp-vocab/ggml-vocab-phi-3.gguf");
  std::string msg =
      test::error_of([&] { detect_chat_template(phi3.get_string("tokenizer.chat_template")); });
  EXPECT_NE(msg.find("unrecognised chat template"), std::string::npos) << msg;
  EXPECT_NE(msg.find("{{ bos_token }}"), std::string::npos) << msg;  // quotes the template
}

TEST(ChatTemplate, Llama3MatchesHuggingFaceCases) {
  const std::string tmpl = llama3_template();
  auto tok =
      Tokenizer::from_hf_json(test::shared_testdata_dir() + "/tokenizers/llama3/tokenizer.json");
  json cases = read_json(test::shared_testdata_dir() + "/chat/llama3-chat-cases.json");
  ASSERT_FALSE(cases.empty());
  size_t pass = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const json& c = cases[i];
    std::vector<ChatMessage> msgs;
    for (const auto& m : c.at("messages")) msgs.push_back({m.at("role"), m.at("content")});
    std::string text =
        render_chat(ChatTemplateFamily::Llama3, tmpl, msgs, c.at("add_generation_prompt"));
    EXPECT_EQ(text, c.at("text").get<std::string>()) << "case " << i;
    auto ids = tok->encode(text, false, true);
    EXPECT_EQ(ids, c.at("ids").get<std::vector<int>>()) << "case " << i;
    pass += text == c.at("text").get<std::string>() && ids == c.at("ids").get<std::vector<int>>();
  }
  std::cout << "[ conform  ] llama3 chat cases: " << pass << "/" << cases.size() << " match\n";
}

TEST(ChatTemplate, Llama31DateHeader) {
  // The system turn of Llama 3.1's template (abridged): knowledge cutoff and the
  // default date, then the system message (trimmed) or nothing.
  const std::string tmpl =
      "{{- bos_token }}\n{%- if not date_string is defined %}\n    {%- set date_string = \"26 Jul "
      "2024\" %}\n{%- endif %}\n{%- if messages[0]['role'] == 'system' %}\n    {%- set "
      "system_message = messages[0]['content']|trim %}\n    {%- set messages = messages[1:] "
      "%}\n{%- else %}\n    {%- set system_message = \"\" %}\n{%- endif %}\n{{- "
      "\"<|start_header_id|>system<|end_header_id|>\\n\\n\" }}\n{{- \"Cutting Knowledge Date: "
      "December 2023\\n\" }}\n{{- \"Today Date: \" + date_string + \"\\n\\n\" }}\n{{- "
      "system_message }}\n{{- \"<|eot_id|>\" }}\n{%- for message in messages %}\n    {{- "
      "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | "
      "trim + '<|eot_id|>' }}\n{%- endfor %}\n{%- if add_generation_prompt %}\n    {{- "
      "'<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}\n{%- endif %}\n";
  ASSERT_EQ(detect_chat_template(tmpl), ChatTemplateFamily::Llama3);
  const std::string header =
      "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
      "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n";
  EXPECT_EQ(render_chat(ChatTemplateFamily::Llama3, tmpl, kOneTurn, true),
            header +
                "<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
                "<|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(render_chat(ChatTemplateFamily::Llama3, tmpl,
                        {{"system", " Be brief.\n"}, {"user", "Hi"}}, false),
            header + "Be brief.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>");
}

TEST(ChatTemplate, SmolLM2) {
  const std::string tmpl = gguf_template("smollm2-135m-instruct-q4_1.gguf");
  const std::string default_system =
      "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
      "Face<|im_end|>\n";
  EXPECT_EQ(render_chat(ChatTemplateFamily::ChatML, tmpl, kOneTurn, true),
            default_system + "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(render_chat(ChatTemplateFamily::ChatML, tmpl, kOneTurn, false),
            default_system + "<|im_start|>user\nHi<|im_end|>\n");
  EXPECT_EQ(render_chat(ChatTemplateFamily::ChatML, tmpl, kWithSystem, true),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\n");
  // No trimming in ChatML: contents go in as they are.
  EXPECT_EQ(render_chat(ChatTemplateFamily::ChatML, tmpl, kMultiTurn, false),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\nHello! <|im_end|>\n<|im_start|>user\nBye\n<|im_end|>\n");
}

TEST(ChatTemplate, Qwen25Coder) {
  const std::string tmpl = gguf_template("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf");
  const std::string default_system =
      "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
      "assistant.<|im_end|>\n";
  EXPECT_EQ(render_chat(ChatTemplateFamily::ChatML, tmpl, kOneTurn, true),
            default_system + "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(render_chat(ChatTemplateFamily::ChatML, tmpl, kWithSystem, false),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n");
  EXPECT_EQ(render_chat(ChatTemplateFamily::ChatML, tmpl, kMultiTurn, true),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\nHello! <|im_end|>\n<|im_start|>user\nBye\n<|im_end|>\n"
            "<|im_start|>assistant\n");
  // A later system message is an ordinary turn; consecutive tool results share
  // one user turn, each in <tool_response> tags.
  EXPECT_EQ(
      render_chat(
          ChatTemplateFamily::ChatML, tmpl,
          {{"user", "Add"}, {"assistant", "ok"}, {"tool", "4"}, {"tool", "5"}, {"system", "Note"}},
          false),
      default_system +
          "<|im_start|>user\nAdd<|im_end|>\n<|im_start|>assistant\nok<|im_end|>\n"
          "<|im_start|>user\n<tool_response>\n4\n</tool_response>\n<tool_response>\n5\n"
          "</tool_response><|im_end|>\n<|im_start|>system\nNote<|im_end|>\n");

  // Rendered text tokenizes with the special tokens whole.
  GGUFFile f(test::cached_model("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"));
  auto tok = Tokenizer::from_gguf(f);
  auto ids =
      tok->encode(render_chat(ChatTemplateFamily::ChatML, tmpl, kOneTurn, true), false, true);
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids.front(), 151644);  // <|im_start|>
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 151644), 3);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 151645), 2);  // <|im_end|>
}

TEST(ChatTemplate, Errors) {
  const std::string chatml = gguf_template("smollm2-135m-instruct-q4_1.gguf");
  std::string msg =
      test::error_of([&] { render_chat(ChatTemplateFamily::ChatML, chatml, {}, true); });
  EXPECT_NE(msg.find("no messages"), std::string::npos) << msg;
  msg = test::error_of([&] {
    render_chat(ChatTemplateFamily::ChatML, chatml, {{"robot", "x"}}, true);
  });
  EXPECT_NE(msg.find("'robot'"), std::string::npos) << msg;
  // SmolLM2's template has no tool handling; Qwen2.5's has.
  msg = test::error_of([&] {
    render_chat(ChatTemplateFamily::ChatML, chatml, {{"tool", "x"}}, true);
  });
  EXPECT_NE(msg.find("'tool'"), std::string::npos) << msg;
  msg = test::error_of([&] {
    render_chat(ChatTemplateFamily::Llama3, llama3_template(), {{"", "x"}}, true);
  });
  EXPECT_NE(msg.find("role ''"), std::string::npos) << msg;
  // Templates without a tool format refuse tools and calls; the rest is checked
  // against jinja2 (py_test_chat_template_reference).
  const std::string tool = R"({"type": "function", "function": {"name": "f"}})";
  EXPECT_FALSE(tool_call_format(ChatTemplateFamily::ChatML, chatml));
  EXPECT_FALSE(tool_call_format(ChatTemplateFamily::Llama3, llama3_template()));
  msg = test::error_of([&] {
    render_chat(ChatTemplateFamily::ChatML, chatml, {{"user", "x"}}, true, {tool});
  });
  EXPECT_NE(msg.find("cannot render tools"), std::string::npos) << msg;
  ChatMessage call{"assistant", ""};
  call.tool_calls = {{"c", "f", "{}"}};
  msg = test::error_of([&] {
    render_chat(ChatTemplateFamily::Llama3, llama3_template(), {{"user", "x"}, call}, true);
  });
  EXPECT_NE(msg.find("cannot render tool calls"), std::string::npos) << msg;
  // Qwen2.5's template renders them; arguments must be JSON.
  const std::string qwen = gguf_template("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf");
  ASSERT_TRUE(tool_call_format(ChatTemplateFamily::ChatML, qwen));
  call.tool_calls = {{"c", "f", "{oops"}};
  msg = test::error_of([&] {
    render_chat(ChatTemplateFamily::ChatML, qwen, {{"user", "x"}, call}, true, {tool});
  });
  EXPECT_NE(msg.find("not valid JSON"), std::string::npos) << msg;
}

TEST(ChatTemplate, ToolCallFormats) {
  const std::string qwen05 = gguf_template("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf");
  const std::string qwen15 = gguf_template("qwen2.5-coder-1.5b-instruct-q4_k_m.gguf");
  auto f = tool_call_format(ChatTemplateFamily::ChatML, qwen05);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->open, "<tool_call>");
  EXPECT_EQ(f->close, "</tool_call>");
  EXPECT_EQ(f->arguments_key, "arguments");
  EXPECT_TRUE(f->parallel);
  EXPECT_EQ(f->bare_prefix, "");  // its instructions show {"name": ...}
  // The 1.5B's instructions show the call as {{"name": ...}}, and the model writes it so.
  f = tool_call_format(ChatTemplateFamily::ChatML, qwen15);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->bare_prefix, "{");
  EXPECT_EQ(f->bare_suffix, "}");
}
