#!/usr/bin/env bash
# CI stage for the phone libraries: build liblocal_llm_ffi.a for Android arm64-v8a and iOS
# aarch64-apple-ios (scripts/build-mobile.sh, Debian's Rust with -Zbuild-std), then check them and
# compile the generated JSI C++ for both platforms (scripts/check-mobile-libs.sh).
# Usage: scripts/mobile-test.sh [TARGET...]   (default: arm64-v8a aarch64-apple-ios; `android ios`
# for all seven). Installs what it needs from Debian (rustc-web cargo-web rust-web-src llvm-14,
# plus check-mobile-libs.sh's packages) and `npm ci` when node_modules is missing.
# Needs root for apt-get when packages are missing (Debian 12), like scripts/cross-test.sh.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
(($#)) || set -- arm64-v8a aarch64-apple-ios
START=$SECONDS
step() { echo "---- mobile: $* ($((SECONDS - START)) s elapsed)"; }

step "apt packages"
pkgs=(rustc-web cargo-web rust-web-src llvm-14)
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
    echo "installing: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt=(apt-get -o DPkg::Lock::Timeout=600 -qq)
    "${apt[@]}" update
    "${apt[@]}" install -y --no-install-recommends "${missing[@]}" >/dev/null
fi
if [[ ! -d node_modules/react-native/ReactCommon ]]; then
    step "npm ci"
    npm ci --no-audit --no-fund
fi

step "build: $*"
# Start from no libraries, so that the checks see only what this run built.
rm -rf android/src/main/jniLibs/*/liblocal_llm_ffi.a LocalLlmFramework.xcframework
bash scripts/build-mobile.sh "$@"

step "checks"
bash scripts/check-mobile-libs.sh all
step "done"
