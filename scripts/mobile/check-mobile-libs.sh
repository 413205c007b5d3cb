#!/usr/bin/env bash
# Check the phone libraries made by scripts/mobile/build-mobile.sh, and compile the generated JSI C++
# for Android and iOS, on plain Debian (no NDK, no Xcode):
#   1. every library (android/src/main/jniLibs/<ABI>/, LocalLlmFramework.xcframework/*/):
#      right ELF class/machine (Android) or Mach-O CPU + LC_BUILD_VERSION platform/minos (iOS);
#      every uniffi_*/ffi_* function that cpp/generated/*.cpp calls is defined; no zdnn/nnpa
#      symbol; every undefined symbol is provided by the platform (scripts/mobile/check_mobile_libs.py).
#   2. cpp/generated/*.cpp and cpp/*.cpp compile (-Wall -Werror) for aarch64-linux-android24 and
#      arm64-apple-ios15.1 with clang-16 against React Native's headers (node_modules).
# Usage: scripts/mobile/check-mobile-libs.sh [libs|cpp|all]   (default all)
#
# Platform symbol lists, the best the package registries have:
#   iOS      libSystem.tbd of the PyPI `ziglang` wheel (Apple's macOS/Mac Catalyst text stub: the
#            iOS SDK's own stub is not in any registry), plus its Darwin C headers for the C++.
#   Android  no registry has bionic's symbol lists or headers (no NDK stubs on PyPI, npm or
#            crates.io; Debian packages no bionic). With LOCAL_LLM_BIONIC_DIR set to a checkout of
#            AOSP's bionic, its version scripts (libc/libm/libdl .map.txt, read at API 24 for
#            each ABI) and headers are used: authoritative. Without it the stand-ins are the
#            function and static declarations the `libc` crate (crates.io, the version std
#            uses) makes for Android and POSIX (a superset: not filtered by cfg or API level),
#            glibc's libm names for the C math library, and glibc's arm64 headers for the C++.
#            Always added: liblog's exports (Debian android-liblog, built from AOSP's liblog)
#            and LLVM's libunwind (Debian libunwind-16; the NDK links LLVM's libunwind).
# Needs root for apt-get when packages are missing (Debian 12), like scripts/cross-test.sh.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
MODE=${1:-all}
MIN_IOS=${IPHONEOS_DEPLOYMENT_TARGET:-15.1}
ANDROID_API=24
CACHE=${LOCAL_LLM_CACHE:-$HOME/.cache/local-llm}
ZIG_VERSION=0.17.0
ZIG=$CACHE/ziglang-$ZIG_VERSION/ziglang
BIONIC=${LOCAL_LLM_BIONIC_DIR:-}
WORK=$ROOT/target/mobile-check
START=$SECONDS
step() { echo "--- [$((SECONDS - START)) s] $*"; }

step "tools (apt: llvm-22 clang-16 libc++-16-dev android-liblog libunwind-16; PyPI: ziglang $ZIG_VERSION)"
pkgs=(llvm-22 clang-16 libc++-16-dev libc++abi-16-dev android-liblog libunwind-16 libc6-dev-arm64-cross python3-pip unzip)
"$ROOT/scripts/setup/apt-install.sh" "${pkgs[@]}"
if [[ ! -f $ZIG/lib/libc/darwin/libSystem.tbd ]]; then
    tmp=$(mktemp -d)
    python3 -m pip download --quiet --no-deps --only-binary=:all: --platform manylinux2014_x86_64 \
        "ziglang==$ZIG_VERSION" -d "$tmp"
    mkdir -p "$CACHE/ziglang-$ZIG_VERSION"
    unzip -q -o "$tmp"/ziglang-*.whl 'ziglang/lib/libc/darwin/*' 'ziglang/lib/libc/include/any-darwin-any/*' \
        -d "$CACHE/ziglang-$ZIG_VERSION"
    rm -rf "$tmp"
fi
mkdir -p "$WORK"

if [[ $MODE == all || $MODE == libs ]]; then
    step "libraries"
    args=(--cpp cpp/generated/*.cpp --android-api "$ANDROID_API")
    for abi in arm64-v8a armeabi-v7a x86_64 x86; do
        lib=android/src/main/jniLibs/$abi/liblocal_llm_ffi.a
        [[ -f $lib ]] && args+=(--android "$abi" "$lib")
    done
    for dir in LocalLlmFramework.xcframework/ios-*; do
        [[ -f $dir/liblocal_llm_ffi.a ]] || continue
        variant=ios
        [[ $dir == *-simulator ]] && variant=simulator
        args+=(--ios "$variant" "$dir/liblocal_llm_ffi.a" "$MIN_IOS")
    done
    if [[ " ${args[*]} " != *" --android "* && " ${args[*]} " != *" --ios "* ]]; then
        echo "ERROR: no library to check: run scripts/mobile/build-mobile.sh first" >&2
        exit 1
    fi
    extra=$WORK/android-extra.txt
    {
        llvm-nm-22 -D --defined-only --format=just-symbols /usr/lib/x86_64-linux-gnu/android/liblog.so.0
        llvm-nm-22 -D --defined-only --format=just-symbols /usr/lib/llvm-16/lib/libunwind.so.1
    } | sed 's/@.*//' | sort -u >"$extra"
    if [[ -n $BIONIC ]]; then
        args+=(--bionic-map "$BIONIC/libc/libc.map.txt" "$BIONIC/libm/libm.map.txt" "$BIONIC/libdl/libdl.map.txt")
        args+=(--android-source "bionic's libc/libm/libdl at API $ANDROID_API, liblog, libunwind")
    else
        # The libc crate version std is built with (rust-web-src's Cargo.lock), from cargo's cache.
        v=$(grep -A1 '^name = "libc"$' /usr/lib/rustlib/src/rust/library/Cargo.lock | sed -n 's/^version = "\(.*\)"/\1/p')
        libc_src=$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/libc-"$v" | head -1)
        grep -rhoE 'pub (safe )?(fn|static( mut)?) [A-Za-z_][A-Za-z0-9_]*' \
            "$libc_src"/src/unix/linux_like/android "$libc_src"/src/unix/linux_like/mod.rs \
            "$libc_src"/src/unix/mod.rs "$libc_src"/src/new/bionic_libc "$libc_src"/src/new/common |
            awk '{print $NF}' | sort -u >>"$extra"
        # The libc crate leaves out the C math library: C99's names from glibc's arm64 libm.
        llvm-nm-22 -D --defined-only --format=just-symbols /usr/aarch64-linux-gnu/lib/libm.so.6 |
            sed 's/@.*//' >>"$extra"
        args+=(--android-source "stand-ins for bionic (the libc $v crate's Android and POSIX declarations, glibc's libm names), liblog, libunwind")
    fi
    args+=(--android-list "$extra" --tbd "$ZIG/lib/libc/darwin/libSystem.tbd")
    args+=(--ios-source "libSystem.tbd (ziglang $ZIG_VERSION, macOS/Mac Catalyst stub)")
    # chrono's time-zone lookup (iana-time-zone) calls CoreFoundation, which the podspec links;
    # no registry has its stub, so these names are listed, not verified.
    args+=(--ios-allow-prefix _CF "CoreFoundation (s.frameworks in the podspec)")
    python3 scripts/mobile/check_mobile_libs.py "${args[@]}"
fi

if [[ $MODE == all || $MODE == cpp ]]; then
    RN=node_modules/react-native/ReactCommon
    if [[ ! -d $RN/jsi ]]; then
        echo "ERROR: $RN is missing: run npm ci --no-audit --no-fund" >&2
        exit 1
    fi
    # An empty sysroot keeps the host's /usr/include out; clang's own headers (stddef.h, ...) stay.
    mkdir -p "$WORK/empty-sysroot"
    common=(-std=c++20 -c -Wall -Werror -fexceptions -frtti -nostdinc++ --sysroot="$WORK/empty-sysroot"
        -isystem /usr/lib/llvm-16/include/c++/v1
        -I cpp -I cpp/generated -I node_modules/uniffi-bindgen-react-native/cpp/includes
        -I "$RN/jsi" -I "$RN/callinvoker" -I "$RN")
    sources=(cpp/generated/*.cpp cpp/*.cpp)
    # The NDK generates android/ndk-version.h, which libc++'s bionic support includes.
    mkdir -p "$WORK/ndk/android"
    printf '#pragma once\n#define __NDK_MAJOR__ 27\n#define __NDK_MINOR__ 0\n#define __NDK_BUILD__ 0\n#define __NDK_BETA__ 0\n#define __NDK_CANARY__ 0\n' \
        >"$WORK/ndk/android/ndk-version.h"
    if [[ -n $BIONIC ]]; then
        libc_android=(-isystem "$BIONIC/libc/include" -isystem "$BIONIC/libc/kernel/uapi"
            -isystem "$BIONIC/libc/kernel/uapi/asm-arm64" -isystem "$BIONIC/libc/kernel/android/uapi")
        what="bionic's headers"
    else
        libc_android=(-isystem /usr/aarch64-linux-gnu/include)
        what="glibc's arm64 headers standing in for bionic's"
    fi
    # The Darwin C headers as an SDK's usr/include: searched after clang's own, as in Xcode.
    mkdir -p "$WORK/darwin-sysroot/usr"
    ln -sfn "$ZIG/lib/libc/include/any-darwin-any" "$WORK/darwin-sysroot/usr/include"
    for f in "${sources[@]}"; do
        step "C++ for aarch64-linux-android$ANDROID_API ($what, libc++ 16): $f"
        nice clang++-16 --target=aarch64-linux-android$ANDROID_API "${common[@]}" \
            -isystem "$WORK/ndk" "${libc_android[@]}" "$f" -o "$WORK/android-$(basename "$f").o"
        step "C++ for arm64-apple-ios$MIN_IOS (Darwin headers from ziglang, libc++ 16): $f"
        nice clang++-16 --target=arm64-apple-ios"$MIN_IOS" "${common[@]}" \
            -isysroot "$WORK/darwin-sysroot" "$f" -o "$WORK/ios-$(basename "$f").o"
    done
    echo "compiled ${#sources[@]} files for each platform into $WORK"
fi
step "done ($MODE)"
