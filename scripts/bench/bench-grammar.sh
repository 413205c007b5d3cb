#!/usr/bin/env bash
# Generation speed with and without a grammar: `local-llm run` on one thread, greedy, the same
# chat prompt, unconstrained vs constrained to any JSON object (`-j '{"type":"object"}'`), each
# run R times; prints the median tg tok/s of both and their ratio (constrained / unconstrained).
# A benchmark, not a test. Usage: scripts/bench/bench-grammar.sh [MODEL.gguf] [R=5] [N=128]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
MODEL=${1:-${LOCAL_LLM_CACHE:-$HOME/.cache/local-llm}/models/SmolLM2-135M-Instruct.Q4_1.gguf}
R=${2:-5}
N=${3:-128}
cargo build --release --quiet -p local-llm-cli --manifest-path "$ROOT/Cargo.toml"
BIN=${CARGO_TARGET_DIR:-$ROOT/target}/release/local-llm
PROMPT="Describe a car with many details, as JSON."
tps() {  # median generation tok/s of R runs of `local-llm run ARGS...`
    for _ in $(seq "$R"); do
        "$BIN" run -m "$MODEL" --chat -p "$PROMPT" -n "$N" --temp 0 -t 1 "$@" 2>&1 >/dev/null |
            sed -n 's/.*generation: \([0-9]*\) tokens in [0-9.]* ms (\([0-9.]*\) tok\/s).*/\2 \1/p'
    done | sort -n | awk '{a[NR]=$1; n[NR]=$2} END {m=int((NR+1)/2); printf "%s %s\n", a[m], n[m]}'
}
read -r free free_n < <(tps --ignore-eos)
read -r json json_n < <(tps -j '{"type":"object"}')
echo "unconstrained: $free tok/s ($free_n tokens)"
echo "json_object grammar: $json tok/s ($json_n tokens)"
awk -v a="$json" -v b="$free" 'BEGIN {printf "ratio: %.3f\n", a / b}'
