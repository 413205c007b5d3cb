#!/usr/bin/env bash
# CI stage for the phone libraries: build liblocal_llm_ffi.a for Android arm64-v8a and iOS
# aarch64-apple-ios (scripts/mobile/build-mobile.sh, Debian's Rust with -Zbuild-std), then check them and
# compile the generated JSI C++ for both platforms (scripts/mobile/check-mobile-libs.sh).
# Usage: scripts/mobile/mobile-test.sh [TARGET...]   (default: arm64-v8a aarch64-apple-ios; `android ios`
# for all seven). Installs what it needs from Debian (rustc-web cargo-web rust-web-src llvm-22 clang-16,
# cmake, ruby, plus check-mobile-libs.sh's packages) and `npm ci` when node_modules is missing.
# Also checks the build integration: android/CMakeLists.txt and LocalLlm.podspec stop with the
# build:mobile command when a library is missing, and get past that check when it is there.
# Needs root for apt-get when packages are missing (Debian 12), like scripts/cross-test.sh.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
(($#)) || set -- arm64-v8a aarch64-apple-ios
START=$SECONDS
step() { echo "---- mobile: $* ($((SECONDS - START)) s elapsed)"; }

step "apt packages"
pkgs=(rustc-web cargo-web rust-web-src llvm-22 clang-16 cmake ruby)
"$ROOT/scripts/setup/apt-install.sh" "${pkgs[@]}"
if [[ ! -d node_modules/react-native/ReactCommon ]]; then
    step "npm ci"
    npm ci --no-audit --no-fund
fi

step "build: $*"
# Start from no libraries, so that the checks see only what this run built.
rm -rf android/src/main/jniLibs/*/liblocal_llm_ffi.a LocalLlmFramework.xcframework
# Builds go to a cache outside the clone (like the ubrn CLI's): std (-Zbuild-std) and the
# dependencies are then compiled once per machine, not once per clone; our own crates are
# rebuilt whenever their sources change.
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-${LOCAL_LLM_CACHE:-$HOME/.cache/local-llm}/target-mobile}
bash scripts/mobile/build-mobile.sh "$@"

step "checks"
bash scripts/mobile/check-mobile-libs.sh all

step "build integration: missing libraries stop the app's build with the command to run"
W=target/mobile-check/integration
rm -rf "$W"
failed=0
expect() { # description, output, pattern, must match (1) or not (0)
    # CMake wraps message text at word boundaries (where depends on the path lengths in it):
    # the pattern is looked for in the output with every run of white space as one space.
    if tr '\n' ' ' <<<"$2" | tr -s ' ' | grep -q "$3"; then found=1; else found=0; fi
    if [[ $found == "$4" ]]; then echo "ok    $1"; else echo "FAIL  $1"; echo "$2" | tail -15; failed=1; fi
}
for abi in arm64-v8a armeabi-v7a x86_64 x86; do
    # Configuring android/CMakeLists.txt needs the app's React Native (prefab): without it CMake
    # stops at find_package(ReactAndroid), after our check.
    out=$(cmake -S android -B "$W/cmake-$abi" -DANDROID_ABI="$abi" 2>&1 || true)
    if [[ -f android/src/main/jniLibs/$abi/liblocal_llm_ffi.a ]]; then
        expect "CMake $abi: library present, configure gets past the check" "$out" "Could not find a package configuration file provided by \"ReactAndroid\"" 1
    else
        expect "CMake $abi: library missing, configure stops naming the command" "$out" "npm run build:mobile -- $abi" 1
    fi
done
# The podspec, evaluated with a stand-in for CocoaPods' Pod::Spec (only the check is exercised).
podspec_stub='module Pod; class Spec; def self.new; s = Object.new; def s.method_missing(*) = nil; yield s; end; end; end
def min_ios_version_supported = "15.1"
load ARGV[0]; puts "podspec loaded"'
out=$(ruby -e "$podspec_stub" LocalLlm.podspec 2>&1 || true)
if [[ -f LocalLlmFramework.xcframework/Info.plist ]]; then
    expect "podspec: xcframework present, loads" "$out" "podspec loaded" 1
else
    expect "podspec: xcframework missing, pod install stops naming the command" "$out" "npm run build:mobile -- ios" 1
fi
if [[ $failed != 0 ]]; then
    echo "build integration checks failed" >&2
    exit 1
fi
step "done"
