# tests/parse_expect.sh: sourced by the tests of the tools' --parse tables (tools/gpu_check.sh,
# tools/cpu_targets.sh): a scratch directory $tmp removed at exit, a failure flag $bad for the
# script's exit status, and expect DESCRIPTION OUTPUT REGEX (sets bad=1 and prints the output
# when no line of OUTPUT matches REGEX).
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bad=0
expect() {
  if ! grep -Eq -- "$3" <<<"$2"; then echo "FAIL: $1: no line matching '$3' in:"; echo "$2"; bad=1; fi
}
