#!/usr/bin/env bash
# Embedding throughput (issue 34): texts per second for 100 short texts, ours (`local-llm
# embedding -f FILE`) against llama.cpp 0c1e570's llama-embedding on the same file, interleaved,
# median of ROUNDS runs (default 5), whole-process wall time (load included), 2 threads, batch
# 2048 tokens (both engines put many texts in one forward pass), on all-MiniLM-L6-v2 F16 by
# default; POOLING (e.g. mean, for a decoder whose file names none) is passed to both.
# Usage: scripts/bench/bench-embedding.sh [MODEL] [ROUNDS] [THREADS] [POOLING]
set -euo pipefail
cd "$(dirname "$0")/../.."
target="${CARGO_TARGET_DIR:-target}"
cargo build --release --locked -p local-llm-cli >&2
llama=$(scripts/setup/build-llama.sh llama-embedding native)
model="${1:-$(scripts/setup/fetch-models.sh minilm)}"
rounds="${2:-5}"
threads="${3:-2}"
pool=()
if [[ -n "${4:-}" ]]; then pool=(--pooling "$4"); fi
texts=$(mktemp)
trap 'rm -f "$texts"' EXIT
# 100 short texts: sentences of the evaluation text (one per line, 40-160 characters).
python3 - "$(scripts/setup/fetch-eval-text.sh)" "$texts" <<'PY'
import re, sys
words = open(sys.argv[1], encoding="utf-8").read().split()
out, line = [], []
for w in words:
    line.append(w)
    if len(" ".join(line)) > 60 and w.endswith((".", ";", ",")):
        out.append(" ".join(line))
        line = []
    if len(out) == 100:
        break
open(sys.argv[2], "w", encoding="utf-8").write("\n".join(out))
PY
now() { date +%s%N; }
run() { # run CMD... -> its wall time in seconds on stdout
    local start end
    start=$(now)
    "$@" >/dev/null 2>&1
    end=$(now)
    echo "scale=4; ($end - $start) / 1000000000" | bc
}
ours=() theirs=()
for ((r = 0; r < rounds; r++)); do
    ours+=("$(run "$target/release/local-llm" embedding -m "$model" -f "$texts" -t "$threads" -b 2048 --embd-output-format json "${pool[@]}")")
    theirs+=("$(LLAMA_ARG_REPACK=0 run "$llama" -m "$model" -f "$texts" -t "$threads" -b 2048 --embd-output-format json "${pool[@]}")")
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
mo=$(median "${ours[@]}")
mt=$(median "${theirs[@]}")
echo "model $(basename "$model"), 100 texts, $threads threads, $rounds rounds (median wall time, load included)"
echo "ours      ${mo} s  $(echo "scale=1; 100 / $mo" | bc) texts/s   runs: ${ours[*]}"
echo "llama.cpp ${mt} s  $(echo "scale=1; 100 / $mt" | bc) texts/s   runs: ${theirs[*]}"
echo "ratio (ours / llama.cpp texts/s): $(echo "scale=2; $mt / $mo" | bc)"
