#!/usr/bin/env python3
"""Test-time oracle: render chat templates with Python jinja2 in a Hugging Face-like environment.

Reads one JSON request on stdin:
  {"template": "<jinja source>" | null,
   "gguf": "<path to a .gguf file>" | null,   # take template and bos/eos texts from the file
   "bos_token": "...", "eos_token": "...",
   "cases": [{"messages": [{"role": ..., "content": ...}], "add_generation_prompt": bool,
              "tools": [...] | absent}]}
Writes one JSON object on stdout:
  {"template": ..., "bos_token": ..., "eos_token": ...,
   "results": [{"output": "..."} | {"error": "..."}]}

The environment mirrors the one transformers uses for apply_chat_template: a sandboxed,
immutable jinja2 environment with trim_blocks, lstrip_blocks and the loop-controls extension,
a `tojson` filter that calls json.dumps(ensure_ascii=False, ...), and the `raise_exception`
and `strftime_now` globals. `tools` is the case's "tools" (None when absent). Messages are passed
as given (Hugging Face's shape, e.g. tool calls with `arguments` as a mapping).
"""
import json
import sys
from datetime import datetime

import jinja2
import jinja2.ext
import jinja2.nodes
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


class TemplateRaised(Exception):
    pass


def raise_exception(message):
    raise TemplateRaised(message)


def tojson(value, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent,
                      separators=separators, sort_keys=sort_keys)


def strftime_now(fmt):
    return datetime.now().strftime(fmt)


class Generation(jinja2.ext.Extension):
    """transformers' `{% generation %}...{% endgeneration %}` (AssistantTracker): the body
    renders as it is (transformers only records where it lands)."""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.Scope(body, lineno=lineno)


def make_env():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[loopcontrols, Generation])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def from_gguf(path):
    from gguf import GGUFReader
    reader = GGUFReader(path)
    fields = reader.fields
    template = None
    if "tokenizer.chat_template" in fields:
        template = fields["tokenizer.chat_template"].contents()
    tokens = fields["tokenizer.ggml.tokens"]

    def token_text(key):
        if key not in fields:
            return ""
        return tokens.contents(int(fields[key].contents()))

    return template, token_text("tokenizer.ggml.bos_token_id"), token_text("tokenizer.ggml.eos_token_id")


def main():
    request = json.load(sys.stdin)
    template = request.get("template")
    bos = request.get("bos_token", "")
    eos = request.get("eos_token", "")
    if request.get("gguf"):
        template, bos, eos = from_gguf(request["gguf"])
    results = []
    if template is not None:
        try:
            compiled = make_env().from_string(template)
        except jinja2.TemplateSyntaxError as err:
            compiled = None
            results = [{"error": f"syntax error: {err}"} for _ in request.get("cases", [])]
        for case in request.get("cases", []) if compiled else []:
            try:
                out = compiled.render(messages=case["messages"], tools=case.get("tools"),
                                      add_generation_prompt=case["add_generation_prompt"],
                                      bos_token=bos, eos_token=eos)
                results.append({"output": out})
            except (TemplateRaised, jinja2.TemplateError) as err:
                results.append({"error": str(err)})
            except (TypeError, ValueError, KeyError, AttributeError, IndexError) as err:
                # The template's own expression failed in Python (e.g. `x in None`).
                results.append({"error": f"{type(err).__name__}: {err}"})
    json.dump({"template": template, "bos_token": bos, "eos_token": eos, "results": results},
              sys.stdout, ensure_ascii=False)


if __name__ == "__main__":
    main()
