#!/usr/bin/env bash
# Build the engine's tests for other CPUs and run them under qemu-user:
#   s390x-unknown-linux-gnu   (IBM Z, big-endian)
#   aarch64-unknown-linux-gnu (arm64, NEON kernels)
#
# Usage: scripts/checks/cross-test.sh [s390x|aarch64|all]     (default: all)
#
# Steps (each prints its time):
#   1. apt: cross gcc + libc, qemu-user-static, Debian's rustc-web/cargo-web/rust-web-src
#      (installed only when missing; `apt-get update` once, first). rustup cannot add targets
#      here, so std for each target is built from Debian's Rust source (-Zbuild-std).
#   2. host: the x86-64 build of tests/cross_models.rs checks greedy tokens against llama.cpp
#      and writes the expected token ids and a big-endian model (made by gguf-py) into the
#      fixtures directory.
#   3. per target: `cargo test -p local-llm-engine` (the library's unit tests and the
#      integration tests listed in CROSS_TESTS) under qemu with LOCAL_LLM_CROSS=1, so
#      tests/cross_models.rs compares with the host's files instead of running oracles.
#      aarch64 runs on qemu's `max` CPU (i8mm level), then the kernel tests again on
#      neoverse-n1 (dotprod level), cortex-a53 (base NEON) and with LOCAL_LLM_SIMD=neon|dotprod.
#
# Environment:
#   LOCAL_LLM_CROSS_TARGET_PREFIX  target dirs are <prefix>-<arch>, fixtures <prefix>-fixtures
#                                  (default: <repo>/target/cross)
#   LOCAL_LLM_SKIP_REAL_MODELS=1   skip the SmolLM2 check (the synthetic models still run)
# Must be root (or have the packages already) on Debian 12; needs only Debian's archive.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"

WHICH=${1:-all}
case "$WHICH" in
s390x | aarch64) ARCHES=("$WHICH") ;;
all) ARCHES=(s390x aarch64) ;;
*)
    echo "usage: $0 [s390x|aarch64|all]" >&2
    exit 2
    ;;
esac

# Integration tests that run under emulation. They need neither node nor Python, or they spawn
# the host's python3 (a native x86-64 process: qemu-user hands an x86-64 executable to the
# kernel) for small inputs. Left out for emulation speed: generation_oracle (64 tokens x 11
# prompts per model), quant_oracle (dequantizes samples of every tensor of both models),
# tokenizer_oracle, chat_oracle and synth_models (node/Python-heavy; tokenizer and template
# logic has no byte-order or SIMD code). chat_template asserts wall-clock limits (hostile
# templates fail within 10 s), which emulation can exceed.
CROSS_TESTS=(cross_kernels cross_models gguf_versions gguf_corrupt sampling_sampler sampling_stop nnpa_registry)

if [[ -x "$ROOT/.cache/venv/bin/python3" ]]; then
    export PATH="$ROOT/.cache/venv/bin:$PATH" # see scripts/setup/setup-test-deps.sh
fi
PREFIX=${LOCAL_LLM_CROSS_TARGET_PREFIX:-$ROOT/target/cross}
FIXTURES="$PREFIX-fixtures"
START=$SECONDS
step() { echo "---- cross: $* ($((SECONDS - START)) s elapsed)"; }

declare -A TRIPLE=([s390x]=s390x-unknown-linux-gnu [aarch64]=aarch64-unknown-linux-gnu)
declare -A GCC=([s390x]=s390x-linux-gnu [aarch64]=aarch64-linux-gnu)
declare -A LIBC=([s390x]=libc6-dev-s390x-cross [aarch64]=libc6-dev-arm64-cross)

step "apt packages"
t=$SECONDS
pkgs=(qemu-user-static rustc-web cargo-web rust-web-src)
for a in "${ARCHES[@]}"; do pkgs+=("gcc-${GCC[$a]}" "${LIBC[$a]}"); done
"$ROOT/scripts/setup/apt-install.sh" "${pkgs[@]}"
# rustup's rustc comes first in PATH and has no std for these targets: use Debian's explicitly.
CROSS_CARGO=/usr/bin/cargo
export RUSTC=/usr/bin/rustc RUSTDOC=/usr/bin/rustdoc
echo "toolchain: $($RUSTC -V); apt $((SECONDS - t)) s"

step "host: expected tokens and big-endian model ($FIXTURES)"
t=$SECONDS
rm -rf "$FIXTURES"
mkdir -p "$FIXTURES"
# The host build uses the normal toolchain (rustup's first in PATH), not Debian's.
env -u RUSTC -u RUSTDOC LOCAL_LLM_CROSS_DIR="$FIXTURES" \
    cargo test -p local-llm-engine --locked --test cross_models -- --nocapture
echo "host fixtures: $((SECONDS - t)) s"

for a in "${ARCHES[@]}"; do
    triple=${TRIPLE[$a]}
    T=${triple^^}
    T=${T//-/_}
    step "$triple: build (std from source) and test under qemu-$a"
    t=$SECONDS
    (
        export RUSTC_BOOTSTRAP=1
        export "CARGO_TARGET_${T}_LINKER=${GCC[$a]}-gcc"
        export "CARGO_TARGET_${T}_RUNNER=qemu-$a-static -L /usr/${GCC[$a]}"
        export "CC_${triple//-/_}=${GCC[$a]}-gcc" "AR_${triple//-/_}=${GCC[$a]}-ar"
        export CARGO_TARGET_DIR="$PREFIX-$a"
        export LOCAL_LLM_CROSS=1 LOCAL_LLM_CROSS_DIR="$FIXTURES"
        export CARGO_PROFILE_TEST_DEBUG=0 # no debug info: faster builds and links under build-std
        args=(-Zbuild-std=std,panic_unwind --target "$triple" -p local-llm-engine --locked --lib)
        for test in "${CROSS_TESTS[@]}"; do args+=(--test "$test"); done
        $CROSS_CARGO test "${args[@]}" --no-run
        echo "$triple build: $((SECONDS - t)) s"
        t2=$SECONDS
        $CROSS_CARGO test "${args[@]}" -- --nocapture
        # zdnn-sys: descriptor/ztensor layout and the loader (no libzdnn here: NotAvailable/Open).
        $CROSS_CARGO test -Zbuild-std=std,panic_unwind --target "$triple" -p zdnn-sys --locked
        echo "$triple tests under qemu: $((SECONDS - t2)) s"
        if [[ $a == aarch64 ]]; then
            # The runs above use qemu's `max` CPU (dotprod and i8mm). The NEON kernels again, bit
            # for bit against the portable ones, at the lower levels: on CPUs without i8mm
            # (neoverse-n1) and without dotprod (cortex-a53), and forced by LOCAL_LLM_SIMD.
            t2=$SECONDS
            kernels=(-Zbuild-std=std,panic_unwind --target "$triple" -p local-llm-engine --locked)
            for level in "cpu=neoverse-n1" "cpu=cortex-a53" "simd=neon" "simd=dotprod"; do
                echo "---- aarch64 kernels: $level"
                (
                    case $level in
                    cpu=*) export QEMU_CPU=${level#cpu=} ;;
                    simd=*) export LOCAL_LLM_SIMD=${level#simd=} ;;
                    esac
                    $CROSS_CARGO test "${kernels[@]}" --lib -- quant::
                    $CROSS_CARGO test "${kernels[@]}" --test cross_kernels -- --nocapture
                )
            done
            echo "aarch64 kernels at the other levels: $((SECONDS - t2)) s"
        fi
    )
    echo "$triple total: $((SECONDS - t)) s"
done

step "done"
