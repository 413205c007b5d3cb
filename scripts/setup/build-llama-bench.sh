#!/usr/bin/env bash
# llama.cpp's llama-bench (native build) for side-by-side benchmarks: see build-llama.sh.
exec "$(dirname "$0")/build-llama.sh" llama-bench native
