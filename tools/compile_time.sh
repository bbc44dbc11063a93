#!/usr/bin/env bash
# tools/compile_time.sh: what a header-only library costs its users' builds. Compiles each
# translation unit given (default: examples/*.cpp, plus an empty TU that includes only
# <rlflow/rlflow.hpp>) the way the examples are built (g++ -std=c++20 -O3 -DNDEBUG -fopenmp,
# no MPI), one at a time, under /usr/bin/time -v, and prints CPU seconds (user + sys) and the
# compiler's peak memory per file. No ccache; nothing is written but a temporary object.
# Usage: tools/compile_time.sh [-O LEVEL] [file.cpp ...]     (CXX overrides the compiler;
#        RLFLOW_INCLUDE=<other tree>/include measures another tree's headers, for comparisons;
#        RLFLOW_CXXFLAGS adds flags, e.g. -DRLFLOW_SEPARATE_COMPILATION: a TU of a program that
#        links rlflow::rlflow_compiled, as the examples are built)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
opt=-O3
if [[ ${1:-} == -O ]]; then opt=-O$2; shift 2; fi
cxx=${CXX:-g++}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
files=("$@")
if [[ ${#files[@]} -eq 0 ]]; then
  printf '#include <rlflow/rlflow.hpp>\nint main() {}\n' > "$tmp/umbrella_only.cpp"
  files=("$tmp/umbrella_only.cpp" "$root"/examples/[0-9][0-9]_*.cpp)
fi
printf '%-36s %10s %12s\n' "translation unit ($cxx $opt)" "CPU s" "peak MiB"
for f in "${files[@]}"; do
  if ! /usr/bin/time -v -o "$tmp/time.txt" "$cxx" -std=c++20 "$opt" -DNDEBUG -fopenmp -I"${RLFLOW_INCLUDE:-$root/include}" \
       -I"$root/examples" ${RLFLOW_CXXFLAGS:-} -c "$f" -o "$tmp/out.o" 2> "$tmp/err.txt"; then
    echo "compile_time.sh: $f does not compile:" >&2
    head -20 "$tmp/err.txt" >&2
    exit 1
  fi
  user=$(awk -F': ' '/User time/ {print $2}' "$tmp/time.txt")
  sys=$(awk -F': ' '/System time/ {print $2}' "$tmp/time.txt")
  kb=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$tmp/time.txt")
  awk -v n="$(basename "$f")" -v u="$user" -v s="$sys" -v k="$kb" 'BEGIN { printf "%-36s %10.1f %12.0f\n", n, u + s, k / 1024 }'
done
