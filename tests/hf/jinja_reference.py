"""Independent reference for rlflow's chat-template engine: Jinja2 in the environment that
transformers builds for chat templates (a sandbox with trim_blocks and lstrip_blocks, loop
controls, tojson as json.dumps with ensure_ascii=False, raise_exception). Written from Jinja2's
and transformers' documented behaviour.

Usage: jinja_reference.py IN OUT. IN holds JSON lines {"template": str, "vars": {...}}; OUT gets
one JSON line per case: {"ok": rendered} or {"error": message}. Exit code 3 when jinja2 is
missing (the caller skips)."""
import json
import sys

try:
    import jinja2
    import jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment
except ImportError as e:  # the caller prints rlflow-skip
    print(f"jinja2 is not importable by {sys.executable}: {e}", file=sys.stderr)
    sys.exit(3)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def main():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    cache = {}
    with open(sys.argv[1], encoding="utf-8") as f, open(sys.argv[2], "w", encoding="utf-8") as out:
        for line in f:
            case = json.loads(line)
            src = case["template"]
            try:
                if src not in cache:
                    cache[src] = env.from_string(src)
                result = {"ok": cache[src].render(**case["vars"])}
            except Exception as e:  # any failure is reported, the C++ side expects an error too
                result = {"error": f"{type(e).__name__}: {e}"}
            out.write(json.dumps(result, ensure_ascii=False) + "\n")


main()
