"""OpenAI tool calling through `tandem serve` on the real Qwen2.5-Coder-1.5B
with its 0.5B sibling as the draft model, through the official `openai` SDK and
one agent framework (openai-agents):

- every tool_choice form (auto, required, a named function, none) and
  parallel_tool_calls false: calls name an offered function and their arguments
  validate against its parameters (jsonschema, an independent validator);
- streamed calls (OpenAI's deltas: index, id and name first, then the arguments
  in pieces) add up to the whole response;
- the same message, calls and finish reason with speculation on and off, greedy
  and seeded-sampled;
- a conversation that carries tool calls and results back in;
- refusals: a schema tandem cannot generate for, an unknown named function, and
  a model whose template has no tools (SmolLM2), each a 400 naming the field;
- openai-agents runs a two-tool coding-agent loop to completion.
"""
import json
import sys
import time

import jsonschema

from test_server import CACHE, ServerProcess, check, finish

QWEN = CACHE / "models" / "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
DRAFT = CACHE / "models" / "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
SMOL = CACHE / "models" / "smollm2-135m-instruct-q4_1.gguf"

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather in a city.",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "maxLength": 40},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["city"]}}}
READ_FILE = {"type": "function", "function": {
    "name": "read_file", "description": "Read a text file.",
    "parameters": {"type": "object", "properties": {"path": {"type": "string", "maxLength": 80}},
                   "required": ["path"]}}}
TOOLS = [WEATHER, READ_FILE]
PARAMS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}

WEATHER_Q = [{"role": "user", "content": "What is the weather like in Paris today?"}]
TWO_CITIES = [{"role": "user", "content": "What is the weather in Paris and in Rome?"}]
HISTORY = [
    {"role": "user", "content": "Show me src/main.cpp."},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function",
         "function": {"name": "read_file", "arguments": "{\"path\": \"src/main.cpp\"}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "int main() { return 0; }"},
]


def summary(choice):
    """What must agree between runs: the content, the calls (not their ids), the finish."""
    m = choice.message
    calls = [(c.function.name, c.function.arguments) for c in (m.tool_calls or [])]
    return m.content, calls, choice.finish_reason


def create(srv, messages, **kw):
    return srv.client.chat.completions.create(model="", messages=messages, tools=TOOLS,
                                              max_tokens=kw.pop("max_tokens", 80), **kw)


def streamed(srv, messages, **kw):
    """The stream reassembled as (content, calls, finish_reason), and whether every
    call's first delta carried its id, type and name."""
    content, calls, finish_reason, well_formed = "", {}, None, True
    for chunk in create(srv, messages, stream=True, **kw):
        if not chunk.choices:
            continue
        c = chunk.choices[0]
        d = c.delta
        if d.content:
            content += d.content
        for tc in d.tool_calls or []:
            if tc.index not in calls:
                well_formed &= bool(tc.id and tc.type == "function" and tc.function.name)
                calls[tc.index] = [tc.function.name, ""]
            calls[tc.index][1] += tc.function.arguments or ""
        finish_reason = c.finish_reason or finish_reason
    return ((content or None) if calls else content, [tuple(calls[k]) for k in sorted(calls)],
            finish_reason), well_formed


def valid_calls(calls):
    for name, args in calls:
        if name not in PARAMS:
            return f"unknown function {name}"
        try:
            jsonschema.validate(json.loads(args), PARAMS[name])
        except (ValueError, jsonschema.ValidationError) as e:
            return f"{name}({args}): {e}"
    return ""


def test_choices(srv):
    cases = {
        "auto": dict(messages=WEATHER_Q),
        "required": dict(messages=TWO_CITIES, tool_choice="required"),
        "named": dict(messages=WEATHER_Q,
                      tool_choice={"type": "function", "function": {"name": "read_file"}}),
        "none": dict(messages=WEATHER_Q, tool_choice="none"),
        "one call only": dict(messages=TWO_CITIES, tool_choice="required",
                              parallel_tool_calls=False),
        "history": dict(messages=HISTORY),
    }
    results = {}
    drafted = 0
    for label, kw in cases.items():
        r = create(srv, temperature=0, **kw)
        s = summary(r.choices[0])
        results[label] = s
        drafted += r.model_extra["tandem"]["drafted"]
        print(f"     {label}: {s}")
        check(valid_calls(s[1]) == "", f"{label}: calls are valid", valid_calls(s[1]))
        check((s[2] == "tool_calls") == bool(s[1]), f"{label}: finish_reason {s[2]} fits the calls")
        # The same with speculation off, and streamed.
        plain = summary(create(srv, temperature=0, extra_body={"speculate": False}, **kw).choices[0])
        check(plain == s, f"{label}: greedy is the same with speculation off", f"{plain} vs {s}")
        st, well_formed = streamed(srv, temperature=0, **kw)
        check(st == s, f"{label}: the stream adds up to the response", f"{st} vs {s}")
        check(well_formed, f"{label}: each streamed call opens with its id, type and name")
    check(drafted > 0, "the draft model drafted for these requests", drafted)
    check(len(results["required"][1]) >= 1, "required: a call", results["required"])
    check(len(results["one call only"][1]) == 1, "parallel_tool_calls false: one call",
          results["one call only"])
    check(results["named"][1] and results["named"][1][0][0] == "read_file",
          "named function: that function is called", results["named"])
    check(not results["none"][1] and results["none"][2] == "stop",
          "none: no call, the text", results["none"])
    check(results["auto"][1] and results["auto"][1][0][0] == "get_weather",
          "auto: the weather question calls get_weather", results["auto"])
    check(bool(results["history"][0] or results["history"][1]),
          "history: a conversation with a call and its result is answered", results["history"])


def test_seeded_sampling(srv):
    kw = dict(messages=TWO_CITIES, tool_choice="required", temperature=0.8, seed=1234)
    a = summary(create(srv, **kw).choices[0])
    b = summary(create(srv, extra_body={"speculate": False}, **kw).choices[0])
    check(a == b, "seeded sampling: the same calls with speculation on and off", f"{a} vs {b}")
    check(valid_calls(a[1]) == "", "seeded sampling: calls are valid", a)


def test_refusals(srv):
    bad_schema = {"type": "function", "function": {
        "name": "f", "parameters": {"type": "object", "properties": {"x": {"not": {}}}}}}
    status, body, _ = srv.request("POST", "/v1/chat/completions", {
        "messages": WEATHER_Q, "tools": [bad_schema], "tool_choice": "required"})
    err = body.get("error", {}) if isinstance(body, dict) else {}
    check(status == 400 and err.get("param") == "tools" and err.get("code") == "unsupported_schema"
          and "tools[0].function.parameters" in err.get("message", ""),
          "a schema tandem cannot generate for: 400 naming the tool", body)
    status, body, _ = srv.request("POST", "/v1/chat/completions", {
        "messages": WEATHER_Q, "tools": TOOLS,
        "tool_choice": {"type": "function", "function": {"name": "fly"}}})
    check(status == 400 and body["error"]["param"] == "tool_choice",
          "an unknown named function: 400 naming tool_choice", body)


def test_agent_framework(srv):
    """openai-agents: a coding agent with two tools, run to completion."""
    from agents import (Agent, ModelSettings, OpenAIChatCompletionsModel, Runner, function_tool,
                        set_tracing_disabled)
    from openai import AsyncOpenAI
    set_tracing_disabled(True)  # no calls to OpenAI's tracing service
    calls = []

    @function_tool
    def read_file(path: str) -> str:
        """Read a text file and return its contents."""
        calls.append(("read_file", path))
        return "def add(a, b):\n    return a - b\n"

    @function_tool
    def write_file(path: str, content: str) -> str:
        """Write text to a file, replacing its contents."""
        calls.append(("write_file", path, content))
        return "ok"

    client = AsyncOpenAI(base_url=srv.base + "/v1", api_key="unused", max_retries=0)
    agent = Agent(name="coder", instructions="You are a coding agent with tools.",
                  tools=[read_file, write_file],
                  model=OpenAIChatCompletionsModel(model="", openai_client=client),
                  model_settings=ModelSettings(temperature=0, max_tokens=200))
    t = time.time()
    result = Runner.run_sync(agent, "Read math_utils.py, fix the bug in add, and write the fixed "
                             "file back.", max_turns=6)
    print(f"     agent: {time.time() - t:.1f} s, calls {calls}, final {result.final_output!r}")
    names = [c[0] for c in calls]
    check(names[:1] == ["read_file"] and "write_file" in names,
          "agent: reads the file, then writes it back", calls)
    writes = [c for c in calls if c[0] == "write_file"]
    check(bool(writes) and "def add" in writes[0][2], "agent: writes the function back", writes)
    check(isinstance(result.final_output, str), "agent: the run completes with a final output")


def test_template_without_tools():
    srv = ServerProcess(model=SMOL, threads=1)
    try:
        status, body, _ = srv.request("POST", "/v1/chat/completions",
                                      {"messages": WEATHER_Q, "tools": TOOLS})
        err = body.get("error", {}) if isinstance(body, dict) else {}
        check(status == 400 and err.get("code") == "tools_unsupported"
              and "smollm2" in err.get("message", ""),
              "SmolLM2 (no tools in its template): 400 naming the model", body)
    finally:
        srv.stop()


def main():
    t0 = time.time()
    for m in (QWEN, DRAFT):
        if not m.exists():
            sys.exit(f"{m} is missing: run `make models`")
    srv = ServerProcess("-d", DRAFT, "--draft-always", model=QWEN, threads=1, startup_timeout=120)
    try:
        test_choices(srv)
        test_seeded_sampling(srv)
        test_refusals(srv)
        test_agent_framework(srv)
    finally:
        srv.stop()
    test_template_without_tools()
    finish(t0, "tool calls: OK")


if __name__ == "__main__":
    main()
