#!/usr/bin/env bash
# Install what the tests need, idempotently (a re-run with everything in place takes ~1 s):
#   - Python oracles/helpers from scripts/setup/requirements-test.txt (gguf, numpy, jinja2, jsonschema), pinned.
#     They go into the interpreter that `python3` runs (pyenv/CPython here). If that
#     interpreter is "externally managed" (PEP 668, e.g. Debian's own python3), they go
#     into a venv at .cache/venv instead; scripts/test.sh then puts .cache/venv/bin first
#     on PATH, and you must do the same (`export PATH="$PWD/.cache/venv/bin:$PATH"`) to run
#     `cargo test` by hand.
#   - The llama.cpp oracle: `npm ci` in tools/oracle (node-llama-cpp 3.21.1, pinned by
#     package-lock.json; its prebuilt CPU binary comes in @node-llama-cpp/linux-x64, so
#     the blocked postinstall script is not needed).
#   - /usr/bin/time (apt package `time`) for the peak-RSS checks of rust/cli/tests/limits.rs,
#     installed with apt-get when missing (through sudo when not root).
# python3, node and npm come with the machine.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
REQS="$ROOT/scripts/setup/requirements-test.txt"
ORACLE="$ROOT/tools/oracle"
VENV="$ROOT/.cache/venv"

log() { echo "setup-test-deps: $*" >&2; }

need() {
    command -v "$1" >/dev/null 2>&1 || {
        log "ERROR: '$1' is not installed ($2)"
        exit 1
    }
}

# python_ok PYTHON -> 0 when every pinned requirement is installed at its version
python_ok() {
    "$1" - "$REQS" <<'PY' 2>/dev/null
import sys
from importlib.metadata import version
for line in open(sys.argv[1]):
    line = line.split("#")[0].strip()
    if not line:
        continue
    name, want = line.split("==")
    if version(name) != want:
        sys.exit(1)
PY
}

setup_python() {
    need python3 "Python 3.11 is expected on the machine"
    local py=python3
    if [[ -x "$VENV/bin/python3" ]]; then
        py="$VENV/bin/python3"
    fi
    if python_ok "$py"; then
        log "python packages present ($("$py" -c 'import sys; print(sys.prefix)'))"
        return
    fi
    if [[ "$py" == python3 ]] && "$py" -c 'import sys, sysconfig, os; sys.exit(not os.path.exists(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")))'; then
        log "python3 is externally managed: using a venv at $VENV"
        python3 -m venv "$VENV"
        py="$VENV/bin/python3"
    fi
    log "installing python packages into $("$py" -c 'import sys; print(sys.prefix)')"
    "$py" -m pip install --quiet --disable-pip-version-check -r "$REQS"
    python_ok "$py" || {
        log "ERROR: python packages still missing after pip install"
        exit 1
    }
}

setup_oracle() {
    need node "Node.js 20 is expected on the machine"
    need npm "npm is expected on the machine"
    local stamp="$ORACLE/node_modules/.local-llm-lock.sha256"
    local want
    want="$(sha256sum "$ORACLE/package-lock.json" | cut -d' ' -f1)"
    if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
        log "tools/oracle/node_modules present"
    else
        log "npm ci in tools/oracle (node-llama-cpp)"
        (cd "$ORACLE" && npm ci --no-audit --no-fund --loglevel=error >&2)
        echo "$want" >"$stamp"
    fi
    # The oracle must load llama.cpp's prebuilt CPU binary without building anything.
    echo '{"cmd":"check"}' | node "$ORACLE/oracle.mjs" >/dev/null || {
        log "ERROR: node-llama-cpp cannot load its prebuilt llama.cpp binary"
        exit 1
    }
}

setup_time() {
    if [[ -x /usr/bin/time ]]; then
        log "/usr/bin/time present"
        return
    fi
    need apt-get "/usr/bin/time is missing; install the package that provides it"
    log "installing the apt package 'time' (/usr/bin/time)"
    "$ROOT/scripts/setup/apt-install.sh" time >&2
}

setup_python
setup_oracle
setup_time
log "done"
