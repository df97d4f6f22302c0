"""The malformed-file matrix: every way tandem's inputs can be broken must end
in one `error:` line naming the file and the field at fault and a non-zero
exit, within a time limit and under `ulimit -v` (RLIMIT_AS; in an ASan build,
which cannot run under it, ASan's limit on each allocation): nothing may be
sized by a corrupt count before it is checked.

  GGUF: the real SmolLM2 model cut at every section boundary (after the header
    fields, after each metadata entry, after each tensor info, at the start of
    the data and at the end of sampled tensors), and a small GGUF with each
    field corrupted (magic, version, counts, lengths, value and element types,
    bools, nesting, alignment, dimensions, types, offsets, duplicates).
  Hugging Face directories: a small model whose model.safetensors, config.json,
    shard index, tokenizer.json, tokenizer_config.json and
    generation_config.json are each damaged or inconsistent with the others.

Each case runs `tandem info -m PATH` (a full load: configuration, weights,
tokenizer, chat template)."""
import json
import os
import resource
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

TANDEM = os.environ.get("TANDEM_BIN", "build/tandem")
CACHE = Path(os.environ.get("TANDEM_CACHE", Path.home() / ".cache" / "tandem"))
MODEL = CACHE / "models" / "smollm2-135m-instruct-q4_1.gguf"
MEMORY_LIMIT = 1 << 30   # bytes of address space per run
TIME_LIMIT = 30          # seconds per run

failures = []
counts = {"cases": 0, "slowest_s": 0.0}


def built_with_asan(binary):
    """AddressSanitizer reserves terabytes of shadow address space at startup, so
    an ASan build cannot run under RLIMIT_AS at all."""
    try:
        libs = subprocess.run(["ldd", binary], capture_output=True, text=True).stdout
    except OSError:
        return False
    return "libasan" in libs


# The memory bound: RLIMIT_AS on the whole process, or under ASan its allocator's
# own limit on each allocation (one over it aborts the run with a report).
ASAN = built_with_asan(TANDEM)
MEMORY_BOUND = (f"each allocation under {MEMORY_LIMIT >> 20} MiB (ASan)" if ASAN
                else f"each under RLIMIT_AS {MEMORY_LIMIT >> 20} MiB")
RUN_ENV = dict(os.environ)
if ASAN:
    RUN_ENV["ASAN_OPTIONS"] = ":".join(
        filter(None, [os.environ.get("ASAN_OPTIONS", ""),
                      f"max_allocation_size_mb={MEMORY_LIMIT >> 20}",
                      "allocator_may_return_null=0"]))


def limit_memory():
    if not ASAN:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def run_info(path):
    t0 = time.time()
    try:
        r = subprocess.run([TANDEM, "info", "-m", str(path)], capture_output=True, text=True,
                           timeout=TIME_LIMIT, preexec_fn=limit_memory, env=RUN_ENV)
    except subprocess.TimeoutExpired:
        return None, "", time.time() - t0
    return r.returncode, r.stderr, time.time() - t0


def expect_error(label, path, words):
    """`tandem info -m path` must fail with one error line containing every word."""
    code, err, took = run_info(path)
    counts["cases"] += 1
    counts["slowest_s"] = max(counts["slowest_s"], took)
    lines = err.strip().splitlines()
    ok = (code is not None and code > 0 and len(lines) == 1 and lines[0].startswith("error: ")
          and all(w in lines[0] for w in words))
    if not ok:
        failures.append(label)
        print(f"FAIL {label}: exit {code} after {took:.1f} s, stderr {err.strip()[:400]!r}, "
              f"expected {words}")
    return ok


def expect_loads(label, path):
    code, err, _ = run_info(path)
    if code != 0:
        failures.append(label)
        print(f"FAIL {label}: the intact file does not load under the limits: {err.strip()}")


# ---- GGUF layout -----------------------------------------------------------

SCALAR_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
# GGML type id -> (elements per block, bytes per block)
BLOCKS = {0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24),
          8: (32, 34), 10: (256, 84), 11: (256, 110), 12: (256, 144), 13: (256, 176),
          14: (256, 210), 30: (1, 2)}


class Layout:
    """Offsets of every field of a GGUF file."""

    def __init__(self, data):
        self.data, self.off = data, 0
        self.fields = {}  # name -> offset
        assert data[:4] == b"GGUF"
        self.off = 4
        self.version = self.u32()
        self.n_tensors = self.u64()
        self.n_kv = self.u64()
        self.header_end = self.off
        self.kvs = []  # dicts: key, start, type_at, value_at, end, type
        alignment = 32
        for _ in range(self.n_kv):
            start = self.off
            key = self.string()
            type_at = self.off
            t = self.u32()
            value_at = self.off
            self.value(t)
            self.kvs.append(dict(key=key, start=start, type_at=type_at, value_at=value_at,
                                 end=self.off, type=t))
            if key == "general.alignment":
                alignment = struct.unpack_from("<I", data, value_at)[0]
        self.tensors = []  # dicts: name, start, dims_at, n_dims, type_at, offset_at, end, ...
        for _ in range(self.n_tensors):
            start = self.off
            name = self.string()
            ndims_at = self.off
            n_dims = self.u32()
            dims = [self.u64() for _ in range(n_dims)]
            type_at = self.off
            ttype = self.u32()
            offset_at = self.off
            offset = self.u64()
            per_block, block_bytes = BLOCKS[ttype]
            nbytes = int(np.prod(dims)) // per_block * block_bytes
            self.tensors.append(dict(name=name, start=start, ndims_at=ndims_at, n_dims=n_dims,
                                     dims_at=ndims_at + 4, type_at=type_at, offset_at=offset_at,
                                     offset=offset, nbytes=nbytes, end=self.off))
        self.info_end = self.off
        self.data_start = (self.off + alignment - 1) // alignment * alignment

    def u32(self):
        v = struct.unpack_from("<I", self.data, self.off)[0]
        self.off += 4
        return v

    def u64(self):
        v = struct.unpack_from("<Q", self.data, self.off)[0]
        self.off += 8
        return v

    def string(self):
        n = self.u64()
        s = self.data[self.off:self.off + n].decode("utf-8", "replace")
        self.off += n
        return s

    def value(self, t):
        if t in SCALAR_SIZES:
            self.off += SCALAR_SIZES[t]
        elif t == 8:
            self.string()
        elif t == 9:
            et, n = self.u32(), self.u64()
            if et in SCALAR_SIZES:
                self.off += SCALAR_SIZES[et] * n
            else:
                for _ in range(n):
                    self.value(et)
        else:
            raise ValueError(f"type {t}")


def truncation_matrix(tmp):
    """SmolLM2 cut at every section boundary."""
    if not MODEL.exists():
        sys.exit(f"{MODEL} is missing: run `make models`")
    src = tmp / "smollm2.gguf"
    shutil.copyfile(MODEL, src)
    expect_loads("SmolLM2 intact", src)
    size = src.stat().st_size
    with open(src, "rb") as f:
        head = f.read(8 << 20)
    lay = Layout(head)
    cuts = []  # (offset, words the error must contain)
    cuts += [(0, ["bad magic"]), (4, ["version"]), (8, ["tensor count"]),
             (16, ["metadata count"])]
    first_key = "metadata entry 0 of" if lay.n_kv else "tensor info 0 of"
    cuts.append((lay.header_end, [first_key]))
    for i, kv in enumerate(lay.kvs):
        nxt = (f"metadata entry {i + 1} of" if i + 1 < lay.n_kv else "tensor info 0 of")
        cuts.append((kv["end"], [nxt]))
        cuts.append((kv["type_at"], [f"metadata '{kv['key']}' value type"]))
        cuts.append((kv["value_at"], [f"metadata '{kv['key']}'"]))
    for i, t in enumerate(lay.tensors):
        if i + 1 < len(lay.tensors):
            cuts.append((t["end"], [f"tensor info {i + 1} of"]))
        if i % 16 == 0:  # inside the info: a sample
            cuts.append((t["ndims_at"], [f"tensor '{t['name']}' dimension count"]))
            cuts.append((t["offset_at"], [f"tensor '{t['name']}' offset"]))
    # The data section: no data at all, then the end of sampled tensors minus one
    # byte (each copy of a prefix this long is written, so a sample).
    by_end = sorted(lay.tensors, key=lambda t: t["offset"] + t["nbytes"])
    first_in_data = min(lay.tensors, key=lambda t: t["offset"])
    cuts.append((lay.info_end, [f"tensor '{lay.tensors[0]['name']}'", "extends past the end"]))
    cuts.append((lay.data_start, [f"tensor '{first_in_data['name']}'", "extends past the end"]))
    for t in by_end[:: max(1, len(by_end) // 8)] + [by_end[-1]]:
        end = lay.data_start + t["offset"] + t["nbytes"]
        cuts.append((end - 1, [f"tensor '{t['name']}'", "extends past the end"]))
    # Cut the copy down, largest prefix first, so that each cut is one truncate().
    cuts = sorted(set((o, tuple(w)) for o, w in cuts), key=lambda c: -c[0])
    cut_path = tmp / "cut.gguf"
    shutil.copyfile(src, cut_path)
    for offset, words in cuts:
        assert offset < size
        # Counts that the bytes left cannot hold are refused before anything is
        # read or allocated (an entry takes at least 12 bytes, a tensor info 24).
        left = offset - lay.header_end
        if offset >= lay.header_end and lay.n_kv > left // 12:
            words = ("metadata count", "exceeds the file size")
        elif offset >= lay.header_end and lay.n_tensors > left // 24:
            words = ("tensor count", "exceeds the file size")
        os.truncate(cut_path, offset)
        expect_error(f"SmolLM2 cut at {offset}", cut_path, ["cut.gguf", *words])
    print(f"GGUF truncations: {len(cuts)} cuts of the real SmolLM2 file "
          f"({lay.n_kv} metadata entries, {lay.n_tensors} tensor infos)")


# ---- A small GGUF, every field corrupted -------------------------------------

def gguf_bytes(kvs, tensors, alignment=32):
    """kvs: [(key, type, raw value bytes)]; tensors: [(name, dims, type, data bytes)]."""
    def s(x):
        b = x.encode()
        return struct.pack("<Q", len(b)) + b
    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs))
    for key, t, raw in kvs:
        out += s(key) + struct.pack("<I", t) + raw
    offset, blobs = 0, []
    for name, dims, t, data in tensors:
        out += s(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
        out += struct.pack("<IQ", t, offset)
        blobs.append((offset, data))
        offset += (len(data) + alignment - 1) // alignment * alignment
    out += b"\0" * ((-len(out)) % alignment)
    data = bytearray(offset)
    for off, blob in blobs:
        data[off:off + len(blob)] = blob
    return out + bytes(data)


def small_gguf(**replace):
    """A loadable llama GGUF; `replace` maps keys to (type, raw value) to put instead."""
    def u32(v):
        return (4, struct.pack("<I", v))

    def f32(v):
        return (6, struct.pack("<f", v))

    def string(v):
        b = v.encode()
        return (8, struct.pack("<Q", len(b)) + b)

    d, ff, vocab = 32, 64, 64
    kvs = [("general.architecture", *string("llama")), ("general.alignment", *u32(32)),
           ("llama.block_count", *u32(1)), ("llama.context_length", *u32(64)),
           ("llama.embedding_length", *u32(d)), ("llama.feed_forward_length", *u32(ff)),
           ("llama.attention.head_count", *u32(4)), ("llama.attention.head_count_kv", *u32(4)),
           ("llama.attention.layer_norm_rms_epsilon", *f32(1e-5)),
           ("llama.vocab_size", *u32(vocab)),
           ("test.flag", 7, b"\x01"),
           ("test.list", 9, struct.pack("<IQ", 5, 3) + struct.pack("<iii", 1, 2, 3)),
           ("test.nested", 9, struct.pack("<IQ", 9, 1) + struct.pack("<IQ", 5, 1) + b"\0" * 4)]
    kvs = [(k, *replace[k]) if k in replace else (k, t, raw) for k, t, raw in kvs]
    shapes = [("token_embd.weight", [d, vocab]), ("output_norm.weight", [d]),
              ("blk.0.attn_norm.weight", [d]), ("blk.0.attn_q.weight", [d, d]),
              ("blk.0.attn_k.weight", [d, d]), ("blk.0.attn_v.weight", [d, d]),
              ("blk.0.attn_output.weight", [d, d]), ("blk.0.ffn_norm.weight", [d]),
              ("blk.0.ffn_gate.weight", [d, ff]), ("blk.0.ffn_up.weight", [d, ff]),
              ("blk.0.ffn_down.weight", [ff, d])]
    rng = np.random.default_rng(0)
    tensors = [(n, dims, 0, rng.standard_normal(int(np.prod(dims))).astype(np.float32).tobytes())
               for n, dims in shapes]
    return gguf_bytes(kvs, tensors)


def field_matrix(tmp):
    good = small_gguf()
    lay = Layout(good)
    (tmp / "small.gguf").write_bytes(good)
    expect_loads("small GGUF intact", tmp / "small.gguf")
    kv = {k["key"]: k for k in lay.kvs}
    t = {x["name"]: x for x in lay.tensors}
    huge = 1 << 62

    def patched(edits):
        b = bytearray(good)
        for off, fmt, v in edits:
            if fmt == "bytes":
                b[off:off + len(v)] = v
            else:
                struct.pack_into(fmt, b, off, v)
        return bytes(b)

    q = t["blk.0.attn_q.weight"]
    cases = [
        ("magic", [(0, "bytes", b"GGUX")], ["bad magic"]),
        ("version", [(4, "<I", 99)], ["version 99"]),
        ("tensor count 2^62", [(8, "<Q", huge)], ["tensor count"]),
        ("metadata count 2^62", [(16, "<Q", huge)], ["metadata count"]),
        ("key length 2^62", [(kv["general.architecture"]["start"], "<Q", huge)],
         ["metadata entry 0 of", "metadata key"]),
        ("value type 99", [(kv["llama.block_count"]["type_at"], "<I", 99)],
         ["llama.block_count", "unknown value type 99"]),
        ("string length 2^62", [(kv["general.architecture"]["value_at"], "<Q", huge)],
         ["general.architecture", "value needs"]),
        ("array element type 99", [(kv["test.list"]["value_at"], "<I", 99)],
         ["test.list", "unknown array element type 99"]),
        ("array length 2^62", [(kv["test.list"]["value_at"] + 4, "<Q", huge)],
         ["test.list", "array length"]),
        ("bool 2", [(kv["test.flag"]["value_at"], "<B", 2)], ["test.flag", "invalid bool value 2"]),
        ("nested array depth", None, ["test.deep", "nested too deeply"]),
        ("alignment 3", [(kv["general.alignment"]["value_at"], "<I", 3)],
         ["general.alignment 3"]),
        ("duplicate key", [(kv["test.list"]["start"] + 8, "bytes", b"test.flag")],
         ["duplicate metadata key 'test.flag'"]),
        ("block_count out of int range", None, ["llama.block_count", "out of range"]),
        ("n_dims 0", [(q["ndims_at"], "<I", 0)], ["blk.0.attn_q.weight", "dimension count 0"]),
        ("n_dims 5", [(q["ndims_at"], "<I", 5)], ["blk.0.attn_q.weight", "dimension count 5"]),
        ("dimension 0", [(q["dims_at"], "<Q", 0)], ["blk.0.attn_q.weight", "invalid dimension"]),
        ("dimension 2^41", [(q["dims_at"], "<Q", 1 << 41)],
         ["blk.0.attn_q.weight", "invalid dimension"]),
        ("dimensions whose product overflows", [(q["dims_at"], "<Q", 1 << 40),
                                                (q["dims_at"] + 8, "<Q", 1 << 40)],
         ["blk.0.attn_q.weight", "elements"]),
        ("tensor type 99", [(q["type_at"], "<I", 99)], ["blk.0.attn_q.weight", "type id 99"]),
        ("offset misaligned", [(q["offset_at"], "<Q", q["offset"] + 4)],
         ["blk.0.attn_q.weight", "not aligned"]),
        ("offset past the end", [(q["offset_at"], "<Q", 1 << 40)],
         ["blk.0.attn_q.weight", "extends past the end"]),
        ("duplicate tensor name", [(t["blk.0.attn_k.weight"]["start"] + 8, "bytes",
                                    b"blk.0.attn_q.weight")], ["duplicate tensor name"]),
        ("head count implausible", [(kv["llama.attention.head_count"]["value_at"], "<I", 1 << 20)],
         ["head count", "implausibly large"]),
        ("tensor shape against the config", [(kv["llama.embedding_length"]["value_at"], "<I", 48)],
         ["token_embd.weight", "shape"]),
    ]
    for label, edits, words in cases:
        path = tmp / "field.gguf"
        if label == "nested array depth":
            deep = struct.pack("<IQ", 5, 0)
            for _ in range(6):
                deep = struct.pack("<IQ", 9, 1) + deep
            kvs_raw = gguf_bytes([("test.deep", 9, deep)], [])
            path.write_bytes(kvs_raw)
        elif label == "block_count out of int range":
            # A uint64 of 2^40: a size that must not be truncated to an int.
            path.write_bytes(small_gguf(**{"llama.block_count": (10, struct.pack("<Q", 1 << 40))}))
        else:
            path.write_bytes(patched(edits))
        expect_error(f"GGUF {label}", path, ["field.gguf", *words])
    print(f"GGUF fields: {len(cases)} corruptions")


# ---- Hugging Face directories ---------------------------------------------------

def safetensors_bytes(tensors, header_extra=None):
    header, offset, blobs = {}, 0, []
    for name, arr in tensors.items():
        raw = arr.astype(np.float32).tobytes()
        header[name] = {"dtype": "F32", "shape": list(arr.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
        blobs.append(raw)
    header.update(header_extra or {})
    text = json.dumps(header).encode()
    text += b" " * ((-len(text)) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(blobs)


def raw_safetensors(header_text, data=b""):
    h = header_text.encode() if isinstance(header_text, str) else header_text
    return struct.pack("<Q", len(h)) + h + data


D, FF, VOCAB = 32, 64, 64
CONFIG = {"architectures": ["LlamaForCausalLM"], "hidden_size": D, "intermediate_size": FF,
          "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 4,
          "vocab_size": VOCAB, "max_position_embeddings": 64, "rms_norm_eps": 1e-5,
          "tie_word_embeddings": True}


def hf_tensors():
    rng = np.random.default_rng(1)
    shapes = {"model.embed_tokens.weight": (VOCAB, D), "model.norm.weight": (D,),
              "model.layers.0.input_layernorm.weight": (D,),
              "model.layers.0.self_attn.q_proj.weight": (D, D),
              "model.layers.0.self_attn.k_proj.weight": (D, D),
              "model.layers.0.self_attn.v_proj.weight": (D, D),
              "model.layers.0.self_attn.o_proj.weight": (D, D),
              "model.layers.0.post_attention_layernorm.weight": (D,),
              "model.layers.0.mlp.gate_proj.weight": (FF, D),
              "model.layers.0.mlp.up_proj.weight": (FF, D),
              "model.layers.0.mlp.down_proj.weight": (D, FF)}
    return {n: rng.standard_normal(s).astype(np.float32) for n, s in shapes.items()}


def tokenizer_json(n=VOCAB):
    # A byte-level BPE vocabulary of n printable characters, no merges.
    vocab = {chr(33 + i): i for i in range(n)}
    return {"version": "1.0", "added_tokens": [], "normalizer": None,
            "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True},
            "post_processor": None, "decoder": {"type": "ByteLevel"},
            "model": {"type": "BPE", "vocab": vocab, "merges": []}}


def hf_dir(tmp, name, files=None, drop=()):
    """A small, loadable HF model directory with `files` (name -> bytes or JSON) replaced."""
    d = tmp / name
    if d.exists():
        shutil.rmtree(d)
    d.mkdir()
    base = {"config.json": CONFIG, "model.safetensors": safetensors_bytes(hf_tensors()),
            "tokenizer.json": tokenizer_json(),
            "tokenizer_config.json": {"bos_token": "!", "eos_token": "\"",
                                      "chat_template": "<|im_start|>{{ m }}<|im_end|>"},
            "generation_config.json": {"eos_token_id": 1}}
    base.update(files or {})
    for fname, content in base.items():
        if fname in drop:
            continue
        raw = content if isinstance(content, bytes) else json.dumps(content).encode()
        (d / fname).write_bytes(raw)
    return d


def hf_matrix(tmp):
    expect_loads("HF dir intact", hf_dir(tmp, "good"))
    t = hf_tensors()
    q = "model.layers.0.self_attn.q_proj.weight"
    st = "model.safetensors"

    def q_header(**over):
        entry = {"dtype": "F32", "shape": [D, D], "data_offsets": [0, D * D * 4]}
        entry.update(over)
        return json.dumps({q: entry})

    st_cases = [
        ("header length 2^62", struct.pack("<Q", 1 << 62) + b"{}", ["header length"]),
        ("header longer than the file", struct.pack("<Q", 4096) + b"{}", ["exceeds"]),
        ("invalid header JSON", raw_safetensors('{"a": '), ["invalid safetensors header JSON"]),
        # A dimension nested 100000 deep: copying or printing it recursed once per
        # level and overflowed the stack (a crash before JSON depth was bounded).
        ("a dimension nested 100000 deep",
         raw_safetensors('{"w": {"dtype": "F32", "shape": [' + "[" * 100000 + "]" * 100000
                         + '], "data_offsets": [0, 4]}}', b"\0" * 4), ["nested more than"]),
        ("header not an object", raw_safetensors("[1]"), ["not a JSON object"]),
        ("dtype missing", raw_safetensors(json.dumps({q: {"shape": [D, D],
                                                           "data_offsets": [0, 4]}}), b"\0" * 4),
         [q, "dtype"]),
        ("shape not a list", raw_safetensors(q_header(shape=7), b"\0" * D * D * 4), [q, "shape"]),
        ("nine dimensions", raw_safetensors(q_header(shape=[1] * 9), b"\0" * D * D * 4),
         [q, "dimensions"]),
        ("dimensions whose product overflows",
         raw_safetensors(q_header(shape=[1 << 40, 1 << 40, 1 << 40], data_offsets=[0, 0])),
         [q, "too many elements"]),
        ("offsets reversed", raw_safetensors(q_header(data_offsets=[8, 4]), b"\0" * 8),
         [q, "reversed"]),
        ("offsets past the end", raw_safetensors(q_header(), b"\0" * 16), [q, "extend past"]),
        ("size against the shape", raw_safetensors(q_header(data_offsets=[0, 8]), b"\0" * 8),
         [q, "needs"]),
        ("tensors overlapping",
         raw_safetensors(json.dumps({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
                                     "b": {"dtype": "F32", "shape": [4],
                                           "data_offsets": [8, 24]}}), b"\0" * 24),
         ["overlap"]),
        ("a used tensor in I8", None, [q, "I8"]),
    ]
    for label, content, words in st_cases:
        if label == "a used tensor in I8":
            raw = safetensors_bytes(t)
            header_len = struct.unpack_from("<Q", raw)[0]
            header = json.loads(raw[8:8 + header_len])
            header[q]["dtype"] = "I8"
            header[q]["data_offsets"][1] = header[q]["data_offsets"][0] + D * D
            # I8 takes a quarter of the bytes: the rest of its range is left unused.
            text = json.dumps(header).encode()
            content = struct.pack("<Q", len(text)) + text + raw[8 + header_len:]
        d = hf_dir(tmp, "st", {st: content})
        expect_error(f"safetensors {label}", d, [st, *words])

    def cfg(**over):
        c = dict(CONFIG)
        c.update(over)
        return c

    config_cases = [
        ("config invalid JSON", {"config.json": b'{"hidden_size": '}, ["config.json", "invalid JSON"]),
        ("config nested deep", {"config.json": b'{"x": ' + b"[" * 100000 + b"]" * 100000 + b"}"},
         ["config.json", "nested"]),
        ("config hidden_size missing", {"config.json": {k: v for k, v in CONFIG.items()
                                                        if k != "hidden_size"}},
         ["config.json", "hidden_size"]),
        ("config hidden_size a string", {"config.json": cfg(hidden_size="32")},
         ["config.json", "hidden_size", "integer"]),
        ("config layers out of int range", {"config.json": cfg(num_hidden_layers=1 << 40)},
         ["config.json", "num_hidden_layers", "out of range"]),
        ("config vocab implausible", {"config.json": cfg(vocab_size=1 << 30)},
         ["config.json", "vocabulary size", "implausibly large"]),
        ("config head_dim huge with llama3 scaling",
         {"config.json": cfg(head_dim=1 << 30, rope_scaling={
             "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
             "high_freq_factor": 4.0, "original_max_position_embeddings": 64})},
         ["config.json", "head dimension", "implausibly large"]),
        ("config rope scaling yarn", {"config.json": cfg(rope_scaling={"type": "yarn",
                                                                       "factor": 2.0})},
         ["config.json", "yarn"]),
        ("config architecture", {"config.json": cfg(architectures=["MambaForCausalLM"])},
         ["config.json", "MambaForCausalLM"]),
        ("config sizes against the tensors", {"config.json": cfg(hidden_size=48)},
         ["token_embd.weight", "shape"]),
        ("tokenizer.json invalid", {"tokenizer.json": b"{"}, ["tokenizer.json", "JSON"]),
        ("tokenizer.json pattern nested 300000 deep", {"tokenizer.json": (
            b'{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}, "pre_tokenizer": '
            b'{"type": "Split", "pattern": ' + b"[" * 300000 + b"]" * 300000 + b"}}")},
         ["tokenizer.json", "nested"]),
        ("tokenizer.json WordPiece", {"tokenizer.json": {**tokenizer_json(),
                                                         "model": {"type": "WordPiece",
                                                                   "vocab": {}}}},
         ["tokenizer.json", "WordPiece"]),
        ("tokenizer.json negative id", {"tokenizer.json": {**tokenizer_json(), "model": {
            "type": "BPE", "vocab": {"a": -1}, "merges": []}}}, ["tokenizer.json", "token id"]),
        ("tokenizer.json more tokens than the model", {"tokenizer.json": tokenizer_json(80)},
         ["tokenizer has 80 tokens", "64"]),
        ("tokenizer_config eos not in the vocabulary",
         {"tokenizer_config.json": {"eos_token": "<nope>"}}, ["tokenizer_config.json", "<nope>"]),
        ("tokenizer_config add_bos_token a string",
         {"tokenizer_config.json": {"add_bos_token": "yes"}},
         ["tokenizer_config.json", "add_bos_token"]),
        ("tokenizer_config chat_template a number", {"tokenizer_config.json": {"chat_template": 5}},
         ["tokenizer_config.json", "chat_template"]),
        ("generation_config eos a string", {"generation_config.json": {"eos_token_id": "x"}},
         ["generation_config.json", "eos_token_id"]),
    ]
    for label, files, words in config_cases:
        expect_error(label, hf_dir(tmp, "cfg", files), words)

    # Sharded checkpoints: the index against the shards.
    tensors = hf_tensors()
    names = sorted(tensors)
    half = len(names) // 2
    shard_a = safetensors_bytes({n: tensors[n] for n in names[:half]})
    shard_b = safetensors_bytes({n: tensors[n] for n in names[half:]})
    index = {"weight_map": {n: ("a.safetensors" if i < half else "b.safetensors")
                            for i, n in enumerate(names)}}
    shards = {"a.safetensors": shard_a, "b.safetensors": shard_b}
    idx = "model.safetensors.index.json"
    good = hf_dir(tmp, "sharded", {**shards, idx: index}, drop=(st,))
    expect_loads("sharded HF dir intact", good)
    wrong = json.loads(json.dumps(index))
    wrong["weight_map"][names[0]] = "b.safetensors"
    shard_cases = [
        ("index without weight_map", {idx: {"metadata": {}}}, [idx, "weight_map"]),
        ("index names a missing shard", {idx: {"weight_map": {names[0]: "c.safetensors"}}},
         [idx, "c.safetensors", "does not exist"]),
        ("index escapes the directory", {idx: {"weight_map": {names[0]: "../a.safetensors"}}},
         [idx, "../a.safetensors"]),
        ("index puts a tensor in the wrong shard", {idx: wrong}, ["b.safetensors", names[0]]),
    ]
    for label, files, words in shard_cases:
        expect_error(label, hf_dir(tmp, "shard", {**shards, **files}, drop=(st,)), words)
    print(f"HF files: {len(st_cases)} safetensors, {len(config_cases)} config/tokenizer, "
          f"{len(shard_cases)} shard-index cases")


def main():
    t0 = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        field_matrix(tmp)
        hf_matrix(tmp)
        truncation_matrix(tmp)
    print(f"{counts['cases']} malformed inputs in {time.time() - t0:.1f} s, slowest "
          f"{counts['slowest_s']:.2f} s, {MEMORY_BOUND}")
    if failures:
        print(f"{len(failures)} FAILED: {failures}")
        sys.exit(1)
    print("every malformed file gave one clear error")


if __name__ == "__main__":
    main()
