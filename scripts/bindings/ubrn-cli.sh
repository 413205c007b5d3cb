#!/usr/bin/env bash
# Build the uniffi-bindgen-react-native (ubrn) CLI and, with `--napi`, the @ubjs/node runtime,
# from the Rust sources shipped in the npm package (node_modules/uniffi-bindgen-react-native).
# Both are cached outside node_modules (npm ci wipes it), keyed by the ubrn version:
#   ${LOCAL_LLM_CACHE:-~/.cache/local-llm}/ubrn-<version>/
# Progress goes to stderr; `--print-cli` prints the CLI's path. The CLI ends up at $UBRN_CACHE/target/debug/uniffi-bindgen-react-native
# and the runtime in $UBRN_CACHE/ubjs-node.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
UBRN_DIR=$ROOT/node_modules/uniffi-bindgen-react-native
if [[ ! -f $UBRN_DIR/package.json ]]; then
    echo "ERROR: $UBRN_DIR is missing; run 'npm ci' first" >&2
    exit 1
fi
VERSION=$(node -p "require('$UBRN_DIR/package.json').version")
UBRN_CACHE=${LOCAL_LLM_CACHE:-$HOME/.cache/local-llm}/ubrn-$VERSION
export CARGO_TARGET_DIR=$UBRN_CACHE/target
UBRN=$CARGO_TARGET_DIR/debug/uniffi-bindgen-react-native

if [[ ! -x $UBRN ]]; then
    echo "building the ubrn $VERSION CLI (first time ~5-8 min) into $CARGO_TARGET_DIR" >&2
    nice cargo build --quiet --manifest-path "$UBRN_DIR/crates/ubrn_cli/Cargo.toml"
fi
if [[ ${1:-} == --print-cli ]]; then
    echo "$UBRN"
    exit 0
fi

if [[ ${1:-} == --napi ]]; then
    out=$UBRN_CACHE/ubjs-node
    if [[ ! -f $out/.built ]]; then
        echo "building the @ubjs/node runtime from $UBRN_DIR/runtimes/napi" >&2
        # Debug build: it shares its dependencies with the CLI build above (saves minutes cold).
        nice cargo build --quiet -p uniffi-runtime-napi --manifest-path "$UBRN_DIR/Cargo.toml"
        rm -rf "$out" && mkdir -p "$out"
        cp -r "$UBRN_DIR"/runtimes/napi/{package.json,index.js,lib.js,index.d.ts,typescript} "$out"/
        cp "$CARGO_TARGET_DIR/debug/libuniffi_runtime_napi.so" "$out/uniffi-runtime-napi.linux-x64-gnu.node"
        "$ROOT/node_modules/.bin/tsc" -p "$out/typescript" --typeRoots "$ROOT/node_modules/@types" --types node
        touch "$out/.built"
    fi
    mkdir -p "$ROOT/node_modules/@ubjs"
    ln -sfn "$out" "$ROOT/node_modules/@ubjs/node"
fi
