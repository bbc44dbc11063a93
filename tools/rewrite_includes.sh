#!/usr/bin/env bash
# tools/rewrite_includes.sh [--comments] [ROOT]: point every include of a moved header at its new
# path, from tools/moved_headers.txt ("old -> new", paths under include/). Rewrites
#   - '#include <rlflow/OLD>' and '#include "rlflow/OLD"' in include/ src/ tests/ examples/
#     benchmarks/ tools/ (.hpp .ipp .cuh .h .cpp .cu .cc);
#   - 'rlflow/OLD' path mentions (and 'dir/OLD' for a header in a subfolder) in docs/*.md, README.md, CMakeLists.txt files, *.cmake, Makefile;
#   - with --comments, also path mentions in the code files (comments, strings).
# Forwarding headers (they name the new path already) and the list itself are left alone.
# Lines whose new path is not under include/ (the compiled part's source list) are not applied.
# Idempotent: a second run changes nothing. Prints the files it changed.
set -euo pipefail
comments=0
if [[ "${1:-}" == "--comments" ]]; then comments=1; shift; fi
root="${1:-$(cd "$(dirname "$0")/.." && pwd)}"
exec python3 - "$root" "$comments" <<'PY'
import os, re, sys
root, comments = sys.argv[1], sys.argv[2] == "1"
pairs = []
with open(os.path.join(root, "tools", "moved_headers.txt")) as f:
    for line in f:
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        old, new = (s.strip() for s in line.split("->"))
        if new.startswith("rlflow/"):
            pairs.append((old, new))
alts = "|".join(re.escape(o) for o, _ in sorted(pairs, key=lambda p: -len(p[0])))
table = dict(pairs)
# Docs also name a header in a subfolder without the 'rlflow/' prefix ('detail/wire.hpp').
short = {o[len("rlflow/"):]: n[len("rlflow/"):] for o, n in pairs if o.count("/") > 1}
short_alts = "|".join(re.escape(o) for o in sorted(short, key=len, reverse=True))
text_table = {**table, **short}
path_re = re.compile(r"(?<![A-Za-z0-9_.])(" + alts + r")(?![A-Za-z0-9_])"
                     r"|(?<![A-Za-z0-9_./-])(" + short_alts + r")(?![A-Za-z0-9_])")
include_re = re.compile(r'^(\s*#\s*include\s*[<"])(' + alts + r')([>"])', re.M)
forwarding_re = re.compile(r"moved to <rlflow/[^>]+>; this forwarding header goes in the next release")
code_ext = (".hpp", ".ipp", ".cuh", ".h", ".cpp", ".cu", ".cc")
code_dirs = ("include", "src", "tests", "examples", "benchmarks", "tools")
skip = {os.path.join("tools", "moved_headers.txt")}
skip_dirs = {os.path.join("tests", "layers", "fixtures"), "build", ".git"}

def files():
    for top in code_dirs + ("docs", "cmake", "."):
        base = os.path.join(root, top)
        if not os.path.isdir(base):
            continue
        for d, subdirs, names in os.walk(base):
            rel_d = os.path.relpath(d, root)
            subdirs[:] = [s for s in subdirs
                          if os.path.normpath(os.path.join(rel_d, s)) not in skip_dirs
                          and not s.startswith("build") and not s.startswith(".")]
            if top == ".":
                subdirs[:] = []
            for n in names:
                rel = os.path.normpath(os.path.join(rel_d, n))
                if rel in skip:
                    continue
                first = rel.split(os.sep)[0]
                if n.endswith(code_ext) and first in code_dirs:
                    yield rel, "code"
                elif (n.endswith(".md") and (first == "docs" or rel == "README.md")) or \
                        n in ("CMakeLists.txt", "Makefile") or n.endswith(".cmake") or n.endswith(".cmake.in"):
                    yield rel, "text"

seen = set()
for rel, kind in files():
    if rel in seen:
        continue
    seen.add(rel)
    path = os.path.join(root, rel)
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if forwarding_re.search(text):
        continue
    if kind == "code" and not comments:
        new = include_re.sub(lambda m: m.group(1) + table[m.group(2)] + m.group(3), text)
    else:
        new = path_re.sub(lambda m: text_table[m.group(0)], text)
    if new != text:
        with open(path, "w", encoding="utf-8") as f:
            f.write(new)
        print(rel)
PY
