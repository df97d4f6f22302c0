#!/usr/bin/env bash
# Installs what `make fuzz` needs beyond scripts/setup.sh: clang and its
# libFuzzer runtime (Debian's clang-14 and libclang-rt-14-dev). Exits non-zero
# when they are missing and cannot be installed (then `make fuzz` falls back to
# the standalone mutation driver built with the default compiler).
set -euo pipefail

APT_PACKAGES=(clang-14 libclang-rt-14-dev)
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "setup_fuzz: installing Debian packages: ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "setup_fuzz: not root and no sudo" >&2; exit 1; }
  SUDO="sudo"
fi
log="$(mktemp)"
if ! { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq \
         "${missing[@]}"; } >"$log" 2>&1; then
  cat "$log"
  echo "setup_fuzz: apt-get failed (see above)" >&2
  exit 1
fi
rm -f "$log"
