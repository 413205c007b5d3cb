#!/usr/bin/env bash
# The React Native package's checks, on plain Linux (no NDK, Xcode or Hermes needed):
#   1. npm ci (ubrn sources, react-native for the JSI headers, TypeScript, tsx)
#   2. build the ubrn CLI and the @ubjs/node runtime (cached in ~/.cache/local-llm/ubrn-<version>)
#   3. build the FFI crate (static + shared library) and the local-llm CLI (the test reference)
#   4. regenerate the JSI bindings and turbo-module glue; fail if the committed ones differ
#   5. C++ check: the generated JSI C++ compiles with -Wall -Werror and links with
#      -Wl,--no-undefined against React Native's JSI and our static library
#   6. generate the N-API flavour of the bindings (tests/generated/napi); tsc --noEmit
#   7. JS integration tests (tests/*.test.mts) through ubrn's Node flavour with the real model
#   8. UI tests (npm run test:ui: Jest, tests-ui/) of the hooks, the Jest mock and the example's screens
# Usage: scripts/checks/js-test.sh [all|cpp|napi]   (default all). Needs the default model
# (scripts/setup/fetch-models.sh smollm2), node 20 + npm, g++.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
MODE=${1:-all}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
LIB_DIR=$CARGO_TARGET_DIR/debug
START=$SECONDS
step() { echo "--- [$((SECONDS - START)) s] $*"; }

if [[ ! -x node_modules/.bin/tsc || ! -x node_modules/.bin/eslint ||
    ! -f node_modules/uniffi-bindgen-react-native/package.json ]]; then
    step "npm ci"
    npm ci --no-audit --no-fund
fi

step "ubrn CLI and @ubjs/node runtime"
bash scripts/bindings/ubrn-cli.sh --napi
UBRN=$(bash scripts/bindings/ubrn-cli.sh --print-cli)

step "cargo build (profile test): local-llm-ffi, local-llm CLI"
cargo build --quiet --locked --profile test -p local-llm-ffi
cargo build --quiet --locked --profile test -p local-llm-cli

step "ubrn generate all (JSI bindings + turbo module)"
"$UBRN" generate all --config ubrn.config.yaml "$LIB_DIR/liblocal_llm_ffi.a" >/dev/null
rm -rf rust_modules src/index.web.ts  # its WASM crate and web entry point are not used
node scripts/bindings/ubrn-postgenerate.mjs  # our edits to the generated build files
GENERATED=(src/generated cpp src/native android ios LocalLlm.podspec)
if git rev-parse --git-dir >/dev/null 2>&1; then
    if [[ -n $(git status --porcelain -- "${GENERATED[@]}") ]]; then
        git status --short -- "${GENERATED[@]}"
        echo "ERROR: the generated bindings are out of date: run scripts/bindings/ubrn-generate.sh and commit" >&2
        exit 1
    fi
fi

if [[ $MODE == all || $MODE == cpp ]]; then
    step "C++: compile the generated JSI C++ (-Wall -Werror) and link it (--no-undefined)"
    RN=node_modules/react-native/ReactCommon
    UBRN_DIR=node_modules/uniffi-bindgen-react-native
    out=$CARGO_TARGET_DIR/jsi-linkcheck
    mkdir -p "$out"
    nice g++ -std=c++20 -shared -fPIC -O0 -Wall -Werror -fexceptions -frtti \
        -I cpp -I cpp/generated -I "$UBRN_DIR/cpp/includes" -I "$RN/jsi" -I "$RN/callinvoker" -I "$RN" \
        cpp/generated/*.cpp cpp/*.cpp "$RN/jsi/jsi/jsi.cpp" \
        "$LIB_DIR/liblocal_llm_ffi.a" -Wl,--no-undefined -lpthread -ldl -lm \
        -o "$out/libjsi-bindings-linkcheck.so"
    echo "linked $out/libjsi-bindings-linkcheck.so"
fi

if [[ $MODE == all || $MODE == napi ]]; then
    step "ubrn generate napi bindings (tests/generated/napi)"
    rm -rf tests/generated
    (cd rust/ffi && "$UBRN" generate napi bindings --library --lib-absolute \
        --ts-dir "$ROOT/tests/generated/napi" "$LIB_DIR/liblocal_llm_ffi.so" >/dev/null)

    step "tsc --noEmit (src and tests)"
    node_modules/.bin/tsc --noEmit -p tsconfig.json

    step "JS integration tests (node --test, napi flavour, real model)"
    MODEL=${LOCAL_LLM_MODEL:-${LOCAL_LLM_CACHE:-$HOME/.cache/local-llm}/models/SmolLM2-135M-Instruct.Q4_1.gguf}
    if [[ ! -f $MODEL ]]; then
        echo "ERROR: $MODEL is missing: run scripts/setup/fetch-models.sh smollm2" >&2
        exit 1
    fi
    MINILM=${LOCAL_LLM_MINILM:-${LOCAL_LLM_CACHE:-$HOME/.cache/local-llm}/models/all-MiniLM-L6-v2.f16.gguf}
    if [[ ! -f $MINILM ]]; then
        echo "ERROR: $MINILM is missing: run scripts/setup/fetch-models.sh minilm" >&2
        exit 1
    fi
    LOCAL_LLM_MODEL=$MODEL LOCAL_LLM_MINILM=$MINILM LOCAL_LLM_CLI=$LIB_DIR/local-llm \
        node --expose-gc --import tsx --test --test-concurrency=1 tests/*.test.mts

    step "UI tests (Jest + @testing-library/react-native: hooks, Jest mock, example screens; real model)"
    LOCAL_LLM_MODEL=$MODEL npm run --silent test:ui
fi
step "done ($MODE)"
