"""Chat templates with tools, against the reference: every template tandem
renders tools for, through Python's jinja2 set up as Hugging Face's
apply_chat_template sets it up (a sandboxed environment with trim_blocks and
lstrip_blocks, a `tojson` that is json.dumps with ensure_ascii=False, and
raise_exception/strftime_now), on conversations with tools, tool calls and tool
results. Call arguments reach the reference as objects, as OpenAI-compatible
servers hand them to templates. tandem's side is `tandem chat-template`, which
parses each request with the server's own code.

Byte-equal text is required. A conversation the reference refuses (Llama's one
call per turn) must be an error in tandem too; a template without tools
(SmolLM2's) must refuse tools with an error that says so, where jinja2 would
silently leave them out."""
import datetime
import json
import os
import subprocess
import sys
from pathlib import Path

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

TANDEM = os.environ.get("TANDEM_BIN", "build/tandem")
SOURCE = Path(os.environ.get("TANDEM_SOURCE_DIR", ".")).resolve()
CACHE = Path(os.environ.get("TANDEM_CACHE", Path.home() / ".cache" / "tandem"))
MODELS = CACHE / "models"
TEMPLATES = SOURCE / "tests" / "data" / "chat_templates"

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather in a city; température in °C or °F",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "e.g. <Paris> & 'Rome'"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        "days": {"type": "integer", "minimum": 1, "maximum": 7}},
        "required": ["city"]}}}
READ_FILE = {"type": "function", "function": {
    "name": "read_file", "description": "Read a file",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                   "required": ["path"]}}}
NO_PARAMS = {"type": "function", "function": {"name": "now"}}


def call(id_, name, args):
    return {"id": id_, "type": "function",
            "function": {"name": name, "arguments": json.dumps(args, ensure_ascii=False)}}


# (name, request body, whether the Llama templates can render it)
CASES = [
    ("no tools", {"messages": [{"role": "user", "content": "Hi"}]}, True),
    ("tools, one user turn", {"messages": [{"role": "user", "content": " Weather in Paris? "}],
                              "tools": [WEATHER, READ_FILE]}, True),
    ("tools with a system message", {"messages": [
        {"role": "system", "content": "You are terse.\n"},
        {"role": "user", "content": "Weather in Paris?"}], "tools": [WEATHER, NO_PARAMS]}, True),
    ("a call and its result", {"messages": [
        {"role": "user", "content": "Weather in Zürich, 3 days?"},
        {"role": "assistant", "content": None, "tool_calls": [
            call("c1", "get_weather", {"city": "Zürich", "days": 3, "ratio": 0.5,
                                       "big": 1e16, "small": 1.5e-07, "whole": 2.0,
                                       "nested": {"a": [1, {"b": None}], "e": {}, "l": []},
                                       "quote": "say \"hi\"\n\ttab \u0001"})]},
        {"role": "tool", "tool_call_id": "c1", "content": "{\"temp\": 21, \"sky\": \"clear\"}"},
        {"role": "assistant", "content": "It is 21 °C and clear."},
        {"role": "user", "content": "Thanks"}], "tools": [WEATHER]}, True),
    ("a call with content, then the result", {"messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Read main.cpp"},
        {"role": "assistant", "content": "Reading it.",
         "tool_calls": [call("c2", "read_file", {"path": "src/main.cpp"})]},
        {"role": "tool", "tool_call_id": "c2", "content": "int main() { return 0; }"}],
        "tools": [READ_FILE]}, True),
    ("parallel calls and results", {"messages": [
        {"role": "user", "content": "Weather in Paris and Rome?"},
        {"role": "assistant", "tool_calls": [call("a", "get_weather", {"city": "Paris"}),
                                             call("b", "get_weather", {"city": "Rome"})]},
        {"role": "tool", "tool_call_id": "a", "content": "sunny"},
        {"role": "tool", "tool_call_id": "b", "content": "rainy"}], "tools": [WEATHER]}, False),
    ("history with calls, no tools offered now", {"messages": [
        {"role": "user", "content": "Read a.txt"},
        {"role": "assistant", "content": "",
         "tool_calls": [call("c3", "read_file", {"path": "a.txt"})]},
        {"role": "tool", "tool_call_id": "c3", "content": "hello"},
        {"role": "user", "content": "And now?"}]}, True),
]


def hf_environment():
    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.datetime.now().strftime(fmt)
    return env


def reference(template, body, bos):
    messages = []
    for m in body["messages"]:
        m = dict(m)
        if "tool_calls" in m:  # arguments as objects, as servers pass them to templates
            m["tool_calls"] = [{**c, "function": {**c["function"], "arguments": json.loads(
                c["function"]["arguments"])}} for c in m["tool_calls"]]
        messages.append(m)
    kwargs = {"tools": body["tools"]} if "tools" in body else {}
    try:
        return hf_environment().from_string(template).render(
            messages=messages, add_generation_prompt=True, bos_token=bos, eos_token="", **kwargs)
    except jinja2.exceptions.TemplateError as e:
        return {"error": str(e)}


def tandem(source_args, bodies):
    r = subprocess.run([TANDEM, "chat-template", *source_args],
                       input="".join(json.dumps(b) + "\n" for b in bodies),
                       capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"FAILED: tandem chat-template {source_args}: {r.stderr.strip()}")
    return [json.loads(line) for line in r.stdout.splitlines()]


def gguf_template(path):
    import gguf
    field = gguf.GGUFReader(str(path)).fields["tokenizer.chat_template"]
    return bytes(field.parts[field.data[0]]).decode("utf-8")


def main():
    sources = []  # (label, tandem args, template text, bos, llama-style)
    for name in ("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"):
        path = MODELS / name
        if not path.exists():
            sys.exit(f"FAILED: {path} is missing (run `make models`)")
        sources.append((name, ["-m", str(path)], gguf_template(path), "<|endoftext|>", False))
    for name in ("llama-3.2.jinja", "llama-3.3.jinja"):
        path = TEMPLATES / name
        sources.append((name, ["--template", str(path)], path.read_text(), "<|begin_of_text|>",
                        True))

    failures = []
    bodies = [body for _, body, _ in CASES]
    for label, args, template, bos, llama in sources:
        got = tandem(args, bodies)
        matched = 0
        for (case, body, llama_ok), mine in zip(CASES, got):
            want = reference(template, body, bos)
            if llama and not llama_ok:
                ok = isinstance(want, dict) and isinstance(mine, dict)
            else:
                ok = want == mine
            matched += ok
            if not ok:
                failures.append(f"{label}: {case}")
                print(f"--- {label}: {case}\nreference: {json.dumps(want)}\ntandem:    "
                      f"{json.dumps(mine)}")
        print(f"{label}: {matched}/{len(CASES)} conversations match the jinja2 reference")

    # A template that cannot express tools refuses them, naming why.
    smol = MODELS / "smollm2-135m-instruct-q4_1.gguf"
    out = tandem(["-m", str(smol)], [bodies[1], bodies[0]])
    if not (isinstance(out[0], dict) and "cannot render tools" in out[0]["error"]):
        failures.append(f"smollm2 with tools: {out[0]}")
    if not isinstance(out[1], str):
        failures.append(f"smollm2 without tools: {out[1]}")
    print(f"smollm2: tools refused: {out[0]}")

    if failures:
        print("FAILED: " + "; ".join(failures))
        sys.exit(1)
    print("OK")


if __name__ == "__main__":
    main()
