#!/usr/bin/env bash
# The compile CPU seconds of 'make test', per target. Configures a fresh build folder as 'make test'
# does (Release; CUDA when nvcc is present), builds every target with ccache off, timing each compile with
# tools/compile_launcher.sh, and prints the CPU seconds (user + system) per target, largest first, and the
# total. CPU seconds, not wall time: they do not depend on the machine's load or core count.
#   tools/compile_cost.sh [BUILD_DIR]        build and report (default build-cost; removed first)
#   tools/compile_cost.sh --parse LOG        report an existing log
#   tools/compile_cost.sh --compare A B      two logs side by side (per target and total)
#   tools/compile_cost.sh --markdown A B [MIN]  the same as a Markdown table: the total, then the
#                                            targets of MIN CPU s or more in either log (default 15)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

report() {  # log -> "target seconds" lines, largest first, then the total
  awk '{ t = $3; n = split(t, p, "/");
         target = p[n];                                            # a linked program: its name
         for (i = 1; i < n; i++) if (p[i] ~ /\.dir$/) { target = p[i]; sub(/\.dir$/, "", target); break }
         s[target] += $1 + $2; total += $1 + $2 }
       END { for (k in s) printf "%10.1f  %s\n", s[k], k; printf "%10.1f  TOTAL\n", total > "/dev/stderr" }' "$1" \
    2>"$1.total" | sort -rn
  cat "$1.total"; rm -f "$1.total"
}

case "${1:-}" in
  --parse) report "$2"; exit 0 ;;
  --compare)
    join -a1 -a2 -e 0 -o 0,1.2,2.2 -1 1 -2 1 \
      <(report "$2" 2>&1 | awk '{print $2, $1}' | sort) <(report "$3" 2>&1 | awk '{print $2, $1}' | sort) |
      awk '{ printf "%10.1f %10.1f  %s\n", $2, $3, $1 }' | sort -rn
    exit 0 ;;
  --markdown)
    echo "| before | after | target |"; echo "| --- | --- | --- |"
    "$0" --compare "$2" "$3" | awk -v min="${4:-15}" '$3 == "TOTAL" { printf "| %.0f | %.0f | all |\n", $1, $2; next }
      $1 >= min || $2 >= min { printf "| %.1f | %.1f | `%s` |\n", $1, $2, $3 }'
    exit 0 ;;
esac

build=${1:-build-cost}
[[ $build == /* ]] || build=$root/$build
log=$build.compile.log
command -v /usr/bin/time >/dev/null || { echo "compile_cost.sh needs /usr/bin/time (apt-get install time)"; exit 2; }
nvcc=$(command -v /usr/local/cuda/bin/nvcc nvcc 2>/dev/null | head -1 || true)
cuda=()
if [[ -n $nvcc ]]; then  # as the Makefile: a compile check where no GPU answers
  cuda=(-DCMAKE_CUDA_COMPILER="$nvcc" -DCMAKE_CUDA_COMPILER_LAUNCHER="$root/tools/compile_launcher.sh")
  if nvidia-smi -L >/dev/null 2>&1; then cuda+=(-DCMAKE_CUDA_ARCHITECTURES=90)
  else cuda+=(-DCMAKE_CUDA_ARCHITECTURES=90-virtual -DRLFLOW_CUDA_COMPILE_CHECK=ON); fi
fi
rm -rf "$build" "$log"
export CCACHE_DISABLE=1 RLFLOW_COMPILE_LOG=$log
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DRLFLOW_CCACHE=OFF \
  -DCMAKE_CXX_COMPILER_LAUNCHER="$root/tools/compile_launcher.sh" \
  "${cuda[@]}" >/dev/null
start=$(date +%s)
cmake --build "$build" -j"$(nproc)" >"$build.build.log" 2>&1 || { tail -30 "$build.build.log"; exit 1; }
echo "built in $(( $(date +%s) - start )) s wall on $(nproc) cores; log: $log"
report "$log"
