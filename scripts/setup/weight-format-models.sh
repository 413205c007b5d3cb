#!/usr/bin/env bash
# SmolLM2 135M (scripts/setup/fetch-models.sh smollm2, a Q4_1 file) requantized to other weight
# formats by llama.cpp's own llama-quantize (built by build-llama.sh from the pinned sources),
# with an importance matrix computed by llama-imatrix on the evaluation text
# (fetch-eval-text.sh; 16 chunks of 512 tokens after the first 512, which the tests score).
# Cached in ${LOCAL_LLM_CACHE:-$HOME/.cache/local-llm}/weight-formats/HASH (HASH: of this script,
# so a change to the recipe makes new files); builds are serialised with a lock, so parallel
# callers share the files. A model's llama-quantize log lies beside it (MODEL.log).
#
#   scripts/setup/weight-format-models.sh TYPE...   prints one model path per TYPE
#
# TYPE: a tensor type (IQ4_NL, IQ2_XXS, TQ1_0, MXFP4, ...). Every quantizable tensor gets TYPE
# (`--pure`) where its row length allows it; the others get llama-quantize's fallback (IQ4_NL
# for the 256-element i-quants, Q4_0 for TQ1_0/TQ2_0). SmolLM2's rows of 576 fit only the
# 32-element blocks, so the 256-element formats land in the 30 ffn_down matrices (rows of 1536).
# Exceptions:
# - TQ1_0, TQ2_0: only the ffn_down of layers 20-29 are ternary (the others Q4_0). Ternarizing
#   weights that are not ternary (scale = the block's largest magnitude) wrecks a layer: with
#   all 30, PPL is ~800,000 and llama.cpp's AVX2 and native builds disagree by a mean KLD of 0.9
#   (chaos, not a reference); with these 10, PPL ~1,060 and that floor is 0.008.
# - IQ2_S: from ftype IQ2_M (ftype IQ2_S writes IQ2_XS tensors).
# - MXFP4: from ftype MXFP4_MOE (with --pure: MXFP4 everywhere, not only in experts).
set -euo pipefail
# llama-imatrix without weight repacking: its AMX matrix product crashes on AMX CPUs here.
export LLAMA_ARG_REPACK=${LLAMA_ARG_REPACK:-0} OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
[ $# -gt 0 ] || { echo "usage: weight-format-models.sh TYPE..." >&2; exit 2; }
cache="${LOCAL_LLM_CACHE:-$HOME/.cache/local-llm}"
base="$cache/models/SmolLM2-135M-Instruct.Q4_1.gguf"
[ -f "$base" ] || { echo "weight-format-models: run scripts/setup/fetch-models.sh smollm2" >&2; exit 1; }
dir="$cache/weight-formats/$(sha256sum "${BASH_SOURCE[0]}" | cut -c1-16)"
mkdir -p "$dir"
exec 9>"$dir/.lock"
flock 9
imatrix="$dir/smollm2-imatrix.gguf"
if [ ! -f "$imatrix" ]; then
    bin=$("$ROOT/scripts/setup/build-llama.sh" llama-imatrix native)
    text=$("$ROOT/scripts/setup/fetch-eval-text.sh")
    echo "weight-format-models: computing $imatrix" >&2
    "$bin" -m "$base" -f "$text" -o "$imatrix.tmp.gguf" -c 512 --chunk 1 --chunks 16 -t "$(nproc)" \
        >"$imatrix.log" 2>&1 || { cat "$imatrix.log" >&2; exit 1; }
    mv "$imatrix.tmp.gguf" "$imatrix"
fi
quantize=$("$ROOT/scripts/setup/build-llama.sh" llama-quantize native)
for type in "$@"; do
    out="$dir/smollm2-$type.gguf"
    if [ ! -f "$out" ]; then
        ftype="$type"
        extra=()
        case "$type" in
            TQ1_0 | TQ2_0)
                extra=(--tensor-type "blk\.2[0-9]\.ffn_down=${type,,}" --tensor-type ffn_down=q4_0) ;;
            IQ2_S) ftype=IQ2_M ;;
            MXFP4) ftype=MXFP4_MOE ;;
        esac
        echo "weight-format-models: quantizing SmolLM2 to $type" >&2
        "$quantize" --allow-requantize --pure --imatrix "$imatrix" "${extra[@]}" "$base" "$out.tmp" "$ftype" \
            "$(nproc)" >"$out.log" 2>&1 || { cat "$out.log" >&2; exit 1; }
        mv "$out.tmp" "$out"
    fi
    echo "$out"
done
