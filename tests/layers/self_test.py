#!/usr/bin/env python3
"""tests/layers/self_test.py: check_layers.py fails, naming file:line and the layers, on the
fixture trees under tests/layers/fixtures/, and passes on the one that keeps to its map."""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKER = os.path.join(HERE, "check_layers.py")


def run(tree, *extra):
    root = os.path.join(HERE, "fixtures", tree)
    p = subprocess.run([sys.executable, CHECKER, "--root", root, *extra],
                       capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


failures = []


def expect(tree, rc_want, lines_want, *extra):
    rc, out = run(tree, *extra)
    if rc != rc_want:
        failures.append(f"{tree}: exit status {rc}, expected {rc_want}; output:\n{out}")
    for line in lines_want:
        if line not in out.splitlines():
            failures.append(f"{tree}: missing the line\n  {line}\nin the output:\n{out}")
    problems = [l for l in out.splitlines() if l.startswith("include/") or ".md:" in l]
    if len(problems) != len(lines_want):
        failures.append(f"{tree}: {len(problems)} problems reported, expected {len(lines_want)}:\n{out}")


expect("good", 0, [])
expect("upward", 1, [
    "include/rlflow/low/a.hpp:4: layer 'low' includes <rlflow/high/b.hpp> of the higher layer 'high'",
])
misc_doc = os.path.join(HERE, "fixtures", "misc", "architecture.md")
misc_map = os.path.join(HERE, "fixtures", "misc", "cmake", "layers.txt")
expect("misc", 1, [
    "include/rlflow/high/b.hpp:2: layer 'high' includes the forwarding header <rlflow/a.hpp>; "
    "include <rlflow/low/a.hpp>",
    "include/rlflow/high/b.hpp:3: includes <rlflow/low/gone.hpp>, which does not exist",
    "include/rlflow/stray/c.hpp:1: folder 'stray' is in no layer of the map; add it to a layer in "
    "cmake/layers.txt or move the file",
    f"{misc_doc}:1: the layers diagram is out of date with {misc_map}; "
    f"run tools/layers_diagram.py --write {misc_doc}",
], "--doc", misc_doc)

for f in failures:
    print(f)
print("layers self-test:", "FAILED" if failures else "passed (3 fixture trees)")
sys.exit(1 if failures else 0)
