#!/usr/bin/env bash
# Generate text with the default model (SmolLM2-135M-Instruct, Q4_1):
#   scripts/run.sh "Write a haiku about the sea"
# Fetches the model if needed, builds the CLI in release mode, then runs
#   local-llm run --chat -m MODEL -p "PROMPT"
# LOCAL_LLM_MODEL picks another model: smollm2 (default), gemma3, or a path to a .gguf.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

if [[ $# -eq 0 ]]; then
    echo "usage: $0 PROMPT..." >&2
    exit 2
fi

MODEL="${LOCAL_LLM_MODEL:-smollm2}"
case "$MODEL" in
    smollm2 | gemma3) MODEL="$(scripts/setup/fetch-models.sh "$MODEL")" ;;
esac

cargo build --release --locked -p local-llm-cli >&2
BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/local-llm"
exec "$BIN" run --chat -m "$MODEL" -p "$*"
