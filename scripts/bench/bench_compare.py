#!/usr/bin/env python3
"""Side-by-side benchmark of our engine (`local-llm bench`) and llama.cpp's `llama-bench` on the
same GGUF, thread count and workload. Runs are interleaved (ours, llama.cpp, ours, ...) so that
both see the same machine noise; medians and the ratio ours / llama.cpp are printed.

`-d D` starts every test after D tokens of context, and `-ctk/-ctv` choose the KV cache types,
in both engines (llama.cpp gets flash attention, which it needs for a quantized value cache,
whenever a type is not f16).

Also reports start-up (process start to first generated token, incl. model load) and peak RSS
of a short run, measured per process with wait4()."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time


def run(cmd):
    """Run cmd and return its stdout."""
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stderr}")
    return proc.stdout


def run_rss(cmd):
    """Run cmd silently; return (wall seconds, the child's own peak RSS in MiB)."""
    start = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        os.execvp(cmd[0], cmd)
    _, status, usage = os.wait4(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"failed: {' '.join(cmd)}")
    return time.perf_counter() - start, usage.ru_maxrss / 1024


def cache_args(a):
    """The depth and cache-type flags both engines share."""
    return ["-d", str(a.d), "-ctk", a.ctk, "-ctv", a.ctv]


def ours(cli, model, test, n, threads, extra):
    args = ["-p", str(n), "-n", "0"] if test == "pp" else ["-p", "0", "-n", str(n)]
    out = run([cli, "bench", "-m", model, *args, "-t", str(threads), "-r", "1", "--json", *extra])
    return json.loads(out.strip().splitlines()[-1])["median_tps"]


def ceiling(cli, model, threads):
    """Read bandwidth (GB/s), weight bytes per token and the decoding ceiling (t/s)."""
    out = run([cli, "bench", "-m", model, "-p", "0", "-n", "0", "-t", str(threads), "--bandwidth", "--json"])
    j = json.loads(out.strip().splitlines()[-1])
    return j["read_gbs"], j["weight_bytes_per_token"], j["ceiling_tps"]


def llama(bench, model, test, n, threads, extra):
    args = ["-p", str(n), "-n", "0"] if test == "pp" else ["-p", "0", "-n", str(n)]
    out = run([bench, "-m", model, *args, "-t", str(threads), "-r", "1", "-o", "jsonl", *extra])
    return json.loads(out.strip().splitlines()[-1])["avg_ts"]


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--cli", required=True)
    ap.add_argument("--llama-bench", required=True)
    ap.add_argument("--model", action="append", required=True)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("-p", type=int, default=512)
    ap.add_argument("-n", type=int, default=128)
    ap.add_argument("-r", type=int, default=5)
    ap.add_argument("-d", type=int, default=0, help="context depth before each test")
    ap.add_argument("-ctk", default="f16", help="KV cache type of keys")
    ap.add_argument("-ctv", default="f16", help="KV cache type of values")
    ap.add_argument("--no-startup", action="store_true", help="skip start-up and RSS")
    ap.add_argument("--no-repack", action="store_true",
                    help="llama-bench --repack 0 (its AMX repacking crashes on tiny synthetic models)")
    a = ap.parse_args()
    extra = cache_args(a)
    llama_extra = extra + (["-fa", "1"] if (a.ctk, a.ctv) != ("f16", "f16") else [])
    llama_extra += ["--repack", "0"] if a.no_repack else []
    print(f"| model | threads | test | ours t/s | llama.cpp t/s | ratio |")
    print(f"|---|---:|---|---:|---:|---:|")
    for model in a.model:
        name = os.path.basename(model)
        for threads in [int(t) for t in a.threads.split(",")]:
            for test, n in (("pp", a.p), ("tg", a.n)):
                if n == 0:
                    continue
                o, l = [], []
                for _ in range(a.r):
                    o.append(ours(a.cli, model, test, n, threads, extra))
                    l.append(llama(a.llama_bench, model, test, n, threads, llama_extra))
                mo, ml = statistics.median(o), statistics.median(l)
                at = f" @ d{a.d}" if a.d else ""
                print(f"| {name} | {threads} | {test}{n}{at} | {mo:.1f} | {ml:.1f} | {mo / ml:.2f} |", flush=True)
                if test == "tg" and not a.d:
                    gbs, nbytes, cap = ceiling(a.cli, model, threads)
                    print(f"| {name} | {threads} | tg: % of bandwidth ceiling ({gbs:.1f} GB/s, "
                          f"{nbytes / 1e6:.0f} MB/token, {cap:.0f} t/s) | {100 * mo / cap:.0f}% "
                          f"| {100 * ml / cap:.0f}% | |", flush=True)
        if a.no_startup:
            continue
        # Start-up (load + first token) and peak RSS, 1 thread, interleaved.
        so, sl, ro, rl = [], [], [], []
        for _ in range(a.r):
            w, r = run_rss([a.cli, "bench", "-m", model, "-p", "0", "-n", "1", "-t", "1", "-r", "1"])
            so.append(w)
            ro.append(r)
            w, r = run_rss([a.llama_bench, "-m", model, "-p", "0", "-n", "1", "-t", "1", "-r", "1"])
            sl.append(w)
            rl.append(r)
        print(f"| {name} | 1 | start-up s | {statistics.median(so):.2f} | {statistics.median(sl):.2f} | {statistics.median(so) / statistics.median(sl):.2f} |")
        print(f"| {name} | 1 | peak RSS MiB | {max(ro):.0f} | {max(rl):.0f} | {max(ro) / max(rl):.2f} |")


if __name__ == "__main__":
    main()
