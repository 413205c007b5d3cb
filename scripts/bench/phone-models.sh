#!/usr/bin/env bash
# Phone-scale benchmark models: random weights in the shape of a real 1-2 B model
# (tools/synth/make_model.py), quantized by llama.cpp's llama-quantize built from the same
# sources as the llama-bench baseline. Speed does not depend on the weights' values. Cached in
# ~/.cache/local-llm/bench (several GB: the F16 file is kept to quantize other types from).
#
#   scripts/bench/phone-models.sh KIND TYPE...   prints one model path per TYPE
#
# KIND: llama-1b (Llama 3.2 1B's shape), qwen3-1.7b, lfm2-1.2b or qwen35-2b; TYPE: a llama-quantize type name
# (Q4_K_M, Q4_0, Q8_0, IQ4_XS, IQ2_XXS, TQ2_0, ...). The i-quants that llama-quantize refuses
# without an importance matrix get one from llama-imatrix (one 128-token chunk of the
# evaluation text; the values do not matter for speed).
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
        imatrix=()
        case "$type" in
        IQ1_* | IQ2_* | IQ3_XXS)
            im="$dir/$kind.imatrix.gguf"
            if [ ! -f "$im" ]; then
                echo "phone-models: importance matrix for $kind" >&2
                "$("$ROOT/scripts/setup/build-llama.sh" llama-imatrix native)" -m "$f16" \
                    -f "$("$ROOT/scripts/setup/fetch-eval-text.sh")" -c 128 --chunks 1 \
                    -o "$im.tmp" >"$im.log" 2>&1 || { cat "$im.log" >&2; exit 1; }
                mv "$im.tmp" "$im"
            fi
            imatrix=(--imatrix "$im")
            ;;
        esac
        "$quantize" "${imatrix[@]}" "$f16" "$out.tmp" "$type" >"$out.log" 2>&1 ||
            { cat "$out.log" >&2; exit 1; }
        mv "$out.tmp" "$out"
    fi
    echo "$out"
done
