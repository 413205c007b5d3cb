#!/usr/bin/env python3
"""Attribute the hottest translated blocks of an icount plugin log (blocks=N, qemu -d page) to
the functions of the executable, and print the functions by instructions executed.

    symbolize.py EXECUTABLE < LOG
"""
import bisect
import re
import subprocess
import sys
from collections import Counter


def main() -> None:
    exe = sys.argv[1]
    log = sys.stdin.read()
    # Where qemu loaded the executable (-d page: start_code, its first loaded page; `entry` is
    # the dynamic loader's for a dynamically linked program) minus its first PT_LOAD address.
    start = int(re.search(r"^start_code\s+0x([0-9a-f]+)", log, re.M).group(1), 16)
    segments = subprocess.run(["aarch64-linux-gnu-readelf", "-lW", exe], capture_output=True,
                              text=True, check=True).stdout
    first = min(int(v, 16) for v in re.findall(r"^\s*LOAD\s+0x[0-9a-f]+\s+0x([0-9a-f]+)",
                                                segments, re.M))
    bias = start - (first & ~0xfff)
    nm = subprocess.run(["aarch64-linux-gnu-nm", "-C", "-n", "--defined-only", exe],
                        capture_output=True, text=True, check=True).stdout
    addrs, names = [], []
    for line in nm.splitlines():
        parts = line.split(" ", 2)
        if len(parts) == 3 and parts[1] in "tTwW":
            addrs.append(int(parts[0], 16))
            names.append(parts[2])
    by_function = Counter()
    total = 0
    for vaddr, insns in re.findall(r"^block 0x([0-9a-f]+) (\d+)", log, re.M):
        i = bisect.bisect_right(addrs, int(vaddr, 16) - bias) - 1
        by_function[names[i] if i >= 0 else "?"] += int(insns)
        total += int(insns)
    all_insns = int(re.search(r"^insns (\d+)", log, re.M).group(1))
    print(f"# {total / all_insns:.1%} of {all_insns} instructions in the blocks listed")
    for name, insns in by_function.most_common(40):
        print(f"{insns / all_insns:7.2%} {insns:>14} {name[:160]}")


if __name__ == "__main__":
    main()
