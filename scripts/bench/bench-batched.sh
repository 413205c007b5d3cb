#!/usr/bin/env bash
# Batching benchmark (issue 14's): N sequences decoding together against one, ours
# (`local-llm bench --parallel`) and llama.cpp 0c1e570's llama-batched-bench, interleaved,
# on SmolLM2 at 2 threads by default. See scripts/bench/bench_batched.py for the method.
# Usage: scripts/bench/bench-batched.sh [--model PATH] [--threads T] [--streams N] [-r ROUNDS] ...
set -euo pipefail
cd "$(dirname "$0")/../.."
target="${CARGO_TARGET_DIR:-target}"
cargo build --release --locked -p local-llm-cli >&2
batched=$(scripts/setup/build-llama.sh llama-batched-bench native)
model=()
case " $* " in *" --model "*) ;; *) model=(--model "$(scripts/setup/fetch-models.sh smollm2)") ;; esac
exec python3 scripts/bench/bench_batched.py --cli "$target/release/local-llm" --batched-bench "$batched" \
    "${model[@]}" "$@"
