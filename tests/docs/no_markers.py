#!/usr/bin/env python3
"""Fails, naming file:line, when a history, work-item or spec-rule marker appears in the source,
test, docs, example, tool or build trees. --self-test checks that each pattern catches its fixture
line and that plain reference text passes."""
import os, re, sys

PATTERNS = [
    r"\bissues? [0-9]+", r"\bsessions? [0-9]+", r"\b(this|that|previous|first|second|earlier|next|last) session\b",
    r"\buntil session\b", r"\bmilestones? [0-9]+", r"\bstages? [0-9]+\b(?! ?[x×:])", r"\bstyle\.md\b",
    r"\banchors\.md\b", r"\bquirks? Q-[0-9]+", r"\bQ-[0-9]+\b", r"\bspec/", r"\.\./shared/",
    r"\brule [A-Z][0-9]+\b", r"\(rule [A-Z][0-9]+", r"\bverl_(?!mapping)[a-z_]+\.md\b",
]
RX = re.compile("|".join(f"(?:{p})" for p in PATTERNS), re.IGNORECASE)
TREES = ["include", "src", "tests", "docs", "examples", "tools", "benchmarks"]
FILES = ["README.md", "CMakeLists.txt", "Makefile"]
SKIP_DIRS = {"corpus", "node_modules", "__pycache__"}
SELF = os.path.normpath("tests/docs/no_markers.py")

# The self-test's lines (bad: must be caught, good: must pass) are test data in a file of their
# own, which the scan skips like this script.
FIXTURES = os.path.normpath("tests/docs/no_markers_fixtures.txt")


def fixtures():
    here = os.path.dirname(os.path.abspath(__file__))
    bad, good = [], []
    for line in open(os.path.join(here, os.path.basename(FIXTURES)), encoding="utf-8"):
        kind, _, text = line.rstrip("\n").partition(": ")
        (bad if kind == "bad" else good if kind == "good" else []).append(text)
    return bad, good


def scan(root):
    bad = []
    paths = [os.path.join(root, f) for f in FILES]
    for t in TREES:
        for d, dirs, files in os.walk(os.path.join(root, t)):
            dirs[:] = [x for x in dirs if x not in SKIP_DIRS]
            paths += [os.path.join(d, f) for f in files]
    for p in sorted(paths):
        rel = os.path.relpath(p, root)
        if rel in (SELF, FIXTURES) or not os.path.isfile(p) or os.path.getsize(p) > 2_000_000:
            continue
        try:
            text = open(p, encoding="utf-8").read()
        except (UnicodeDecodeError, OSError):
            continue
        for n, line in enumerate(text.split("\n"), 1):
            m = RX.search(line)
            if m:
                bad.append(f"{rel}:{n}: '{m.group(0)}': {line.strip()[:160]}")
    return bad


def self_test():
    ok = True
    bad_lines, good_lines = fixtures()
    if not bad_lines or not good_lines:
        print("self-test: no fixture lines read"); ok = False
    for f in bad_lines:
        if not RX.search(f):
            print(f"self-test: not caught: {f}"); ok = False
    for f in good_lines:
        if RX.search(f):
            print(f"self-test: caught reference text: {f}"); ok = False
    return ok


if __name__ == "__main__":
    if "--self-test" in sys.argv:
        sys.exit(0 if self_test() else 1)
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    bad = scan(root)
    for b in bad:
        print(b)
    if bad:
        print(f"{len(bad)} history / work-item markers: say the fact in present tense (git keeps the history)")
    sys.exit(1 if bad else 0)
