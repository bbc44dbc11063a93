#!/bin/sh
# The demo's final score (an example's task score where it prints one) under each of OpenBLAS's
# x86 kernel families: other CPUs run other BLAS kernels, which round differently, so a run
# follows another trajectory. Prints one line per kernel and the range. Usage: tools/demo_spread.sh [build/examples/00_grpo_reverse] [key=value ...]
set -eu
exe=${1:-build/examples/00_grpo_reverse}
[ $# -gt 0 ] && shift
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for k in Cooperlake SkylakeX Haswell Sandybridge Prescott; do
  # the task score where the example prints one (08_grpo_addition), else the final critic score
  s=$(OPENBLAS_CORETYPE=$k "$exe" trainer.default_local_dir="$tmp/$k" "$@" 2>&1 |
      sed -n -e 's/^done: .*task score .* last \([0-9.]*\).*/\1/p;t' \
             -e 's/^done: .*final critic\/score\/mean \([0-9.]*\).*/\1/p')
  [ -n "$s" ] || { echo "demo_spread: $exe under OPENBLAS_CORETYPE=$k printed no final score" >&2; exit 1; }
  echo "$k $s"
done | tee "$tmp/all"
sort -k2 -n "$tmp/all" | awk 'NR==1{lo=$2} {hi=$2} END{print "range " lo "-" hi}'
