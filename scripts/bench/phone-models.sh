#!/usr/bin/env bash
# Phone-scale benchmark models: random weights in the shape of a real 1-2 B model
# (tools/synth/make_model.py), quantized by llama.cpp's llama-quantize built from the same
# sources as the llama-bench baseline. Speed does not depend on the weights' values. Cached in
# ~/.cache/local-llm/bench (several GB: the F16 file is kept to quantize other types from).
#
#   scripts/bench/phone-models.sh KIND TYPE...   prints one model path per TYPE
#
# KIND: llama-1b (Llama 3.2 1B's shape) or qwen3-1.7b; TYPE: a llama-quantize type name
# (Q4_K_M, Q4_0, Q8_0, ...).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
kind="${1:?usage: phone-models.sh KIND TYPE...}"
shift
[ $# -gt 0 ] || { echo "phone-models.sh: no TYPE given" >&2; exit 2; }
dir="${LOCAL_LLM_CACHE:-$HOME/.cache/local-llm}/bench"
mkdir -p "$dir"
py=python3
[ -x "$ROOT/.cache/venv/bin/python3" ] && py="$ROOT/.cache/venv/bin/python3"
exec 9>"$dir/.lock-$kind"
flock 9
f16="$dir/$kind-F16.gguf"
if [ ! -f "$f16" ]; then
    echo "phone-models: writing $f16" >&2
    "$py" "$ROOT/tools/synth/make_model.py" "$kind" "$f16" >/dev/null
fi
quantize=$("$ROOT/scripts/setup/build-llama.sh" llama-quantize native)
for type in "$@"; do
    out="$dir/$kind-$type.gguf"
    if [ ! -f "$out" ]; then
        echo "phone-models: quantizing $kind to $type" >&2
        "$quantize" "$f16" "$out.tmp" "$type" >"$out.log" 2>&1 ||
            { cat "$out.log" >&2; exit 1; }
        mv "$out.tmp" "$out"
    fi
    echo "$out"
done
