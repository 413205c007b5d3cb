#!/usr/bin/env python3
"""Side-by-side benchmark of our engine (`local-llm bench`) and llama.cpp's `llama-bench` on the
same GGUF, thread count and workload. Runs are interleaved (ours, llama.cpp, ours, ...) so that
both see the same machine noise; medians and the ratio ours / llama.cpp are printed.

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


def ours(cli, model, test, n, threads):
    args = ["-p", str(n), "-n", "0"] if test == "pp" else ["-p", "0", "-n", str(n)]
    out = run([cli, "bench", "-m", model, *args, "-t", str(threads), "-r", "1", "--json"])
    return json.loads(out.strip().splitlines()[-1])["median_tps"]


def ceiling(cli, model, threads):
    """Read bandwidth (GB/s), weight bytes per token and the decoding ceiling (t/s)."""
    out = run([cli, "bench", "-m", model, "-p", "0", "-n", "0", "-t", str(threads), "--bandwidth", "--json"])
    j = json.loads(out.strip().splitlines()[-1])
    return j["read_gbs"], j["weight_bytes_per_token"], j["ceiling_tps"]


def llama(bench, model, test, n, threads):
    args = ["-p", str(n), "-n", "0"] if test == "pp" else ["-p", "0", "-n", str(n)]
    out = run([bench, "-m", model, *args, "-t", str(threads), "-r", "1", "-o", "jsonl"])
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
    a = ap.parse_args()
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
                    o.append(ours(a.cli, model, test, n, threads))
                    l.append(llama(a.llama_bench, model, test, n, threads))
                mo, ml = statistics.median(o), statistics.median(l)
                print(f"| {name} | {threads} | {test}{n} | {mo:.1f} | {ml:.1f} | {mo / ml:.2f} |", flush=True)
                if test == "tg":
                    gbs, nbytes, cap = ceiling(a.cli, model, threads)
                    print(f"| {name} | {threads} | tg: % of bandwidth ceiling ({gbs:.1f} GB/s, "
                          f"{nbytes / 1e6:.0f} MB/token, {cap:.0f} t/s) | {100 * mo / cap:.0f}% "
                          f"| {100 * ml / cap:.0f}% | |", flush=True)
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
