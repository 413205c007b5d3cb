#!/usr/bin/env python3
"""Extract llama.cpp's own grammar test cases (commit 0c1e570, vendored by the PyPI source
package llama-cpp-python==0.3.36) and print them as JSON on stdout.

The sdist is downloaded once into ~/.cache/local-llm/llama.cpp (as scripts/setup/build-llama-bench.sh
does) and only vendor/llama.cpp/tests/test-grammar-*.cpp and test-json-schema-to-grammar.cpp
are read. Output:
  {"integration": [{"kind": "grammar"|"schema", "desc", "source", "root", "passing", "failing"}],
                  # passing/failing null: the strings hold token(ID) pieces (token-level grammars)
   "build": [{"source", "root", "ok"}],           # grammars that must (not) build
   "parser": [{"source", "ok"}],                  # test-grammar-parser.cpp verify_parsing/failure
   "schemas": [{"name", "schema", "ok"}]}         # test-json-schema-to-grammar.cpp
"""
import json
import os
import re
import subprocess
import sys
import tarfile

VERSION = "0.3.36"
SDIST = f"llama_cpp_python-{VERSION}.tar.gz"
PREFIX = f"llama_cpp_python-{VERSION}/vendor/llama.cpp/"
FILES = ["test-grammar-integration.cpp", "test-grammar-parser.cpp", "test-json-schema-to-grammar.cpp"]


def sources(files=FILES, folder="tests/"):
    """The text of `files` (names in llama.cpp's `folder`), from the sdist, by name."""
    cache = os.path.join(os.environ.get("LOCAL_LLM_CACHE", os.path.expanduser("~/.cache/local-llm")), "llama.cpp")
    os.makedirs(cache, exist_ok=True)
    path = os.path.join(cache, SDIST)
    if not os.path.exists(path):
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary=llama-cpp-python",
                        f"llama-cpp-python=={VERSION}", "-d", cache], check=True, stdout=sys.stderr)
    out = {}
    with tarfile.open(path) as tar:
        for name in files:
            out[name] = tar.extractfile(PREFIX + folder + name).read().decode("utf-8")
    return out


SIMPLE_ESCAPES = {"n": 10, "t": 9, "r": 13, "0": 0, "\\": 92, '"': 34, "'": 39, "?": 63, "a": 7, "b": 8, "f": 12, "v": 11}


def lex(src):
    """C++ tokens: ("str", text) for string literals, ("id", name), ("num", text), ("p", char)."""
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        if c.isspace():
            i += 1
        elif src.startswith("//", i):
            i = src.find("\n", i) if src.find("\n", i) >= 0 else n
        elif src.startswith("/*", i):
            i = src.find("*/", i) + 2
        elif src.startswith('R"', i):
            j = src.index("(", i)
            delim = src[i + 2:j]
            end = src.index(")" + delim + '"', j)
            yield ("str", src[j + 1:end])
            i = end + len(delim) + 2
        elif c == '"':
            buf = bytearray()
            i += 1
            while src[i] != '"':
                if src[i] == "\\":
                    e = src[i + 1]
                    if e == "x":
                        m = re.match(r"[0-9a-fA-F]+", src[i + 2:])
                        buf.append(int(m.group(0), 16) & 0xFF)
                        i += 2 + len(m.group(0))
                    elif e in "uU":
                        k = 4 if e == "u" else 8
                        buf += chr(int(src[i + 2:i + 2 + k], 16)).encode("utf-8")
                        i += 2 + k
                    elif e in "01234567" and e != "0" or (e == "0" and src[i + 2:i + 3].isdigit()):
                        m = re.match(r"[0-7]{1,3}", src[i + 1:])
                        buf.append(int(m.group(0), 8))
                        i += 1 + len(m.group(0))
                    else:
                        buf.append(SIMPLE_ESCAPES[e])
                        i += 2
                else:
                    buf += src[i].encode("utf-8")
                    i += 1
            i += 1
            yield ("str", buf.decode("utf-8", errors="surrogateescape"))
        elif c.isalpha() or c == "_":
            m = re.match(r"[A-Za-z_][A-Za-z0-9_]*", src[i:])
            yield ("id", m.group(0))
            i += len(m.group(0))
        elif c.isdigit():
            m = re.match(r"[0-9]+", src[i:])
            yield ("num", m.group(0))
            i += len(m.group(0))
        else:
            yield ("p", c)
            i += 1


def calls(tokens, name):
    """Argument lists of every call `name(...)`: each argument is a string (adjacent literals
    joined), a list of strings, an identifier, or None for anything else."""
    out = []
    for k, t in enumerate(tokens):
        if t != ("id", name) or k + 1 >= len(tokens) or tokens[k + 1] != ("p", "("):
            continue
        if k > 0 and tokens[k - 1] in (("id", "void"), ("id", "bool")):
            continue  # the definition
        args, cur, depth, j = [], [], 0, k + 2
        while True:
            tok = tokens[j]
            if tok[0] == "p" and tok[1] in "({[":
                depth += 1
            elif tok[0] == "p" and tok[1] in ")}]":
                if depth == 0:
                    args.append(cur)
                    break
                depth -= 1
            if tok == ("p", ",") and depth == 0:
                args.append(cur)
                cur = []
            else:
                cur.append(tok)
            j += 1
        out.append([value(a) for a in args])
    return out


def value(toks):
    if toks and all(t[0] == "str" for t in toks):
        return "".join(t[1] for t in toks)
    if len(toks) == 1 and toks[0][0] == "id":
        return ("id", toks[0][1])
    if toks and toks[0] == ("p", "{") and toks[-1] == ("p", "}"):
        items, cur = [], []
        for t in toks[1:-1] + [("p", ",")]:
            if t == ("p", ","):
                if cur:
                    if not all(x[0] == "str" for x in cur):
                        return None
                    items.append("".join(x[1] for x in cur))
                cur = []
            else:
                cur.append(t)
        return items
    return None


def functions(src):
    """Map of `static void NAME()` bodies (by a brace count) in `src`."""
    out = {}
    for m in re.finditer(r"static void (\w+)\(\)\s*\{", src):
        depth, i = 1, m.end()
        while depth:
            depth += {"{": 1, "}": -1}.get(src[i], 0)
            i += 1
        out[m.group(1)] = src[m.end():i - 1]
    return out


def integration(src):
    tokens = list(lex(src))
    cases = []
    for kind in ("grammar", "schema"):
        for args in calls(tokens, "test_" + kind):
            desc, source, passing, failing = args
            assert isinstance(source, str), desc
            if not (isinstance(passing, list) and isinstance(failing, list)):
                # Strings built from token(ID) pieces: token-level grammars.
                cases.append({"kind": kind, "desc": desc, "source": source, "root": "root",
                              "passing": None, "failing": None})
                continue
            cases.append({"kind": kind, "desc": desc, "source": source, "root": "root",
                          "passing": passing, "failing": failing})
    build = []
    for fname, body in functions(src).items():
        if not fname.startswith(("test_failure", "test_custom_root")):
            continue
        ftoks = list(lex(body))
        variables = {}
        for k in range(len(ftoks) - 2):
            if ftoks[k][0] == "id" and ftoks[k + 1] == ("p", "=") and ftoks[k + 2][0] == "str":
                j, parts = k + 2, []
                while ftoks[j][0] == "str":
                    parts.append(ftoks[j][1])
                    j += 1
                variables[ftoks[k][1]] = "".join(parts)
        for args in calls(ftoks, "test_build_grammar_fails"):
            build.append({"source": variables[args[0][1]], "root": "root", "ok": False, "from": fname})
        # `X = build_grammar_with_root(VAR, "ROOT"); assert(X == nullptr)` (or != nullptr).
        for m in re.finditer(r"(\w+)\s*=\s*build_grammar_with_root\((\w+),\s*\"([^\"]*)\"\);\s*assert\(\1 (==|!=) nullptr\)", body):
            build.append({"source": variables[m.group(2)], "root": m.group(3), "ok": m.group(4) == "!=", "from": fname})
        if "parsed_grammar.parse" in body:
            # Missing root / missing reference: neither builds with root "root".
            for var in re.findall(r"parsed_grammar\.parse\((\w+)\.c_str\(\)\)", body):
                build.append({"source": variables[var], "root": "root", "ok": False, "from": fname})
    return cases, build


def parser(src):
    tokens = list(lex(src))
    out = []
    for args in calls(tokens, "verify_parsing"):
        out.append({"source": args[0], "ok": True})
    for args in calls(tokens, "verify_failure"):
        out.append({"source": args[0], "ok": False})
    return out


def schemas(src):
    tokens = list(lex(src))
    out = []
    for k in range(len(tokens) - 4):
        # test({ SUCCESS|FAILURE, "name", schema, grammar })
        if tokens[k] == ("id", "test") and tokens[k + 1] == ("p", "(") and tokens[k + 2] == ("p", "{") \
                and tokens[k + 3][0] == "id" and tokens[k + 3][1] in ("SUCCESS", "FAILURE"):
            j = k + 5
            name = tokens[j][1]
            j += 2
            parts = []
            while tokens[j][0] == "str":
                parts.append(tokens[j][1])
                j += 1
            out.append({"name": name, "schema": "".join(parts), "ok": tokens[k + 3][1] == "SUCCESS"})
    return out


def main():
    src = sources()
    cases, build = integration(src["test-grammar-integration.cpp"])
    json.dump({"integration": cases, "build": build, "parser": parser(src["test-grammar-parser.cpp"]),
               "schemas": schemas(src["test-json-schema-to-grammar.cpp"])}, sys.stdout, ensure_ascii=False)


if __name__ == "__main__":
    main()
