#!/usr/bin/env bash
# Compiler launcher for tools/compile_cost.sh: runs the command and, when RLFLOW_COMPILE_LOG is set,
# appends "<user s> <system s> <output file>" to it (the CPU time of the compiler and every process
# it waits for: cc1plus, as, nvcc's cicc/ptxas).
[[ -n ${RLFLOW_COMPILE_LOG:-} ]] || exec "$@"
out=""; prev=""
for a in "$@"; do [[ $prev == -o ]] && out=$a; prev=$a; done
[[ $out == /* ]] || out=$PWD/$out
exec /usr/bin/time -a -o "$RLFLOW_COMPILE_LOG" -f "%U %S $out" "$@"
