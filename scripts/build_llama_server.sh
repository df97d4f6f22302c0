#!/usr/bin/env bash
# Builds llama.cpp's llama-server (the C++ server, not llama-cpp-python's) for
# `tandem bench agent --llama-server URL`: from the llama.cpp source that the
# llama-cpp-python 0.3.36 sdist on PyPI vendors (this machine reaches PyPI and
# Debian only), at the version scripts/compare_llamacpp.py measures, native
# CPU flags, no web UI, no network features. Installs
# $TANDEM_CACHE/llama-server/bin/llama-server; a second run does nothing.
set -euo pipefail
CACHE=${TANDEM_CACHE:-$HOME/.cache/tandem}
VERSION=0.3.36
DEST=$CACHE/llama-server
if [[ -x $DEST/bin/llama-server ]]; then
  echo "$DEST/bin/llama-server"
  exit 0
fi
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
PIP=$CACHE/venv/bin/pip
"$PIP" download "llama-cpp-python==$VERSION" --no-binary :all: --no-deps -d "$WORK" -q
tar xzf "$WORK/llama_cpp_python-$VERSION.tar.gz" -C "$WORK"
SRC=$WORK/llama_cpp_python-$VERSION/vendor/llama.cpp
cmake -S "$SRC" -B "$WORK/build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON \
  -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
  -DBUILD_SHARED_LIBS=OFF -DCMAKE_INSTALL_PREFIX="$DEST" >/dev/null
# Its compile warnings are llama.cpp's: kept in a log, not printed.
cmake --build "$WORK/build" -j "$(nproc)" --target llama-server >"$WORK/build.log" 2>&1 ||
  { tail -40 "$WORK/build.log"; exit 1; }
install -D "$WORK/build/bin/llama-server" "$DEST/bin/llama-server"
echo "$DEST/bin/llama-server"
