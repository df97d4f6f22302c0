#!/usr/bin/env python3
"""tandem's block formats against gguf-py (llama.cpp's Python package, numpy code).

dump_tensor (tests/tools) decodes tensors of a GGUF file with tandem's
dequantize_row, or re-encodes them with quantize_row; this script compares its
output with gguf.quants:

  (a) for every type gguf-py can quantize: random rows quantized by gguf-py,
      decoded by both; and tandem's quantize_row bytes against gguf-py's bytes;
  (b) tensors sampled from the real models in $TANDEM_CACHE/models, every type
      they carry (Q4_1, Q8_0, Q4_K, Q5_0, Q6_K, F32);
  (c) blocks of random bytes with sane fp16 scales for every block type, which
      covers the K-quants no real model here carries (Q2_K, Q3_K, Q5_K). gguf-py
      has no Q8_1/Q8_K decoder; those two are checked against the one-line
      formula x = d * q written below.

Decoded floats must match bit for bit: both sides do the same float32 operations
in the same order (products rounded before the add; no FMA), so no tolerance is
needed. Exits non-zero naming the type, tensor and first mismatching index.
"""
import os
import struct
import subprocess
import sys
import tempfile
from importlib.metadata import version
from pathlib import Path
from typing import NamedTuple

import numpy as np

import gguf
from gguf import GGMLQuantizationType as Q
from gguf.constants import GGML_QUANT_SIZES

TOOLS_DIR = os.environ.get("TANDEM_TOOLS_DIR", "")
CACHE = Path(os.environ.get("TANDEM_CACHE") or Path.home() / ".cache" / "tandem")
MODELS = [
    "smollm2-135m-instruct-q4_1.gguf",
    "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
]
# The types tandem knows (src/core/dtype.h).
TANDEM_TYPES = [Q.F32, Q.F16, Q.BF16, Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1, Q.Q8_0, Q.Q8_1,
                Q.Q2_K, Q.Q3_K, Q.Q4_K, Q.Q5_K, Q.Q6_K, Q.Q8_K]
# Types whose quantize_row implements the same rounding rule as gguf-py (GGML's
# reference quantizers): their bytes must be identical. tandem's K-quant
# quantizers use a simpler scale search than GGML's, so if gguf-py ever learns to
# quantize a K-quant only its decoding is compared.
SAME_ROUNDING = {Q.F32, Q.F16, Q.BF16, Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1, Q.Q8_0}
ROWS_FROM_MODELS = 192  # rows dumped per model tensor: enough blocks, fast

failures: list[str] = []
rng = np.random.default_rng(20240611)


def fail(msg: str) -> None:
    print(f"FAIL: {msg}", flush=True)
    failures.append(msg)


def dump_tensor(model: Path, out_dir: Path, names: list[str], *extra: str) -> None:
    tool = Path(TOOLS_DIR) / "dump_tensor"
    cmd = [str(tool), *extra, str(model), str(out_dir), *names]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({res.returncode}): {res.stderr.strip()}")


def tensor_file(out_dir: Path, name: str, ext: str) -> Path:
    return out_dir / f"{name}.{ext}"


def compare_floats(what: str, got: np.ndarray, ref: np.ndarray) -> bool:
    """Bitwise equality of two float32 arrays (so -0.0 vs 0.0 or NaN payloads count)."""
    ref = np.ascontiguousarray(ref, dtype=np.float32).ravel()
    got = np.ascontiguousarray(got, dtype=np.float32).ravel()
    if got.size != ref.size:
        fail(f"{what}: {got.size} values from tandem, {ref.size} from gguf-py")
        return False
    diff = np.flatnonzero(got.view(np.uint32) != ref.view(np.uint32))
    if diff.size:
        i = int(diff[0])
        fail(f"{what}: {diff.size} of {ref.size} values differ; first at index {i}: "
             f"tandem {got[i]!r} ({got.view(np.uint32)[i]:#010x}), "
             f"gguf-py {ref[i]!r} ({ref.view(np.uint32)[i]:#010x})")
        return False
    return True


def compare_bytes(what: str, got: np.ndarray, ref: np.ndarray, block_bytes: int) -> bool:
    ref = np.ascontiguousarray(ref).view(np.uint8).ravel()
    got = np.ascontiguousarray(got).view(np.uint8).ravel()
    if got.size != ref.size:
        fail(f"{what}: {got.size} bytes from tandem, {ref.size} from gguf-py")
        return False
    diff = np.flatnonzero(got != ref)
    if diff.size:
        i = int(diff[0])
        fail(f"{what}: {diff.size} of {ref.size} bytes differ; first at byte {i} (block "
             f"{i // block_bytes}, offset {i % block_bytes}): tandem {got[i]:#04x}, "
             f"gguf-py {ref[i]:#04x}")
        return False
    return True


# --- (a) types gguf-py quantizes ----------------------------------------------------

def can_quantize(t: Q) -> bool:
    try:
        gguf.quants.quantize(np.zeros((1, 256), dtype=np.float32), t)
        return True
    except NotImplementedError:
        return False


def sample_rows(rows: int, cols: int, float_type: bool) -> np.ndarray:
    """Gaussian rows at scales 1e-3..1e3; the first rows replaced by special cases:
    for the float types, random finite bit patterns, exact fp16 ties, fp16
    subnormals and overflow; then zeros, negative-only, constant, exact ties of the
    block rounding rules (small multiples of 0.5), and 1e-4 amplitude (subnormal
    fp16 block scales)."""
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    x *= (10.0 ** rng.uniform(-3, 3, size=(rows, 1))).astype(np.float32)
    specials = []
    if float_type:  # conversions: random bit patterns, ties, fp16 subnormals, overflow
        bits = rng.integers(0, 2**32, size=cols, dtype=np.uint64).astype(np.uint32)
        bits[(bits & 0x7F800000) == 0x7F800000] &= 0xBFFFFFFF  # keep them finite
        specials += [
            bits.view(np.float32),
            (rng.integers(-2048, 2048, size=cols) + 0.5).astype(np.float32) * 2.0**-20,
            rng.uniform(6e-9, 7e-5, size=cols).astype(np.float32),
            np.resize(np.array([65504, 65519, 65520, -65536, 1e30, np.inf, -np.inf],
                               dtype=np.float32), cols),
        ]
    specials += [
        np.zeros(cols, dtype=np.float32),
        -np.abs(rng.standard_normal(cols)).astype(np.float32) * 3,
        np.full(cols, 0.7, dtype=np.float32),
        (rng.integers(-8, 8, size=cols) * 0.5).astype(np.float32),
        (rng.standard_normal(cols) * 1e-4).astype(np.float32),
    ]
    for i, row in enumerate(specials[:rows]):
        x[i] = row
    return x


def check_quantizable_types(work: Path) -> None:
    quantizable = [t for t in TANDEM_TYPES if can_quantize(t)]
    print(f"(a) gguf-py quantizes: {', '.join(t.name for t in quantizable)}")
    for t in (Q.BF16, Q.Q8_0, Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1):
        if t not in quantizable:
            fail(f"(a) gguf-py {version('gguf')} can no longer quantize {t.name}")
    path = work / "quantized.gguf"
    writer = gguf.GGUFWriter(path, "tandem-test")
    cases = []  # (type, tensor name, gguf-py bytes); the floats are "src." + name
    for t in quantizable:
        block = GGML_QUANT_SIZES[t][0]
        # Odd row counts, rows of 1, 3, 8 and 16 blocks (odd lengths for the float types).
        shapes = [(7, block), (5, 3 * block), (3, 8 * block), (1, 16 * block)]
        if block == 1:
            shapes.append((9, 17))
        for rows, cols in shapes:
            x = sample_rows(rows, cols, float_type=block == 1)
            name = f"{t.name}.{rows}x{cols}"
            with np.errstate(over="ignore"):  # F16 of values beyond 65504 is inf, on purpose
                q = gguf.quants.quantize(x, t)
            writer.add_tensor(name, q, raw_dtype=t if q.dtype == np.uint8 else None)
            writer.add_tensor("src." + name, x)
            cases.append((t, name, q))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()

    out = work / "a"
    out.mkdir()
    dump_tensor(path, out, [name for _, name, _ in cases])
    byte_exact = set()
    for t, name, q in cases:
        got = np.fromfile(tensor_file(out, name, "f32"), dtype=np.float32)
        compare_floats(f"(a) {t.name} tensor {name}: dequantize_row", got,
                       gguf.quants.dequantize(q, t))
    for t in sorted({t for t, _, _ in cases}, key=lambda t: t.value):
        names = [n for tt, n, _ in cases if tt == t]
        dump_tensor(path, out, ["src." + n for n in names], "--quantize", t.name)
        ok = True
        for tt, name, q in cases:
            if tt != t:
                continue
            got = np.fromfile(tensor_file(out, "src." + name, t.name), dtype=np.uint8)
            if t in SAME_ROUNDING:
                ok &= compare_bytes(f"(a) {t.name} tensor {name}: quantize_row bytes", got, q,
                                    GGML_QUANT_SIZES[t][1])
            else:
                ok = False  # a rounding rule of its own: decoding was compared above
        if ok:
            byte_exact.add(t)
    print(f"(a) quantize_row bytes identical to gguf-py for: "
          f"{', '.join(t.name for t in sorted(byte_exact, key=lambda t: t.value))}")


# --- (b) real models ----------------------------------------------------------------

class ModelTensor(NamedTuple):
    name: str
    type: Q
    shape: tuple[int, ...]  # GGML order: shape[0] is the row length
    data: np.ndarray        # the raw bytes as (rows, bytes per row)


GGUF_SCALAR_BYTES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
GGUF_STRING, GGUF_ARRAY = 8, 9


def read_model_tensors(path: Path) -> list[ModelTensor]:
    """The tensors of a GGUF file, read from its header. gguf.GGUFReader would do,
    but it decodes every metadata value (~150k vocabulary strings), which takes tens
    of seconds per model; this only skips them. The bytes located here are decoded
    by gguf-py and by tandem (with its own reader), so a wrong offset cannot pass."""
    buf = np.memmap(path, mode="r", dtype=np.uint8)
    pos = 0

    def read(fmt: str):
        nonlocal pos
        value = struct.unpack_from("<" + fmt, buf, pos)[0]
        pos += struct.calcsize("<" + fmt)
        return value

    def read_string() -> str:
        nonlocal pos
        n = read("Q")
        pos += n
        return bytes(buf[pos - n:pos]).decode("utf-8")

    def skip_value(vtype: int) -> None:
        nonlocal pos
        if vtype == GGUF_STRING:
            n = read("Q")  # (not `pos += read(...)`: that would add to the old pos)
            pos += n
        elif vtype == GGUF_ARRAY:
            etype, count = read("I"), read("Q")
            if etype in GGUF_SCALAR_BYTES:
                pos += count * GGUF_SCALAR_BYTES[etype]
            else:
                for _ in range(count):
                    skip_value(etype)
        else:
            pos += GGUF_SCALAR_BYTES[vtype]

    if read("I") != 0x46554747 or read("I") not in (2, 3):
        raise ValueError(f"{path}: not a GGUF v2/v3 file")
    n_tensors, n_kv = read("Q"), read("Q")
    alignment = 32
    for _ in range(n_kv):
        key, vtype = read_string(), read("I")
        if key == "general.alignment" and vtype == 4:
            alignment = read("I")
        else:
            skip_value(vtype)
    infos = []
    for _ in range(n_tensors):
        name = read_string()
        shape = tuple(read("Q") for _ in range(read("I")))
        infos.append((name, Q(read("I")), shape, read("Q")))
    data_start = (pos + alignment - 1) // alignment * alignment
    tensors = []
    for name, t_type, shape, offset in infos:
        block, size = GGML_QUANT_SIZES[t_type]
        row_bytes = shape[0] // block * size
        nbytes = row_bytes * int(np.prod(shape[1:], dtype=np.int64))
        start = data_start + offset
        data = buf[start:start + nbytes].reshape(-1, row_bytes)
        tensors.append(ModelTensor(name, t_type, shape, data))
    return tensors


def check_models(work: Path) -> None:
    seen_types = set()
    for file in MODELS:
        model = CACHE / "models" / file
        if not model.exists():
            fail(f"(b) model {model} is missing: run `make models` (part b not run for it)")
            continue
        by_type = {}
        for t in read_model_tensors(model):
            by_type.setdefault(t.type, []).append(t)
        # Per type: the smallest and the largest tensor (their first rows).
        picked = []
        for t_type, tensors in by_type.items():
            tensors.sort(key=lambda t: (t.data.size, t.name))
            picked += [tensors[0]] + ([tensors[-1]] if len(tensors) > 1 else [])
            seen_types.add(t_type)
        out = work / ("b-" + file)
        out.mkdir()
        dump_tensor(model, out, [t.name for t in picked], "--rows", str(ROWS_FROM_MODELS))
        for t in picked:
            got = np.fromfile(tensor_file(out, t.name, "f32"), dtype=np.float32)
            compare_floats(f"(b) {file}: {t.type.name} tensor {t.name}", got,
                           gguf.quants.dequantize(t.data[:ROWS_FROM_MODELS], t.type))
        print(f"(b) {file}: compared {len(picked)} tensors "
              f"({', '.join(sorted({t.type.name for t in picked}))})")
    missing = [t.name for t in (Q.Q4_1, Q.Q8_0, Q.Q4_K, Q.Q5_0, Q.Q6_K, Q.F32)
               if t not in seen_types]
    if missing and all((CACHE / "models" / f).exists() for f in MODELS):
        fail(f"(b) the models carry no tensor of type {', '.join(missing)}")


# --- (c) random blocks ---------------------------------------------------------------

# Byte offsets of the fp16 scale fields in each block (ggml-common.h layouts).
F16_FIELDS = {
    Q.Q4_0: [0], Q.Q4_1: [0, 2], Q.Q5_0: [0], Q.Q5_1: [0, 2], Q.Q8_0: [0], Q.Q8_1: [0, 2],
    Q.Q2_K: [80, 82], Q.Q3_K: [108], Q.Q4_K: [0, 2], Q.Q5_K: [0, 2], Q.Q6_K: [208],
}


def sane_halves(n: int) -> np.ndarray:
    """fp16 scales: random sign and magnitude 2^-16..2^4 (normal and subnormal),
    plus zeros, the smallest subnormal and the largest finite half."""
    h = (rng.choice([-1, 1], size=n) * 2.0 ** rng.uniform(-16, 4, size=n)).astype(np.float16)
    special = np.array([0.0, -0.0, 2.0**-24, 65504.0, -1.0], dtype=np.float16)
    k = min(n, special.size)
    h[rng.choice(n, size=k, replace=False)] = special[:k]
    return h


def block_bytes(t: Q) -> int:
    # gguf-py's size table still lists Q8_1 with the old float d and s (40 bytes);
    # GGML's block_q8_1 has had fp16 d and s (36 bytes) since 2024, as tandem does.
    return 36 if t == Q.Q8_1 else GGML_QUANT_SIZES[t][1]


def random_blocks(t: Q, rows: int, blocks_per_row: int) -> np.ndarray:
    size = block_bytes(t)
    data = rng.integers(0, 256, size=(rows * blocks_per_row, size), dtype=np.uint8)
    if t == Q.Q8_K:
        d = (rng.standard_normal(data.shape[0]) * 0.01).astype(np.float32)
        data[:, 0:4] = d.view(np.uint8).reshape(-1, 4)
    else:
        for off in F16_FIELDS[t]:
            data[:, off:off + 2] = sane_halves(data.shape[0]).view(np.uint8).reshape(-1, 2)
    return data.reshape(rows, blocks_per_row * size)


def formula_dequantize(t: Q, rows: np.ndarray) -> np.ndarray:
    """x = d * q for Q8_1 (fp16 d, fp16 s, 32 int8) and Q8_K (f32 d, 256 int8, bsums)."""
    block, size = GGML_QUANT_SIZES[t][0], block_bytes(t)
    blocks = rows.reshape(-1, size)
    if t == Q.Q8_1:
        d = blocks[:, 0:2].copy().view(np.float16).astype(np.float32)
        q = blocks[:, 4:4 + block].view(np.int8).astype(np.float32)
        return q * d
    d = blocks[:, 0:4].copy().view(np.float32)
    q = blocks[:, 4:4 + block].view(np.int8).astype(np.float32)
    return d * q


def check_random_blocks(work: Path) -> None:
    types = [Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1, Q.Q8_0, Q.Q8_1,
             Q.Q2_K, Q.Q3_K, Q.Q4_K, Q.Q5_K, Q.Q6_K, Q.Q8_K]
    path = work / "random.gguf"
    writer = gguf.GGUFWriter(path, "tandem-test")
    cases = []
    for t in types:
        per_row = [1, 3, 8] if GGML_QUANT_SIZES[t][0] == 256 else [1, 5, 16]
        for rows, blocks in zip([9, 5, 3], per_row):
            data = random_blocks(t, rows, blocks)
            name = f"{t.name}.random.{rows}x{blocks}"
            # Raw bytes with an explicit element shape (not gguf-py's size table).
            elements = blocks * GGML_QUANT_SIZES[t][0]
            writer.add_tensor(name, data.view(np.int8), raw_shape=(rows, elements), raw_dtype=t)
            cases.append((t, name, data))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    out = work / "c"
    out.mkdir()
    dump_tensor(path, out, [name for _, name, _ in cases])
    for t, name, data in cases:
        got = np.fromfile(tensor_file(out, name, "f32"), dtype=np.float32)
        if t in (Q.Q8_1, Q.Q8_K):
            ref, source = formula_dequantize(t, data), "formula"
        else:
            ref, source = gguf.quants.dequantize(data, t), "gguf-py"
        compare_floats(f"(c) {t.name} tensor {name} (reference: {source})", got, ref)
    print(f"(c) compared random blocks of {', '.join(t.name for t in types)}")


def main() -> int:
    tool = Path(TOOLS_DIR) / "dump_tensor"
    if not TOOLS_DIR or not tool.exists():
        print(f"FAIL: dump_tensor not found (TANDEM_TOOLS_DIR={TOOLS_DIR!r}); "
              "build the dump_tensor target and set TANDEM_TOOLS_DIR")
        return 1
    with tempfile.TemporaryDirectory(prefix="tandem-quants-") as tmp:
        work = Path(tmp)
        for part in (check_quantizable_types, check_models, check_random_blocks):
            try:
                part(work)
            except Exception as e:  # a crash of one part must not hide the others
                fail(f"{part.__name__}: {type(e).__name__}: {e}")
    if failures:
        print(f"\n{len(failures)} failure(s):")
        for f in failures:
            print(f"  {f}")
        return 1
    print("OK: tandem's block formats match gguf-py bit for bit")
    return 0


if __name__ == "__main__":
    sys.exit(main())
