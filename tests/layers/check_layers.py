#!/usr/bin/env python3
"""tests/layers/check_layers.py: every '#include <rlflow/...>' under include/ keeps to the layer map.

  check_layers.py --root DIR [--map FILE] [--doc FILE]

Reads the layer map (default DIR/cmake/layers.txt, format in that file) and every .hpp .ipp .cuh .h
under DIR/include/rlflow/. Reports, one line each as 'file:line: message', and exits 1 on:
  - an include of a header of a higher layer (names both layers);
  - an include of a forwarding header from inside the library (only top-layer files may);
  - an include of a file that does not exist;
  - a header in a folder the map does not list (forwarding headers may sit anywhere);
  - a forwarding header whose target is missing or is itself a forwarding header;
  - with --doc, a layers diagram in that doc that differs from the map (tools/layers_diagram.py).
"""
import argparse
import os
import re
import sys

# The map reader and the picture are tools/layers_diagram.py's.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
import layers_diagram  # noqa: E402

EXTENSIONS = (".hpp", ".ipp", ".cuh", ".h")
INCLUDE_RE = re.compile(r'^\s*#\s*include\s*[<"](rlflow/[^>"]+)[>"]')
# A forwarding header: exactly these three lines (plus blank lines), both paths the same.
FORWARDING_RE = re.compile(
    r"\A\s*#pragma once\s*\n"
    r"// moved to <(rlflow/[^>]+)>; this forwarding header goes in the next release\s*\n"
    r"#include <(rlflow/[^>]+)>\s*\Z")


def read_map(path):
    """(ordered layer names, {folder: layer index}) from layers.txt; a folder in two layers is an error."""
    names, folders = [], {}
    try:
        layers = layers_diagram.read_layers(path)
    except ValueError as e:
        raise SystemExit(str(e))
    for name, layer_folders, _ in layers:
        for folder in layer_folders:
            if folder in folders:
                raise SystemExit(f"{path}: folder '{folder}' is already in layer '{names[folders[folder]]}'")
            folders[folder] = len(names)
        names.append(name)
    return names, folders


def forwarding_target(text):
    m = FORWARDING_RE.match(text)
    if m and m.group(1) == m.group(2):
        return m.group(1)
    return None


def check(root, map_path):
    names, folders = read_map(map_path)
    top = len(names) - 1
    include_dir = os.path.join(root, "include")
    base = os.path.join(include_dir, "rlflow")
    headers = {}  # "rlflow/x/y.hpp" -> text
    for d, subdirs, files in os.walk(base):
        subdirs.sort()
        for name in sorted(files):
            if name.endswith(EXTENSIONS):
                path = os.path.join(d, name)
                rel = os.path.relpath(path, include_dir).replace(os.sep, "/")
                with open(path, encoding="utf-8", errors="replace") as f:
                    headers[rel] = f.read()

    forwarding = {rel: t for rel, text in headers.items() if (t := forwarding_target(text))}

    def layer_of(rel):
        """Layer index of a header, or None when its folder is not in the map."""
        if rel in forwarding:
            return top
        folder = os.path.dirname(rel[len("rlflow/"):]) or "."
        return folders.get(folder)

    errors = []
    for rel, text in headers.items():
        shown = "include/" + rel
        if rel in forwarding:
            target = forwarding[rel]
            if target not in headers:
                errors.append(f"{shown}:3: forwarding header to <{target}>, which does not exist")
            elif target in forwarding:
                errors.append(f"{shown}:3: forwarding header to <{target}>, itself a forwarding header")
            continue
        mine = layer_of(rel)
        if mine is None:
            folder = os.path.dirname(rel[len("rlflow/"):]) or "."
            errors.append(f"{shown}:1: folder '{folder}' is in no layer of the map; add it to a "
                          f"layer in cmake/layers.txt or move the file")
            continue
        for number, line in enumerate(text.splitlines(), 1):
            m = INCLUDE_RE.match(line)
            if not m:
                continue
            target = m.group(1)
            if target not in headers:
                errors.append(f"{shown}:{number}: includes <{target}>, which does not exist")
                continue
            if target in forwarding:
                if mine != top:
                    errors.append(f"{shown}:{number}: layer '{names[mine]}' includes the forwarding "
                                  f"header <{target}>; include <{forwarding[target]}>")
                continue
            theirs = layer_of(target)
            if theirs is None:
                continue  # reported for that file
            if theirs > mine:
                errors.append(f"{shown}:{number}: layer '{names[mine]}' includes <{target}> of "
                              f"the higher layer '{names[theirs]}'")
    return errors, len(headers), len(forwarding)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", required=True, help="the tree holding include/ and cmake/")
    ap.add_argument("--map", help="the layer map (default ROOT/cmake/layers.txt)")
    ap.add_argument("--doc", help="a doc whose layers diagram must match the map")
    args = ap.parse_args()
    map_path = args.map or os.path.join(args.root, "cmake", "layers.txt")
    errors, count, forwards = check(args.root, map_path)
    if args.doc:
        with open(args.doc, encoding="utf-8") as f:
            text = f.read()
        try:
            _, have, _ = layers_diagram.split_doc(text, args.doc)
            if have != layers_diagram.block(layers_diagram.read_layers(map_path)):
                errors.append(f"{args.doc}:1: the layers diagram is out of date with {map_path}; "
                              f"run tools/layers_diagram.py --write {args.doc}")
        except ValueError as e:
            errors.append(f"{args.doc}:1: {e}")
    for e in errors:
        print(e)
    if errors:
        print(f"layers: {len(errors)} problem(s) in {count} headers")
        return 1
    print(f"layers: {count} headers ({forwards} forwarding) keep to {map_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
