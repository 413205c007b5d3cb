#!/usr/bin/env bash
# Interleaved benchmark of local-llm against llama.cpp's llama-bench (0c1e570), 1 and 2
# threads: pp512, tg128, share of the bandwidth ceiling, start-up and peak RSS; medians of 5
# runs and ratios. Models: the two real tiny ones, and with --phone the phone-scale synthetic
# ones (scripts/bench/phone-models.sh: a Llama-3.2-1B-shaped model in Q4_K_M, Q4_0 and Q8_0, a
# Qwen3-1.7B-shaped one in Q4_K_M).
# Usage: scripts/bench/bench-compare.sh [--quick | --phone | --all] [extra args for bench_compare.py]
set -euo pipefail
cd "$(dirname "$0")/../.."
set_=tiny
case "${1:-}" in
    --quick) set_=quick; shift ;;
    --phone) set_=phone; shift ;;
    --all) set_=all; shift ;;
esac
target="${CARGO_TARGET_DIR:-target}"
cargo build --release --locked -p local-llm-cli >&2
bench=$(scripts/setup/build-llama-bench.sh)
cli=(--cli "$target/release/local-llm" --llama-bench "$bench")
if [ "$set_" = quick ]; then
    exec python3 scripts/bench/bench_compare.py "${cli[@]}" \
        --model "$(scripts/setup/fetch-models.sh smollm2)" --threads 1 -p 64 -n 16 -r 1 "$@"
fi
models=()
if [ "$set_" != phone ]; then
    models+=(--model "$(scripts/setup/fetch-models.sh smollm2)" --model "$(scripts/setup/fetch-models.sh gemma3)")
fi
if [ "$set_" != tiny ]; then
    for m in $(scripts/bench/phone-models.sh llama-1b Q4_K_M Q4_0 Q8_0) \
        $(scripts/bench/phone-models.sh qwen3-1.7b Q4_K_M); do
        models+=(--model "$m")
    done
fi
exec python3 scripts/bench/bench_compare.py "${cli[@]}" "${models[@]}" "$@"
