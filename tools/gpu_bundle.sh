#!/usr/bin/env bash
# tools/gpu_bundle.sh: carry a GPU check to a machine that has a GPU and the CUDA toolkit but none of
# the project's other build dependencies (OpenBLAS, Google Benchmark, Catch2 headers, MPI), or no
# time to build: build here, pack, unpack there, run `tools/gpu_check.sh --no-build` there.
#
#   tools/gpu_bundle.sh --pack BUILD FILE     # BUILD: a build folder configured for the target GPU
#                                             # (CMAKE_CUDA_ARCHITECTURES) whose CUDA test, benchmark
#                                             # and demo targets are built; FILE: a .tar.xz to write
#   tools/gpu_bundle.sh --unpack FILE BUILD   # on the GPU machine, in the repository's root: unpacks
#                                             # into BUILD, rewrites CTest's absolute paths to this
#                                             # checkout, and prints the LD_LIBRARY_PATH to export
#
# The bundle holds the executables of the 'cuda' and 'gpu_check' tests, bench_kernels_cuda,
# bench_engine_cuda and 00_grpo_reverse_cuda, every CTestTestfile.cmake of BUILD, and the shared
# libraries they load that are neither glibc's nor the CUDA toolkit's (those the GPU machine has;
# the machine's glibc must be at least as new as the packing machine's). The mpi-labelled tests are
# left out (they need MPI and two devices). See docs/development.md, "The GPU check".
set -euo pipefail

die() { echo "gpu_bundle: $*" >&2; exit 2; }

pack() {
  local build="$1" file="$2"
  [[ -f "$build/CMakeCache.txt" ]] || die "$build is not a CMake build folder (configure and build it first)"
  build=$(cd "$build" && pwd)
  local src
  src=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$build/CMakeCache.txt")
  [[ -n "$src" ]] || die "$build/CMakeCache.txt names no source folder (CMAKE_HOME_DIRECTORY)"
  # the executables: every test command of the labels the check runs, plus the benchmarks and demo
  local -a exes
  mapfile -t exes < <(cd "$build" && ctest --show-only=json-v1 -L "cuda|gpu_check" -LE mpi |
    python3 -c 'import json, sys
for t in json.load(sys.stdin)["tests"]:
    c = t.get("command") or []
    if c: print(c[0])' | sort -u)
  exes+=("$build/benchmarks/kernels/bench_kernels_cuda" "$build/benchmarks/engine_cuda/bench_engine_cuda"
         "$build/examples/00_grpo_reverse_cuda")
  local stage
  stage=$(mktemp -d)
  trap 'rm -rf "$stage"' RETURN
  mkdir -p "$stage/build/.bundle-lib"
  local e rel
  for e in "${exes[@]}"; do
    [[ "$e" == "$build"/* ]] || continue  # bash, python3 ... are the machine's own
    [[ -x "$e" ]] || die "$e is not built (cmake --build $build --target $(basename "$e"))"
    rel=${e#"$build"/}
    mkdir -p "$stage/build/$(dirname "$rel")"
    cp "$e" "$stage/build/$rel"
  done
  (cd "$build" && find . \( -name CTestTestfile.cmake -o -name '*_include-*.cmake' -o -name '*_tests-*.cmake' \) -print0 | while IFS= read -r -d '' f; do
    mkdir -p "$stage/build/$(dirname "$f")"; cp "$f" "$stage/build/$f"; done)
  # shared libraries: not glibc, not the dynamic loader, not CUDA's (cudart, cublas...), not the driver
  local lib
  for e in "${exes[@]}"; do
    [[ "$e" == "$build"/* ]] || continue
    ldd "$e" | awk '$3 ~ /^\// { print $3 }'
  done | sort -u | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|ld-linux*|libcuda.so*|libcudart.so*|libcublas*|libnccl*) ;;
      libstdc++.so*|libgcc_s.so*) ;;  # the machine's own are newer, and CUDA's libraries need them
      *) cp -L "$lib" "$stage/build/.bundle-lib/" ;;
    esac
  done
  printf 'src=%s\nbuild=%s\n' "$src" "$build" >"$stage/build/.bundle-paths"
  tar -C "$stage/build" -cf - . | xz -T0 -6 >"$file"
  echo "gpu_bundle: wrote $file ($(du -h "$file" | cut -f1)): ${#exes[@]} executables, $(ls "$stage/build/.bundle-lib" | wc -l) libraries"
}

unpack() {
  local file="$1" build="$2"
  [[ -f "$file" ]] || die "no bundle at $file"
  mkdir -p "$build"
  xz -dc "$file" | tar -C "$build" -xf -
  build=$(cd "$build" && pwd)
  local src old_src old_build
  src=$(pwd)
  old_src=$(sed -n 's/^src=//p' "$build/.bundle-paths")
  old_build=$(sed -n 's/^build=//p' "$build/.bundle-paths")
  [[ -n "$old_src" && -n "$old_build" ]] || die "$file has no .bundle-paths (not made by --pack)"
  find "$build" -name "*.cmake" -print0 |
    xargs -0 sed -i -e "s|$old_build|$build|g" -e "s|$old_src|$src|g"
  echo "$build/.bundle-lib"
}

case "${1:-}" in
  --pack) (($# == 3)) || die "usage: $0 --pack BUILD FILE"; pack "$2" "$3" ;;
  --unpack) (($# == 3)) || die "usage: $0 --unpack FILE BUILD"; unpack "$2" "$3" ;;
  *) sed -n '2,/^set /{/^#/p}' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
