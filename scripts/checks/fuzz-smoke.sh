#!/usr/bin/env bash
# Coverage-guided fuzzing of the engine's untrusted inputs (rust/fuzz: GGUF reader, tokenizer,
# chat templates, sampling options, GBNF grammars, JSON schema → GBNF, session files) with libFuzzer and AddressSanitizer, SECONDS per target.
#   scripts/checks/fuzz-smoke.sh [SECONDS (default 30)] [TARGET...]   (default: every target)
# LOCAL_LLM_FUZZ_TIMEOUT: seconds one input may take before libFuzzer calls it a hang
# (default 20: a chat-template render may run up to its 2 s limit, and the target renders up
# to four times; raise it on a loaded machine, where ASan builds of the real tokenizers need
# more than 10 s to load).
# Uses the default toolchain with RUSTC_BOOTSTRAP=1 (sanitizer flags are nightly-only), g++ for
# libFuzzer's C++, and the test models
# (scripts/setup/fetch-models.sh) for the tokenizer target. Seeds: rust/fuzz/corpus/<target>
# (rust/fuzz/make_seeds.py); what libFuzzer finds goes to rust/fuzz/work/<target> (ignored by
# git) and crashes to rust/fuzz/artifacts/<target>/: the run then fails, and the crashing
# input belongs in a regression test among the engine's tests (rust/engine/tests/).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
FUZZ=$ROOT/rust/fuzz
SECS=${1:-30}
shift || true
TARGETS=("$@")
[[ ${#TARGETS[@]} -gt 0 ]] || TARGETS=(gguf tokenizer chat_template sampling grammar json_schema state_file)

# The machine's one (stable) toolchain, with nightly flags unlocked: what CI has.
CARGO=(cargo)
export RUSTC_BOOTSTRAP=1
TRIPLE=$(rustc -vV | sed -n 's/^host: //p')
# What cargo-fuzz passes: SanitizerCoverage feeding libFuzzer, ASan, the `fuzzing` cfg.
export RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing -Zsanitizer=address \
-Cforce-frame-pointers"
export CARGO_TARGET_DIR=$FUZZ/target
echo "--- building ${TARGETS[*]} (${CARGO[*]}, $TRIPLE)"
"${CARGO[@]}" build --quiet --locked --release --manifest-path "$FUZZ/Cargo.toml" \
    --target "$TRIPLE" $(printf -- '--bin %s ' "${TARGETS[@]}")

status=0
for t in "${TARGETS[@]}"; do
    mkdir -p "$FUZZ/work/$t" "$FUZZ/artifacts/$t"
    echo "--- fuzzing $t for ${SECS} s"
    log=$FUZZ/work/$t.log
    if "$CARGO_TARGET_DIR/$TRIPLE/release/$t" "$FUZZ/work/$t" "$FUZZ/corpus/$t" \
        -max_total_time="$SECS" -timeout="${LOCAL_LLM_FUZZ_TIMEOUT:-20}" -rss_limit_mb=2048 -malloc_limit_mb=1024 \
        -max_len=65536 -artifact_prefix="$FUZZ/artifacts/$t/" -print_final_stats=1 \
        2>"$log"; then
        grep -E '^#[0-9]+[[:space:]]+(INITED|DONE)|^stat::(number_of_executed_units|new_units_added|peak_rss_mb)' "$log" || true
    else
        tail -n 40 "$log" >&2
        echo "FAIL: $t (full log: $log; input: $FUZZ/artifacts/$t/)" >&2
        status=1
    fi
done
exit $status
