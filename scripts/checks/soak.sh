#!/usr/bin/env bash
# Soak through the JS API (not part of scripts/test.sh; tests/soak-smoke.test.mts is its CI
# smoke): 1,000 model load/free cycles and 1,000 context create/dispose cycles with RSS sampled
# every 50 (reporting the least-squares slope in KB/cycle), then 200 random aborts across
# parallel streams with every promise settling within 30 s. Needs what scripts/checks/js-test.sh
# builds (the FFI library and tests/generated/napi: run `scripts/checks/js-test.sh napi` once).
#   scripts/checks/soak.sh [--cycles N] [--every N] [--aborts N] [--seed N] [--max-slope KB]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
if [[ ! -f tests/generated/napi/local_llm_ffi.ts ]]; then
    echo "ERROR: tests/generated/napi is missing: run scripts/checks/js-test.sh napi first" >&2
    exit 1
fi
MODEL=${LOCAL_LLM_MODEL:-${LOCAL_LLM_CACHE:-$HOME/.cache/local-llm}/models/SmolLM2-135M-Instruct.Q4_1.gguf}
LOCAL_LLM_MODEL=$MODEL exec node --expose-gc --import tsx tests/soak/soak.mts "$@"
