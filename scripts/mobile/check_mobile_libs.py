#!/usr/bin/env python3
"""Checks of the phone libraries made by scripts/mobile/build-mobile.sh (run by scripts/mobile/check-mobile-libs.sh).

For each library:
  * target: every object is ELF of the ABI's class and machine (Android), or Mach-O of the right
    CPU with LC_BUILD_VERSION for iOS or the iOS simulator and the minimum iOS version (iOS);
  * FFI: every uniffi_*/ffi_* function that cpp/generated/*.cpp declares and calls is defined;
  * no IBM Z code: no symbol mentions zdnn or nnpa;
  * platform: every symbol the archive leaves undefined is provided by the platform list given
    (bionic's libc/libm/libdl at the minimum API level + liblog + the NDK's clang runtime for
    Android; libSystem for iOS). Lists are read from files passed on the command line.
Prints one line per check and exits 1 if any fails.
"""

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

# Android ABI -> (ELF class, ELF machine as llvm-readobj names it, bionic arch tag)
ANDROID_ABIS = {
    "arm64-v8a": ("64-bit", "EM_AARCH64", "arm64"),
    "armeabi-v7a": ("32-bit", "EM_ARM", "arm"),
    "x86_64": ("64-bit", "EM_X86_64", "x86_64"),
    "x86": ("32-bit", "EM_386", "x86"),
}
BIONIC_ARCHES = {"arm", "arm64", "x86", "x86_64", "riscv64"}
# Tags of symbols that the NDK's stub libraries leave out (platform, vendor and APEX-only APIs).
BIONIC_HIDDEN_TAGS = {"platform-only", "llndk", "apex", "systemapi"}
# Symbols a link provides that no symbol list here holds, by bionic arch, with where they come
# from. Listed by name only (not verified against a binary).
ANDROID_BY_NAME = {
    # ARM EHABI unwinding (ARM IHI 0038 + GCC's frame helper), from the ARM build of LLVM's
    # libunwind that the NDK links; the libunwind list read here is Debian's x86-64 build.
    "arm": {
        "_Unwind_VRS_Get": "LLVM libunwind (ARM EHABI)",
        "_Unwind_VRS_Set": "LLVM libunwind (ARM EHABI)",
        "_Unwind_VRS_Pop": "LLVM libunwind (ARM EHABI)",
        "__gnu_unwind_frame": "LLVM libunwind (ARM EHABI)",
    },
    # i386 position-independent code refers to the GOT by this name; the linker defines it.
    "x86": {"_GLOBAL_OFFSET_TABLE_": "the linker (i386 ELF ABI)"},
}
# Mach-O platforms (LC_BUILD_VERSION) and CPU names (llvm-lipo -archs).
MACHO_PLATFORM = {"ios": "ios", "simulator": "iossimulator"}  # as llvm-objdump-22 names them

# LLVM's tools of rustc-web's LLVM (22): the objects carry its bitcode, which older tools
# cannot read (llvm-lipo-14 crashes on it).
LLVM = os.environ.get("LLVM_VERSION", "22")

failures = []
passes = []


def report(ok, what):
    print(("ok    " if ok else "FAIL  ") + what)
    (passes if ok else failures).append(what)


def run(*cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def ffi_calls(cpp_files):
    """Functions declared in the generated C++'s extern "C" blocks and called outside them."""
    declared, called = set(), set()
    for path in cpp_files:
        text = Path(path).read_text()
        blocks = re.findall(r'^extern "C" \{\n(.*?)^\}', text, re.S | re.M)
        names = set()
        for block in blocks:
            names |= set(re.findall(r"\b((?:uniffi|ffi)_\w+)\s*\(", block))
        rest = re.sub(r'^extern "C" \{\n.*?^\}', "", text, flags=re.S | re.M)
        declared |= names
        called |= {n for n in names if re.search(r"\b" + n + r"\b", rest)}
    return declared, called


def nm_symbols(lib, arch=None):
    """(defined global symbols, undefined symbols, undefined weak symbols) of an archive."""
    cmd = [f"llvm-nm-{LLVM}", "-g", "--no-llvm-bc", "--format=posix"]
    if arch:
        cmd.append("--arch=" + arch)
    defined, undefined, weak = set(), set(), set()
    for line in run(*cmd, lib).splitlines():
        parts = line.split()
        if len(parts) < 2 or line.endswith(":"):
            continue
        name, kind = parts[0], parts[1]
        if kind == "U":
            undefined.add(name)
        elif kind in ("w", "v"):
            weak.add(name)
        else:
            defined.add(name)
    return defined, undefined - defined, weak - defined


def bionic_symbols(map_files, arch, api):
    """Symbols bionic's version scripts (libc.map.txt, libm.map.txt, ...) export to NDK apps on
    `arch` from API level `api`."""
    provided = set()
    for path in map_files:
        block_tags = []
        block_name = ""
        for raw in Path(path).read_text().splitlines():
            line, _, comment = raw.partition("#")
            line = line.strip()
            tags = comment.split()
            header = re.match(r"^(\w+)\s*\{$", line)
            if header:
                block_name, block_tags = header.group(1), tags
                continue
            if line.startswith("}") or not line.endswith(";") or ":" in line or line == "*;":
                continue
            if block_name.endswith(("_PRIVATE", "_PLATFORM", "_DEPRECATED")):
                continue
            name = line[:-1].strip()
            if bionic_visible(block_tags, tags, arch, api):
                provided.add(name)
    return provided


def bionic_visible(block_tags, tags, arch, api):
    for scope in (block_tags, tags):
        if BIONIC_HIDDEN_TAGS & set(scope):
            return False
        arches = BIONIC_ARCHES & set(scope)
        if arches and arch not in arches:
            return False
    introduced = 0
    for scope in (block_tags, tags):  # the symbol's own tags override its block's
        for tag in scope:
            key, _, value = tag.partition("=")
            if key in ("introduced", "introduced-" + arch):
                if not value.isdigit():
                    return False  # a code name: not yet in a released NDK
                introduced = int(value)
    return introduced <= api


def tbd_symbols(tbd_files):
    """Symbols listed in Apple text-based stubs (.tbd, version 4)."""
    provided = set()
    for path in tbd_files:
        text = Path(path).read_text()
        for lst in re.findall(r"(?:symbols|weak-symbols|thread-local-symbols):\s*\[(.*?)\]", text, re.S):
            provided |= {s.strip().strip("'\"") for s in lst.split(",") if s.strip()}
    return provided


def plain_list(files):
    provided = set()
    for path in files:
        provided |= {s.strip() for s in Path(path).read_text().split() if s.strip()}
    return provided


def check_common(label, lib, calls, arch=None, prefix=""):
    """`prefix`: what the object format puts before C names ("_" in Mach-O)."""
    defined, undefined, weak = nm_symbols(lib, arch)
    missing = sorted(n for n in calls if prefix + n not in defined)
    report(not missing, f"{label}: defines all {len(calls)} FFI functions the JSI C++ calls"
           + (f"; missing {missing[:5]}" if missing else ""))
    ibm_z = sorted(s for s in defined | undefined | weak if re.search("zdnn|nnpa", s, re.I))
    report(not ibm_z, f"{label}: no IBM Z (zdnn/nnpa) symbols" + (f"; found {ibm_z[:5]}" if ibm_z else ""))
    return undefined, weak


def check_platform(label, undefined, weak, provided, source, allowed_prefixes=()):
    for prefix, what in allowed_prefixes:
        named = sorted(s for s in undefined if s.startswith(prefix))
        if named:
            print(f"      {label}: from {what}: {' '.join(named)}")
            undefined = undefined - set(named)
    missing = sorted(undefined - provided)
    report(not missing, f"{label}: all {len(undefined)} undefined symbols are in {source}"
           + (f"; not provided: {missing}" if missing else ""))
    weak_missing = sorted(weak - provided)
    if weak_missing:
        print(f"      {label}: weak, resolved at run time when present: {weak_missing}")


def check_android(abi, lib, calls, provided, source):
    elf_class, machine, _ = ANDROID_ABIS[abi]
    headers = run(f"llvm-readobj-{LLVM}", "--file-headers", lib)
    members = headers.count("File: ")
    classes = re.findall(r"Class: (\S+)", headers)
    machines = re.findall(r"Machine: (\S+)", headers)
    ok = members > 0 and classes == [elf_class] * members and machines == [machine] * members
    report(ok, f"{abi}: all {members} objects are ELF {elf_class} {machine}")
    undefined, weak = check_common(abi, lib, calls)
    print(f"      {abi}: undefined: {' '.join(sorted(undefined))}")
    for name, origin in sorted(ANDROID_BY_NAME.get(ANDROID_ABIS[abi][2], {}).items()):
        if name in undefined:
            print(f"      {abi}: {name} from {origin} (by name, not verified)")
            undefined = undefined - {name}
    check_platform(abi, undefined, weak, provided, source)


def check_ios(label, lib, variant, min_ios, calls, provided, source, allowed_prefixes):
    archs = run(f"llvm-lipo-{LLVM}", "-archs", lib).split()
    expected = ["arm64"] if variant == "ios" else ["x86_64", "arm64"]
    report(sorted(archs) == sorted(expected), f"{label}: architectures {archs} (want {expected})")
    for arch in archs:
        text = run(f"llvm-objdump-{LLVM}", "--macho", "--private-headers", "--arch=" + arch, lib)
        objects = len(re.findall(r"^\S.*\.o\):?$|^\S.*\(.*\.o\):$", text, re.M))
        versions = re.findall(r"cmd LC_BUILD_VERSION.*?platform (\S+).*?minos (\S+)", text, re.S)
        legacy = text.count("LC_VERSION_MIN_")
        want = (MACHO_PLATFORM[variant], min_ios)
        ok = versions and all(v == want for v in versions) and len(versions) == objects and not legacy
        report(ok, f"{label} {arch}: {len(versions)} of {objects} objects have LC_BUILD_VERSION platform "
               f"{want[0]} ({variant}) minos {min_ios}"
               + ("" if ok else f"; seen {sorted(set(versions))}, {legacy} legacy version commands"))
        undefined, weak = check_common(f"{label} {arch}", lib, calls, arch, prefix="_")
        print(f"      {label} {arch}: undefined: {' '.join(sorted(undefined))}")
        check_platform(f"{label} {arch}", undefined, weak, provided, source, allowed_prefixes)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cpp", nargs="+", required=True, help="cpp/generated/*.cpp")
    p.add_argument("--android", nargs=2, action="append", default=[], metavar=("ABI", "LIB"))
    p.add_argument("--ios", nargs=3, action="append", default=[], metavar=("VARIANT", "LIB", "MIN_IOS"),
                   help="VARIANT is ios or simulator")
    p.add_argument("--bionic-map", nargs="*", default=[], help="bionic's libc/libm/libdl .map.txt files")
    p.add_argument("--android-api", type=int, default=24)
    p.add_argument("--android-list", nargs="*", default=[],
                   help="files of further symbols the Android link provides (liblog, clang runtime)")
    p.add_argument("--android-source", default="the Android lists")
    p.add_argument("--tbd", nargs="*", default=[], help="Apple .tbd stubs (libSystem)")
    p.add_argument("--ios-source", default="the iOS lists")
    p.add_argument("--ios-allow-prefix", nargs=2, action="append", default=[], metavar=("PREFIX", "WHAT"),
                   help="undefined symbols with this prefix come from WHAT (listed, not verified)")
    args = p.parse_args()

    declared, calls = ffi_calls(args.cpp)
    print(f"      JSI C++: {len(declared)} FFI functions declared, {len(calls)} called")
    report(len(calls) > 0, "the generated C++ calls FFI functions")
    extra = plain_list(args.android_list)
    for abi, lib in args.android:
        provided = bionic_symbols(args.bionic_map, ANDROID_ABIS[abi][2], args.android_api) | extra
        check_android(abi, lib, calls, provided, args.android_source)
    apple = tbd_symbols(args.tbd)
    for variant, lib, min_ios in args.ios:
        check_ios(f"iOS {variant}", lib, variant, min_ios, calls, apple, args.ios_source, args.ios_allow_prefix)
    print(f"{len(passes)} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
