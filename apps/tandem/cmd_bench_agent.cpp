// `tandem bench agent`: scripted multi-turn coding-agent sessions
// (agent_sessions.h) replayed against a running OpenAI-compatible server, each
// request streamed and timed from outside (server/chat_stream_client.h). Per
// turn: time to first token, prompt and cached prompt tokens (how much of the
// resent conversation the prefix cache served), decode tokens/s. Each session
// runs twice on tandem: with speculation (whatever drafter the server was
// started with), then plain (the request extension "speculate": false); with
// --llama-server, once more against that server. A table, then one JSON line.
//
// Every session starts its system prompt with its own label, so that no
// session is served from another's cached prefix. The speculative pass runs
// first: its turn 1 is cold, and its later turns show what the cache saves
// within a session. The plain pass then sends the same prompts (warm, so its
// times to first token are not the cold figures) and, at temperature 0, must
// write the same text: the bench counts the turns where it does not.
#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "agent_sessions.h"
#include "cli_common.h"
#include "commands.h"
#include "core/error.h"
#include "server/chat_stream_client.h"

namespace tandem::cli {
namespace {

using nlohmann::json;

struct Opts {
  std::string url;
  std::string api_key;
  std::string llama_server;
  std::string llama_api_key;
  std::string model;  // "model" field ("": left out)
  int sessions = 2;
  int turns = 7;
  int max_tokens = 128;
  double temperature = 0;
  bool no_tools = false;
  std::string repo = ".";
  std::string files =
      "src/speculative/draft_context.h,src/speculative/generation.cpp,"
      "src/speculative/round_plan.h,src/engine/request_check.h";
  std::string context = "docs/speculative.md";
  std::string json_out;
  double timeout_s = 600;
};

struct TurnResult {
  int turn = 0;
  server::StreamedChat chat;
};

// One pass over one session: its requests sent in order to `client`.
std::vector<TurnResult> run_pass(const server::ChatStreamClient& client, const Opts& o,
                                 const std::vector<json>& requests, bool speculate,
                                 bool tandem_extensions, const std::string& what) {
  std::vector<TurnResult> out;
  for (size_t t = 0; t < requests.size() && static_cast<int>(t) < o.turns; ++t) {
    json body = requests[t];
    if (!o.model.empty()) body["model"] = o.model;
    body["max_tokens"] = o.max_tokens;
    body["temperature"] = o.temperature;
    body["seed"] = 1;
    if (tandem_extensions && !speculate) body["speculate"] = false;
    TurnResult r{static_cast<int>(t) + 1, client.chat(body)};
    if (r.chat.status != 200) {
      const bool tools_refused =
          !o.no_tools && r.chat.status == 400 && (r.chat.error.find("tool") != std::string::npos);
      fail("{}, turn {}: {} answered {}: {}{}", what, r.turn, client.base_url(), r.chat.status,
           r.chat.error, tools_refused ? " (a server without tool calling: try --no-tools)" : "");
    }
    check(r.chat.error.empty(), "{}, turn {}: {}", what, r.turn, r.chat.error);
    out.push_back(std::move(r));
  }
  return out;
}

json turn_json(const TurnResult& r) {
  const auto& c = r.chat;
  return {{"turn", r.turn},
          {"prompt_tokens", c.prompt_tokens},
          {"cached_tokens", c.cached_tokens},
          {"completion_tokens", c.completion_tokens},
          {"ttft_ms", c.ttft_ms},
          {"decode_ms", c.decode_ms()},
          {"decode_tok_s", c.decode_tokens_per_s()},
          {"total_ms", c.total_ms},
          {"tool_calls", c.tool_calls},
          {"finish_reason", c.finish_reason}};
}

// A pass's figures over all sessions: turn 1's time to first token, the later
// turns' as a fraction of their session's turn 1, decode tokens/s over every
// turn (tokens after each turn's first, over the time from first to last delta).
json pass_summary(const std::vector<std::vector<TurnResult>>& sessions) {
  double ttft1 = 0, frac_sum = 0, frac_max = 0, decode_ms = 0;
  int n1 = 0, n_frac = 0;
  int64_t decode_tokens = 0, prompt = 0, cached = 0;
  for (const auto& turns : sessions) {
    if (turns.empty()) continue;
    const double first = turns[0].chat.ttft_ms;
    ttft1 += first;
    ++n1;
    for (const auto& r : turns) {
      const auto& c = r.chat;
      if (r.turn >= 2 && first > 0) {
        const double f = c.ttft_ms / first;
        frac_sum += f;
        frac_max = std::max(frac_max, f);
        ++n_frac;
      }
      if (c.completion_tokens >= 2 && c.decode_ms() > 0) {
        decode_tokens += c.completion_tokens - 1;
        decode_ms += c.decode_ms();
      }
      if (r.turn >= 2) {
        prompt += std::max(c.prompt_tokens, 0);
        cached += std::max(c.cached_tokens, 0);
      }
    }
  }
  return {{"ttft_turn1_ms", n1 ? ttft1 / n1 : 0},
          {"ttft_later_fraction_mean", n_frac ? frac_sum / n_frac : 0},
          {"ttft_later_fraction_max", frac_max},
          {"cached_fraction_later", prompt ? double(cached) / prompt : 0},
          {"decode_tok_s", decode_ms > 0 ? decode_tokens / (decode_ms / 1000) : 0}};
}

void print_pass(const std::string& name, int session, const std::vector<TurnResult>& turns) {
  for (const auto& r : turns) {
    const auto& c = r.chat;
    fmt::print("{:<13} {:>7} {:>4} {:>7} {:>7} {:>6} {:>9.1f} {:>9.1f} {:>6} {}\n", name, session,
               r.turn, c.prompt_tokens, c.cached_tokens, c.completion_tokens, c.ttft_ms,
               c.decode_tokens_per_s(), c.tool_calls, c.finish_reason);
  }
}

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

void run_bench_agent(const Opts& o) {
  check(o.sessions >= 1, "--sessions must be >= 1, got {}", o.sessions);
  check(o.turns >= 1, "--turns must be >= 1, got {}", o.turns);
  check(o.max_tokens >= 1, "--max-tokens must be >= 1, got {}", o.max_tokens);
  const auto files = split_commas(o.files);
  check(files.size() >= 2, "--files: at least two files, got '{}'", o.files);
  const server::ChatStreamClient tandem(o.url, o.api_key, o.timeout_s);
  check(tandem.healthy(), "{}: no healthy server there (GET /health)", tandem.base_url());
  std::unique_ptr<server::ChatStreamClient> llama;
  if (!o.llama_server.empty()) {
    llama =
        std::make_unique<server::ChatStreamClient>(o.llama_server, o.llama_api_key, o.timeout_s);
    check(llama->healthy(), "{}: no healthy server there (GET /health)", llama->base_url());
  }

  // Passes, in the order they run on each session.
  struct Pass {
    std::string name;
    const server::ChatStreamClient* client;
    bool speculate, tandem_extensions;
    std::vector<std::vector<TurnResult>> sessions;
  };
  std::vector<Pass> passes{{"speculative", &tandem, true, true, {}},
                           {"plain", &tandem, false, true, {}}};
  if (llama) passes.push_back({"llama-server", llama.get(), true, false, {}});

  json sessions_json = json::array();
  fmt::print("{:<13} {:>7} {:>4} {:>7} {:>7} {:>6} {:>9} {:>9} {:>6} {}\n", "pass", "session",
             "turn", "prompt", "cached", "tokens", "ttft ms", "decode/s", "calls", "finish");
  for (int s = 0; s < o.sessions; ++s) {
    json sj{{"session", s + 1}};
    for (auto& p : passes) {
      AgentSessionSpec spec;
      spec.repo = o.repo;
      spec.files = {files[s % files.size()], files[(s + 1) % files.size()]};
      spec.context_file = o.context;
      spec.flatten_tools = o.no_tools;
      spec.label = fmt::format("[agent session {}]", s + 1);
      const auto requests = agent_session_requests(spec);
      auto turns = run_pass(*p.client, o, requests, p.speculate, p.tandem_extensions,
                            fmt::format("session {} ({})", s + 1, p.name));
      print_pass(p.name, s + 1, turns);
      json tj = json::array();
      for (const auto& r : turns) tj.push_back(turn_json(r));
      sj[p.name] = tj;
      sj["files"] = spec.files;
      p.sessions.push_back(std::move(turns));
    }
    sessions_json.push_back(sj);
  }

  json summary;
  for (const auto& p : passes) summary[p.name] = pass_summary(p.sessions);
  // Greedy text is the target's with speculation or without: a turn whose two
  // texts differ is a bug (-1: sampled, not compared).
  int mismatches = 0;
  for (size_t s = 0; s < passes[0].sessions.size(); ++s)
    for (size_t t = 0; t < passes[0].sessions[s].size(); ++t)
      mismatches += passes[0].sessions[s][t].chat.content != passes[1].sessions[s][t].chat.content;
  summary["greedy_mismatches"] = o.temperature == 0 ? mismatches : -1;
  if (o.temperature == 0 && mismatches > 0)
    fmt::print("warning: {} turn(s) wrote other text with speculation than without\n", mismatches);
  const double spec_rate = summary["speculative"]["decode_tok_s"].get<double>();
  const double plain_rate = summary["plain"]["decode_tok_s"].get<double>();
  summary["decode_speedup"] = plain_rate > 0 ? spec_rate / plain_rate : 0;
  fmt::print(
      "\nfrom turn 2 on (speculative pass, turn 1 cold): time to first token {:.1f}% of turn 1's "
      "on average ({:.1f}% at "
      "most), {:.0f}% of prompt tokens cached\n",
      100 * summary["speculative"]["ttft_later_fraction_mean"].get<double>(),
      100 * summary["speculative"]["ttft_later_fraction_max"].get<double>(),
      100 * summary["speculative"]["cached_fraction_later"].get<double>());
  fmt::print("decode over the sessions: speculative {:.1f} tok/s, plain {:.1f} tok/s: {:.2f}x\n",
             spec_rate, plain_rate, summary["decode_speedup"].get<double>());
  if (llama)
    fmt::print("llama-server: decode {:.1f} tok/s, turn 1 ttft {:.0f} ms\n",
               summary["llama-server"]["decode_tok_s"].get<double>(),
               summary["llama-server"]["ttft_turn1_ms"].get<double>());

  json out{{"url", tandem.base_url()},
           {"llama_server", o.llama_server},
           {"tools", !o.no_tools},
           {"sessions", o.sessions},
           {"turns", o.turns},
           {"max_tokens", o.max_tokens},
           {"temperature", o.temperature},
           {"context", o.context},
           {"per_session", sessions_json},
           {"summary", summary}};
  if (!o.json_out.empty()) {
    std::ofstream f(o.json_out);
    check(f.good(), "{}: cannot write", o.json_out);
    f << out.dump(2) << "\n";
  }
  fmt::print("\n{}\n", out.dump());
}

}  // namespace

void add_bench_agent_command(CLI::App* bench) {
  auto* cmd = bench->add_subcommand(
      "agent",
      "Scripted multi-turn coding-agent sessions (tools, tool calls, tool results, the whole "
      "conversation resent each turn) against a running server: per turn time to first token, "
      "cached prompt tokens and decode tokens/s, with speculation and plain");
  auto opts = std::make_shared<Opts>();
  Opts& o = *opts;
  cmd->add_option("--url", o.url, "The tandem server (http://HOST:PORT)")->required();
  cmd->add_option("--api-key", o.api_key, "Its API key, if it needs one");
  cmd->add_option("--llama-server", o.llama_server,
                  "Also replay the sessions against this OpenAI-compatible server (e.g. "
                  "llama.cpp's llama-server) for comparison");
  cmd->add_option("--llama-api-key", o.llama_api_key, "The --llama-server's API key");
  cmd->add_option("--model", o.model, "The request's \"model\" (default: left out)");
  cmd->add_option("--sessions", o.sessions, "Sessions, each on other files")->capture_default_str();
  cmd->add_option("--turns", o.turns, "Requests per session (at most 7)")
      ->check(CLI::Range(1, 7))
      ->capture_default_str();
  cmd->add_option("-n,--max-tokens", o.max_tokens, "Tokens generated per turn at most")
      ->capture_default_str();
  cmd->add_option("--temperature", o.temperature, "Sampling temperature (0: greedy)")
      ->capture_default_str();
  cmd->add_flag("--no-tools", o.no_tools,
                "Send tool calls and results as plain text (<tool_call>, <tool_response>) and "
                "the tools in the system prompt, for servers that refuse `tools`");
  cmd->add_option("--repo", o.repo, "Where the sessions' files are read from")
      ->capture_default_str();
  cmd->add_option("--files", o.files,
                  "Comma-separated files the sessions read and edit (session i: files i and "
                  "i+1)")
      ->capture_default_str();
  cmd->add_option("--context", o.context,
                  "A file of repository notes put in the system prompt (\"\": none)")
      ->capture_default_str();
  cmd->add_option("--json", o.json_out, "Also write the JSON result to this file");
  cmd->add_option("--timeout", o.timeout_s, "Seconds one request may take")->capture_default_str();
  cmd->callback([opts] { run_bench_agent(*opts); });
}

}  // namespace tandem::cli
