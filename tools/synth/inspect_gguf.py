#!/usr/bin/env python3
"""Prints {"arch": ..., "tensors": [names...]} of a GGUF file, read with the PyPI gguf package."""

import json
import sys

from gguf import GGUFReader

reader = GGUFReader(sys.argv[1])
print(json.dumps({
    "arch": reader.fields["general.architecture"].contents(),
    "tensors": [t.name for t in reader.tensors],
}))
