#include "agent_sessions.h"

#include <fmt/format.h>

#include <fstream>
#include <sstream>

#include "core/error.h"

namespace tandem::cli {
namespace {

using nlohmann::json;

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  check(in.good(), "{}: cannot read the file", path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

json function_tool(const std::string& name, const std::string& description, json properties,
                   std::vector<std::string> required) {
  return {
      {"type", "function"},
      {"function",
       {{"name", name},
        {"description", description},
        {"parameters", {{"type", "object"}, {"properties", properties}, {"required", required}}}}}};
}

// The edit the scripted assistant proposes: a comment above the file's first
// four non-empty lines after its leading comment block, quoted as they are.
std::pair<std::string, std::string> scripted_edit(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> lines;
  bool in_header = true;
  for (std::string line; std::getline(in, line) && lines.size() < 4;) {
    const bool comment = line.rfind("//", 0) == 0 || line.rfind("#", 0) == 0;
    if (in_header && (comment || line.empty())) continue;
    in_header = false;
    if (!line.empty()) lines.push_back(line);
  }
  std::string old_text;
  for (const auto& l : lines) old_text += l + "\n";
  return {old_text, "// Reviewed: see the design notes before changing this.\n" + old_text};
}

// One conversation under construction, in OpenAI's format or flattened.
class Conversation {
 public:
  Conversation(bool flatten) : flatten_(flatten) {}
  void system(const std::string& text) {
    messages_.push_back({{"role", "system"}, {"content", text}});
  }
  void user(const std::string& text) { messages_.push_back({{"role", "user"}, {"content", text}}); }
  void assistant(const std::string& text) {
    messages_.push_back({{"role", "assistant"}, {"content", text}});
  }
  // An assistant turn that calls one tool, and the tool's answer.
  void tool_call(const std::string& name, const json& arguments) {
    const std::string id = fmt::format("call_{}", ++calls_);
    last_call_ = id;
    if (flatten_) {
      assistant("<tool_call>\n" + json{{"name", name}, {"arguments", arguments}}.dump() +
                "\n</tool_call>");
      return;
    }
    messages_.push_back(
        {{"role", "assistant"},
         {"content", nullptr},
         {"tool_calls",
          json::array({{{"id", id},
                        {"type", "function"},
                        {"function", {{"name", name}, {"arguments", arguments.dump()}}}}})}});
  }
  void tool_result(const std::string& text) {
    if (flatten_)
      user("<tool_response>\n" + text + "\n</tool_response>");
    else
      messages_.push_back({{"role", "tool"}, {"tool_call_id", last_call_}, {"content", text}});
  }
  // The request for the model's next turn.
  json request() const {
    json body{{"messages", messages_}};
    if (!flatten_) body["tools"] = agent_tools();
    return body;
  }

 private:
  bool flatten_;
  json messages_ = json::array();
  int calls_ = 0;
  std::string last_call_;
};

}  // namespace

json agent_tools() {
  return json::array(
      {function_tool(
           "read_file", "Read a file of the repository",
           {{"path", {{"type", "string"}, {"description", "path from the repository root"}}}},
           {"path"}),
       function_tool("edit_file", "Replace one exact passage of a file",
                     {{"path", {{"type", "string"}}},
                      {"old_text", {{"type", "string"}, {"description", "the passage, verbatim"}}},
                      {"new_text", {{"type", "string"}}}},
                     {"path", "old_text", "new_text"}),
       function_tool("run_command", "Run a shell command in the repository and return its output",
                     {{"command", {{"type", "string"}}}}, {"command"})});
}

std::vector<json> agent_session_requests(const AgentSessionSpec& spec) {
  check(spec.files.size() >= 2, "an agent session edits two files, got {}", spec.files.size());
  const std::string& first = spec.files[0];
  const std::string& second = spec.files[1];
  const std::string first_text = read_text(spec.repo + "/" + first);
  const std::string second_text = read_text(spec.repo + "/" + second);

  std::string system = spec.label + "\n" +
                       "You are a coding agent working in a C++ repository. Use the tools to read "
                       "files, edit them and run commands; make the smallest edit that does what "
                       "the user asks, then run the tests and report briefly.\n";
  if (!spec.context_file.empty())
    system += "\nNotes on the repository:\n" + read_text(spec.repo + "/" + spec.context_file);
  if (spec.flatten_tools)
    system += "\nTools, as JSON:\n" + agent_tools().dump() +
              "\nCall one as <tool_call>{\"name\": NAME, \"arguments\": {...}}</tool_call>; "
              "its result comes back in <tool_response>.\n";

  Conversation c(spec.flatten_tools);
  std::vector<json> requests;
  c.system(system);
  c.user(
      fmt::format("In {}, add a one-line comment above the first declaration saying it was "
                  "reviewed.",
                  first));
  requests.push_back(c.request());  // 1: the model should read the file
  c.tool_call("read_file", {{"path", first}});
  c.tool_result(first_text);
  requests.push_back(c.request());  // 2: ... and propose the edit
  auto [old1, new1] = scripted_edit(first_text);
  c.tool_call("edit_file", {{"path", first}, {"old_text", old1}, {"new_text", new1}});
  c.tool_result(fmt::format("Edited {}: 1 replacement.", first));
  requests.push_back(c.request());  // 3: ... then run the tests
  c.tool_call("run_command", {{"command", "ctest --test-dir build -R unit"}});
  c.tool_result("100% tests passed, 0 tests failed out of 41\nTotal Test time (real) = 212.4 sec");
  requests.push_back(c.request());  // 4: ... and report
  c.assistant(
      fmt::format("I added the comment above the first declaration of {} and the unit "
                  "tests pass.",
                  first));
  c.user(fmt::format("Thanks. Make the same change in {}.", second));
  requests.push_back(c.request());  // 5: read the second file
  c.tool_call("read_file", {{"path", second}});
  c.tool_result(second_text);
  requests.push_back(c.request());  // 6: edit it
  auto [old2, new2] = scripted_edit(second_text);
  c.tool_call("edit_file", {{"path", second}, {"old_text", old2}, {"new_text", new2}});
  c.tool_result(fmt::format("Edited {}: 1 replacement.", second));
  requests.push_back(c.request());  // 7: run the tests or report
  return requests;
}

}  // namespace tandem::cli
