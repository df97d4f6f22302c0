#!/usr/bin/env bash
# Every tracked C++ file must be formatted as .clang-format says (clang-format 14,
# Debian's). Run from anywhere; prints the files that differ and fails on any.
# Fix with: clang-format -i $(git ls-files '*.cpp' '*.h' '*.cu' '*.cuh')
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang-format >/dev/null || { echo "check_format: clang-format is not installed" >&2; exit 1; }
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files '*.cpp' '*.h' '*.cu' '*.cuh')
else  # a source tree without git: the folders that hold C++
  mapfile -t files < <(find apps bench src tests \( -name '*.cpp' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) | sort)
fi
bad=()
for f in "${files[@]}"; do
  clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ ${#bad[@]} -gt 0 ]; then
  printf 'not formatted: %s\n' "${bad[@]}" >&2
  echo "fix with: clang-format -i ${bad[*]}" >&2
  exit 1
fi
echo "check_format: ${#files[@]} files formatted"
