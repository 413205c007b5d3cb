#!/usr/bin/env python3
"""Batching benchmark: total generation speed of N sequences decoding together against one
sequence, for our engine (`local-llm bench --parallel`) and llama.cpp's `llama-batched-bench`
on the same GGUF and thread count.

Each round runs both programs once (interleaved), each measuring one sequence, then N, then
one again; a round's ratio is the N-sequence rate over the mean of the two one-sequence rates
around it, so that slow drifts of the machine cancel. Every sequence starts after `depth`
tokens of context (llama-batched-bench's `-npp`) and generates `n` tokens. Prints the medians
and quartiles over the rounds."""
import argparse
import json
import os
import statistics

from bench_compare import run as run_stdout


def run(cmd):
    """Run cmd and return its stdout's JSON lines."""
    return [json.loads(line) for line in run_stdout(cmd).splitlines() if line.startswith("{")]


def ours(a, model):
    """[one, N, one] sequences' total tokens per second, ours."""
    rows = run([a.cli, "bench", "-m", model, "-p", "0", "-n", str(a.n), "-d", str(a.depth),
                "-t", str(a.threads), "-r", "1", "--parallel", f"1,{a.streams},1", "--json"])
    return [r["median_tps"] for r in rows]


def llama(a, model):
    """[one, N, one] sequences' total tokens per second, llama.cpp."""
    ctx = a.streams * (a.depth + a.n) + 64
    rows = run([a.batched_bench, "-m", model, "-c", str(ctx), "-npp", str(a.depth),
                "-ntg", str(a.n), "-npl", f"1,{a.streams},1", "-t", str(a.threads),
                "--output-format", "jsonl"])
    return [r["speed_tg"] for r in rows]


def summary(rates):
    """Medians of one / N sequences and the median and quartiles of the round ratios."""
    ratios = [n / ((x + y) / 2) for x, n, y in rates]
    q = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else [ratios[0]] * 3
    ones = [v for x, _, y in rates for v in (x, y)]
    return (statistics.median(ones), statistics.median([n for _, n, _ in rates]),
            statistics.median(ratios), q[0], q[2])


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--cli", required=True)
    ap.add_argument("--batched-bench", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--streams", type=int, default=4)
    ap.add_argument("--depth", type=int, default=8)
    ap.add_argument("-n", type=int, default=128)
    ap.add_argument("-r", type=int, default=6)
    a = ap.parse_args()
    o, l = [], []
    for _ in range(a.r):
        o.append(ours(a, a.model))
        l.append(llama(a, a.model))
    name = os.path.basename(a.model)
    print(f"{name}, {a.threads} threads, {a.r} rounds, each sequence {a.depth} tokens of "
          f"context then {a.n} generated")
    print(f"| | 1 sequence t/s | {a.streams} sequences t/s | ratio (quartiles) |")
    print("|---|---:|---:|---:|")
    for who, rates in (("ours", o), ("llama.cpp", l)):
        one, many, ratio, q1, q3 = summary(rates)
        print(f"| {who} | {one:.1f} | {many:.1f} | {ratio:.2f} ({q1:.2f}-{q3:.2f}) |")
    (o1, on, *_), (l1, ln, *_) = summary(o), summary(l)
    print(f"| ours / llama.cpp | {o1 / l1:.2f} | {on / ln:.2f} | |")


if __name__ == "__main__":
    main()
