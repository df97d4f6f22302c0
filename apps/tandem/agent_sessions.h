// The scripted coding-agent sessions `tandem bench agent` replays. A session
// reads a file through a tool, proposes an edit to it as a tool call, gets the
// tool's result, runs the tests, reports, is asked for the same change in a
// second file, reads it and edits it: 7 requests, each resending the whole
// conversation so far in OpenAI's format (`tools`, assistant `tool_calls`,
// `role: tool` results). The history is fixed: after each request the
// scripted assistant turn, not the model's answer, goes into the next one, so
// that every run sends the same prompts.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tandem::cli {

struct AgentSessionSpec {
  std::string repo = ".";          // where the files are read from
  std::vector<std::string> files;  // the session edits files[0] then files[1]
  std::string context_file;        // repository notes in the system prompt ("": none)
  std::string label;               // first line of the system prompt: keeps sessions apart
  // Tool turns as plain text (Hermes-style <tool_call> and <tool_response>
  // blocks) with the tools listed in the system prompt, for a server that
  // refuses `tools`.
  bool flatten_tools = false;
};

// The requests of one session, in order: each a chat completion body holding
// "messages" (and "tools" unless flattened), with no sampling fields.
// Throws tandem::Error when a file cannot be read.
std::vector<nlohmann::json> agent_session_requests(const AgentSessionSpec& spec);

// The tools the sessions declare (OpenAI's "tools" array).
nlohmann::json agent_tools();

}  // namespace tandem::cli
