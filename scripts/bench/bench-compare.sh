#!/usr/bin/env bash
# Interleaved benchmark of local-llm against llama.cpp's llama-bench (0c1e570) on both real
# models, 1 and 2 threads: pp512, tg128, start-up and peak RSS; medians of 5 runs and ratios.
# Usage: scripts/bench/bench-compare.sh [--quick] [extra args for bench_compare.py]
set -euo pipefail
cd "$(dirname "$0")/../.."
quick=0
if [ "${1:-}" = "--quick" ]; then quick=1; shift; fi
target="${CARGO_TARGET_DIR:-target}"
cargo build --release --locked -p local-llm-cli >&2
bench=$(scripts/setup/build-llama-bench.sh)
if [ "$quick" = 1 ]; then
    models=(--model "$(scripts/setup/fetch-models.sh smollm2)")
    exec python3 scripts/bench/bench_compare.py --cli "$target/release/local-llm" --llama-bench "$bench" \
        "${models[@]}" --threads 1 -p 64 -n 16 -r 1 "$@"
fi
models=(--model "$(scripts/setup/fetch-models.sh smollm2)" --model "$(scripts/setup/fetch-models.sh gemma3)")
exec python3 scripts/bench/bench_compare.py --cli "$target/release/local-llm" --llama-bench "$bench" \
    "${models[@]}" "$@"
