#!/usr/bin/env bash
# Build the phone libraries: liblocal_llm_ffi.a (crate rust/ffi, profile `mobile`) for
#   Android  arm64-v8a armeabi-v7a x86_64 x86 -> android/src/main/jniLibs/<ABI>/liblocal_llm_ffi.a
#   iOS      aarch64-apple-ios, aarch64-apple-ios-sim + x86_64-apple-ios (one fat simulator
#            library, llvm-lipo) -> LocalLlmFramework.xcframework
# A static library is never linked, so no NDK or Xcode is needed: Debian's rustc-web (1.96) and
# rust-web-src build std for these targets (-Zbuild-std; rustup cannot add targets here).
#
# Usage: scripts/mobile/build-mobile.sh [TARGET...]   (default: all)
#   TARGET: an Android ABI (arm64-v8a armeabi-v7a x86_64 x86), a Rust triple of the list above,
#           or android / ios for all of a platform. The xcframework is assembled from the iOS
#           libraries built by the same run (`aarch64-apple-ios` alone gives one without the
#           simulator).
# Environment: CARGO_TARGET_DIR (default target/mobile); CARGO_PROFILE_MOBILE_LTO=off|thin|fat
# overrides the profile's LTO (to measure it).
# Minimum versions follow React Native 0.86: Android API 24 (the static library records none;
# the app's minSdk applies at link time), iOS 15.1 (recorded in every Mach-O object).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"

export IPHONEOS_DEPLOYMENT_TARGET=${IPHONEOS_DEPLOYMENT_TARGET:-15.1}
ANDROID_ABIS=(arm64-v8a armeabi-v7a x86_64 x86)
declare -A ABI_TRIPLE=([arm64-v8a]=aarch64-linux-android [armeabi-v7a]=armv7-linux-androideabi
    [x86_64]=x86_64-linux-android [x86]=i686-linux-android)
IOS_TRIPLES=(aarch64-apple-ios aarch64-apple-ios-sim x86_64-apple-ios)
LIB=liblocal_llm_ffi.a
XCFRAMEWORK=LocalLlmFramework.xcframework

triples=()
add() { [[ " ${triples[*]} " == *" $1 "* ]] || triples+=("$1"); }
(($#)) || set -- android ios
for arg in "$@"; do
    case $arg in
    android) for a in "${ANDROID_ABIS[@]}"; do add "${ABI_TRIPLE[$a]}"; done ;;
    ios) for t in "${IOS_TRIPLES[@]}"; do add "$t"; done ;;
    arm64-v8a | armeabi-v7a | x86_64 | x86) add "${ABI_TRIPLE[$arg]}" ;;
    *-linux-android* | *-apple-ios*)
        if [[ " ${ABI_TRIPLE[*]} ${IOS_TRIPLES[*]} " != *" $arg "* ]]; then
            echo "unknown target $arg" >&2
            exit 2
        fi
        add "$arg"
        ;;
    *)
        echo "usage: $0 [android|ios|arm64-v8a|armeabi-v7a|x86_64|x86|<rust triple>...]" >&2
        exit 2
        ;;
    esac
done

# Debian's compiler and cargo: rustup's come first in PATH and have no std for these targets.
for f in /usr/bin/rustc /usr/bin/cargo /usr/lib/rustlib/src/rust/library/std/Cargo.toml /usr/bin/clang-16 /usr/bin/llvm-ar-22; do
    if [[ ! -e $f ]]; then
        echo "ERROR: $f is missing: apt-get install rustc-web cargo-web rust-web-src clang-16 llvm-22 (Debian 12)" >&2
        exit 1
    fi
done
export RUSTC=/usr/bin/rustc RUSTDOC=/usr/bin/rustdoc RUSTC_BOOTSTRAP=1
CARGO=/usr/bin/cargo
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target/mobile}

# C code in the dependencies (ring, rustls's cryptography for model downloads, compiles C and
# assembly in its build script): without an NDK or Xcode there is no C library for these
# targets, so Debian's clang builds it freestanding (ring's RING_CORE_NOSTDLIBINC mode; clang's
# own stdint.h/stddef.h) and the one Apple header it includes comes from scripts/mobile-sdk.
for t in "${triples[@]}"; do
    v=${t//-/_}
    export "CC_$v=clang-16" "AR_$v=llvm-ar-22" "CFLAGS_$v=-ffreestanding -DRING_CORE_NOSTDLIBINC=1"
done
export SDKROOT="$ROOT/scripts/mobile/mobile-sdk"

abi_of() { for a in "${ANDROID_ABIS[@]}"; do if [[ ${ABI_TRIPLE[$a]} == "$1" ]]; then echo "$a"; fi; done; }
built() { echo "$CARGO_TARGET_DIR/$1/mobile/$LIB"; }

for t in "${triples[@]}"; do
    s=$SECONDS
    # --crate-type staticlib: the cdylib would need the platform's linker.
    nice "$CARGO" rustc --locked -p local-llm-ffi --lib --profile mobile --target "$t" \
        -Zbuild-std=std,panic_unwind --crate-type staticlib
    out=$(built "$t")
    case $t in
    *-android*)
        dest=android/src/main/jniLibs/$(abi_of "$t")
        mkdir -p "$dest"
        cp "$out" "$dest/$LIB"
        out=$dest/$LIB
        ;;
    esac
    echo "built $t: $out $(stat -c %s "$out") bytes in $((SECONDS - s)) s"
done

# The xcframework: one library per platform (device arm64; simulator arm64 + x86_64, fat).
# Only the iOS libraries built by this run go in (an older one in target/mobile may be stale).
wanted() { [[ " ${triples[*]} " == *" $1 "* ]]; }
device=""
if wanted aarch64-apple-ios; then device=$(built aarch64-apple-ios); fi
sims=()
for t in aarch64-apple-ios-sim x86_64-apple-ios; do if wanted "$t"; then sims+=("$(built "$t")"); fi; done
if [[ -n $device ]] || ((${#sims[@]})); then
    # rustc-web's LLVM (22): llvm-lipo-14 crashes on the bitcode the objects carry.
    LIPO=$(command -v llvm-lipo-22 || true)
    if ((${#sims[@]})) && [[ -z $LIPO ]]; then
        echo "ERROR: llvm-lipo-22 is missing: apt-get install llvm-22" >&2
        exit 1
    fi
    rm -rf "$XCFRAMEWORK"
    entries=""
    entry() { # identifier, archs, variant
        local archs="" a
        for a in $2; do archs+="<string>$a</string>"; done
        entries+="<dict><key>LibraryIdentifier</key><string>$1</string>"
        entries+="<key>LibraryPath</key><string>$LIB</string>"
        entries+="<key>SupportedArchitectures</key><array>$archs</array>"
        entries+="<key>SupportedPlatform</key><string>ios</string>"
        [[ -n $3 ]] && entries+="<key>SupportedPlatformVariant</key><string>$3</string>"
        entries+="</dict>"
    }
    if [[ -n $device ]]; then
        mkdir -p "$XCFRAMEWORK/ios-arm64"
        cp "$device" "$XCFRAMEWORK/ios-arm64/$LIB"
        entry ios-arm64 arm64 ""
    fi
    if ((${#sims[@]})); then
        archs=""
        for f in "${sims[@]}"; do [[ $f == */aarch64-* ]] && archs+=" arm64" || archs+=" x86_64"; done
        id=ios-$(echo $archs | tr ' ' _)-simulator
        mkdir -p "$XCFRAMEWORK/$id"
        "$LIPO" -create "${sims[@]}" -output "$XCFRAMEWORK/$id/$LIB"
        entry "$id" "$archs" simulator
    fi
    cat >"$XCFRAMEWORK/Info.plist" <<PLIST
<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<plist version="1.0">
<dict>
<key>AvailableLibraries</key>
<array>$entries</array>
<key>CFBundlePackageType</key>
<string>XFWK</string>
<key>XCFrameworkFormatVersion</key>
<string>1.0</string>
</dict>
</plist>
PLIST
    for f in "$XCFRAMEWORK"/*/"$LIB"; do echo "xcframework: $f $(stat -c %s "$f") bytes"; done
fi
