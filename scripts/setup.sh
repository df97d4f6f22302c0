#!/usr/bin/env bash
# Installs what tandem needs to build and test, skipping what is already there:
# Debian packages (compiler, CMake, libraries, and chromium with its driver for the
# web page's browser test: a large install, made once like the others) and a
# Python venv with the test tools.
set -euo pipefail

CACHE="${TANDEM_CACHE:-$HOME/.cache/tandem}"
VENV="$CACHE/venv"

APT_PACKAGES=(
  g++ cmake make pkg-config python3 python3-venv
  nlohmann-json3-dev libcli11-dev libfmt-dev libgtest-dev libgmock-dev libbenchmark-dev
  libhwy-dev libpcre2-dev libcpp-httplib-dev
  chromium chromium-driver json-schema-test-suite clang-format haproxy
)
# `scripts/setup.sh --fuzz` (make fuzz): clang and its libFuzzer runtime too.
if [ "${1:-}" = "--fuzz" ]; then
  APT_PACKAGES+=(clang-14 libclang-rt-14-dev)
fi
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  log="$(mktemp)"
  if ! { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq \
           "${missing[@]}"; } >"$log" 2>&1; then
    cat "$log"
    echo "setup: apt-get failed (see above)" >&2
    exit 1
  fi
  rm -f "$log"
fi

PY_PACKAGES=(numpy==2.4.6 gguf==0.19.0 openai==3.54.0 selenium==4.51.0 jsonschema==4.26.0
             kubernetes-validate==1.37.0 jinja2==3.1.6 openai-agents==0.24.0)
STAMP="$VENV/.tandem-packages"
want="${PY_PACKAGES[*]}"
if [ ! -x "$VENV/bin/python" ] || [ "$(cat "$STAMP" 2>/dev/null)" != "$want" ]; then
  echo "setup: creating Python venv at $VENV"
  mkdir -p "$CACHE"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check "${PY_PACKAGES[@]}"
  echo "$want" > "$STAMP"
fi
