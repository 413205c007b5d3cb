#!/usr/bin/env bash
# Regenerate the React Native bindings from the Rust API of rust/ffi:
#   src/generated/     TypeScript API (uniffi-bindgen-react-native)
#   cpp/generated/     JSI C++ of that API
#   cpp/, src/native/, android/, ios/, LocalLlm.podspec
#                      turbo-module glue, then scripts/bindings/ubrn-postgenerate.mjs: the build files
#                      stop with the command to run when the prebuilt libraries are missing
# Builds the ubrn CLI first if needed (scripts/bindings/ubrn-cli.sh) and the host static library that
# ubrn reads the API from. Generated files are committed; scripts/checks/js-test.sh checks that they
# are up to date.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
UBRN=$(bash scripts/bindings/ubrn-cli.sh --print-cli)
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
cargo build --quiet --locked --profile test -p local-llm-ffi
"$UBRN" generate all --config ubrn.config.yaml "$TARGET_DIR/debug/liblocal_llm_ffi.a"
rm -rf "$ROOT/rust_modules" "$ROOT/src/index.web.ts"  # its WASM crate and web entry point are not used
node scripts/bindings/ubrn-postgenerate.mjs  # our edits to the generated build files
