#!/usr/bin/env python3
"""Oracle for grammar_generation.rs: validate generated texts against their JSON schemas with the
`jsonschema` package (draft 2020-12, formats checked). Reads [{"schema", "output"}] on stdin and
prints one entry per item: null when the output parses and validates, else the reason."""
import json
import sys

import jsonschema

results = []
for item in json.load(sys.stdin):
    try:
        value = json.loads(item["output"])
    except ValueError as e:
        results.append(f"not JSON: {e}")
        continue
    validator = jsonschema.Draft202012Validator(item["schema"], format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    errors = [e.message for e in validator.iter_errors(value)]
    results.append("; ".join(errors) if errors else None)
json.dump(results, sys.stdout)
