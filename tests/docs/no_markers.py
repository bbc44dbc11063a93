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

FIXTURES_BAD = [
    "// issue 13: measured", "Issue 19's targets", "# session 9 fixed it", "until session 9 such entries ran",
    "(milestone 2)", "see style.md rule E3", "verl quirk Q-20 fixed", "Q-16 fixed",
    "read ../shared/spec/style.md", "stage 2 of the port", "the previous session's table",
    "verl_algorithms.md section 12",
]
FIXTURES_GOOD = [
    "per-row keys `{uid}_{session}_{index}` as in verl", "the GRPO step's stages",
    "verl divides by the token count; rlflow divides by the group size", "a 2-stage pipeline",
]


def scan(root):
    bad = []
    paths = [os.path.join(root, f) for f in FILES]
    for t in TREES:
        for d, dirs, files in os.walk(os.path.join(root, t)):
            dirs[:] = [x for x in dirs if x not in SKIP_DIRS]
            paths += [os.path.join(d, f) for f in files]
    for p in sorted(paths):
        rel = os.path.relpath(p, root)
        if rel == SELF or not os.path.isfile(p) or os.path.getsize(p) > 2_000_000:
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
    for f in FIXTURES_BAD:
        if not RX.search(f):
            print(f"self-test: not caught: {f}"); ok = False
    for f in FIXTURES_GOOD:
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
