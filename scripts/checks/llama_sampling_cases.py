#!/usr/bin/env python3
"""Extract llama.cpp's own sampler test cases (tests/test-sampling.cpp of llama.cpp 0c1e570, as
vendored by the PyPI source package llama-cpp-python==0.3.36; the sdist is downloaded once into
~/.cache/local-llm/llama.cpp, see llama_grammar_cases.py) and print them as JSON on stdout:

  {"cases": [{"line": N, "name": "test_top_k", "args": [...]}, ...],
   "defaults": {"top_k": 40, ..., "dry_sequence_breakers": ["\n", ...]}}

`cases` has one entry per `test_*(...)` call in `main()`, in order; `defaults` are the
initializers of `struct common_params_sampling` in common/common.h (the defaults of llama.cpp's
tools). Arguments are C++ expressions of number
literals (`0.1f`, `1e-12`, `9997.9f/9999.0f`), brace lists (nested) and string literals; they
are evaluated here (lists become JSON arrays). A call this script cannot evaluate is an error, so
a new kind of case in a later llama.cpp cannot pass unnoticed.
"""
import ast
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llama_grammar_cases import sources  # noqa: E402


def evaluate(node):
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, str)):
        return node.value
    if isinstance(node, ast.List):
        return [evaluate(e) for e in node.elts]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -evaluate(node.operand)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
        return evaluate(node.left) / evaluate(node.right)
    raise ValueError(f"cannot evaluate {ast.dump(node)}")


def arguments(text):
    """The arguments of a call, as Python values (C++ float suffixes dropped, braces as lists)."""
    py = re.sub(r"(\d(?:\.\d*)?(?:e-?\d+)?)f\b", r"\1", text)
    py = py.replace("{", "[").replace("}", "]")
    tree = ast.parse(f"({py},)", mode="eval")
    return [evaluate(e) for e in tree.body.elts]


def main():
    src = sources(["test-sampling.cpp"])["test-sampling.cpp"]
    start = src.index("int main(")
    body = src[src.index("{", start) + 1:]
    first_line = src[: src.index("{", start) + 1].count("\n") + 1
    cases = []
    for m in re.finditer(r"^[ \t]*(test_\w+)\((.*)\);", body, re.M):
        line = first_line + body[: m.start()].count("\n")
        args = m.group(2).split("//")[0]
        cases.append({"line": line, "name": m.group(1), "args": arguments(args) if args.strip() else []})
    json.dump({"cases": cases, "defaults": defaults()}, sys.stdout)


def defaults():
    """`name = value` initializers of common_params_sampling (numbers, bools, string lists)."""
    src = sources(["common.h"], folder="common/")["common.h"]
    start = src.index("struct common_params_sampling {")
    body = src[start:src.index("\n};", start)]
    out = {}
    for m in re.finditer(r"^\s*(?:int32_t|float|bool)\s+(\w+)\s*=\s*([^;]+);", body, re.M):
        value = m.group(2).strip()
        out[m.group(1)] = {"true": True, "false": False}.get(value) if value in ("true", "false") \
            else arguments(value)[0]
    m = re.search(r"dry_sequence_breakers\s*=\s*(\{[^;]*\});", body)
    out["dry_sequence_breakers"] = arguments(m.group(1))[0]
    return out


if __name__ == "__main__":
    main()
