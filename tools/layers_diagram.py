#!/usr/bin/env python3
"""tools/layers_diagram.py: the layer picture of docs/architecture.md, written from cmake/layers.txt.

  layers_diagram.py [--root DIR]          print the diagram block
  layers_diagram.py --write DOC [--root]  put it into DOC between the marker comments
  layers_diagram.py --check DOC [--root]  exit 1 when DOC's block differs from the map

The block sits between '<!-- layers diagram begin -->' and '<!-- layers diagram end -->'.
"""
import argparse
import os
import sys

BEGIN = "<!-- layers diagram begin (tools/layers_diagram.py writes this block) -->"
END = "<!-- layers diagram end -->"


def read_layers(path):
    """[(name, [folders], description)], bottom-up, from a layers.txt."""
    layers = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            text = line.strip()
            if not text or text.startswith("#"):
                continue
            parts = [p.strip() for p in text.split("|")]
            if len(parts) != 3 or not parts[0] or not parts[1]:
                raise ValueError(f"{path}:{number}: expected 'name | folders | description'")
            layers.append((parts[0], parts[1].split(), parts[2]))
    return layers


def render(layers):
    """The diagram: one row per layer, the top layer first, with its folders."""
    def folders(fs):
        return "  ".join("include/rlflow/ (top folder)" if f == "." else f + "/" for f in fs)

    name_w = max(len(n) for n, _, _ in layers)
    rows = [(n, folders(fs)) for n, fs, _ in reversed(layers)]
    body_w = max(len(f) for _, f in rows)
    rule = "+-" + "-" * name_w + "-+-" + "-" * body_w + "-+"
    out = ["```text", rule]
    for n, f in rows:
        out.append("| " + n.ljust(name_w) + " | " + f.ljust(body_w) + " |")
        out.append(rule)
    out.append("  each layer may include its own headers and those of every layer below it")
    out.append("```")
    return "\n".join(out)


def block(layers):
    return BEGIN + "\n" + render(layers) + "\n" + END


def split_doc(text, doc):
    b, e = text.find(BEGIN), text.find(END)
    if b < 0 or e < b:
        raise ValueError(f"{doc}: the markers '{BEGIN}' and '{END}' are missing")
    return text[:b], text[b:e + len(END)], text[e + len(END):]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    ap.add_argument("--write", metavar="DOC")
    ap.add_argument("--check", metavar="DOC")
    args = ap.parse_args()
    layers = read_layers(os.path.join(args.root, "cmake", "layers.txt"))
    want = block(layers)
    doc = args.write or args.check
    if not doc:
        print(render(layers))
        return 0
    with open(doc, encoding="utf-8") as f:
        text = f.read()
    head, have, tail = split_doc(text, doc)
    if args.check:
        if have != want:
            print(f"{doc}: the layers diagram is out of date with cmake/layers.txt; "
                  f"run tools/layers_diagram.py --write {doc}")
            return 1
        return 0
    if have != want:
        with open(doc, "w", encoding="utf-8") as f:
            f.write(head + want + tail)
    return 0


if __name__ == "__main__":
    sys.exit(main())
