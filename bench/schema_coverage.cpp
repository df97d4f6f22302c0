// Compiles JSON Schemas one per input line and says for each whether tandem
// accepts it: the tool behind scripts/schema_coverage.py (JSONSchemaBench's
// declared coverage). Reads lines from stdin, writes one JSON line per input
// line to stdout, flushed, so that a driver can see which schema a slow compile
// is stuck on:
//   {"ok": true, "states": N, "ms": T}
//   {"ok": false, "path": "/properties/x/format", "error": "..."}
// A line that is not JSON is reported as {"ok": false, "path": null, ...}.
//
//   build/bench/tandem_schema_coverage < schemas.jsonl
#include <chrono>
#include <iostream>
#include <string>

#include <nlohmann/json.hpp>

#include "structured/json_schema.h"

int main() {
  using tandem::structured::SchemaError;
  std::ios::sync_with_stdio(false);
  std::string line;
  while (std::getline(std::cin, line)) {
    nlohmann::json out;
    nlohmann::ordered_json schema;
    try {
      schema = nlohmann::ordered_json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      out = {{"ok", false}, {"path", nullptr}, {"error", std::string("not JSON: ") + e.what()}};
      std::cout << out.dump() << std::endl;
      continue;
    }
    const auto t0 = std::chrono::steady_clock::now();
    try {
      auto g = tandem::structured::compile_json_schema(schema);
      const double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      out = {{"ok", true}, {"states", g->n_states()}, {"ms", ms}};
    } catch (const SchemaError& e) {
      out = {{"ok", false}, {"path", e.path}, {"error", e.what()}};
    } catch (const std::exception& e) {  // a bug: anything else must be a SchemaError
      out = {{"ok", false}, {"path", nullptr}, {"error", std::string("INTERNAL: ") + e.what()}};
    }
    std::cout << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << std::endl;
  }
}
