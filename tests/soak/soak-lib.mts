// The soak checks of the JS API (issue 16), shared by the full run (tests/soak/soak.mts via
// scripts/checks/soak.sh) and the CI smoke (tests/soak-smoke.test.mts): model load/free and context
// create/dispose cycles with the process RSS sampled every `every` cycles (the slope of a
// least-squares line through the samples, in KB per cycle), and random aborts across parallel
// streams where every promise must settle within a deadline.
import { InferenceContext, LocalLLMError, LocalLLMErrorCode, Model } from '../../src/api/index.ts';

/** RSS samples and their least-squares slope. */
export interface RssReport {
  cycles: number;
  /** [cycle, RSS in KB] after each `every` cycles (the first at cycle 0, after one warm-up cycle). */
  samples: Array<[number, number]>;
  slopeKbPerCycle: number;
  firstKb: number;
  lastKb: number;
  seconds: number;
}

function rssKb(): number {
  (globalThis as { gc?: () => void }).gc?.();
  return Math.round(process.memoryUsage().rss / 1024);
}

/** Least-squares slope of y over x. */
export function slope(points: Array<[number, number]>): number {
  const n = points.length;
  if (n < 2) return 0;
  const mx = points.reduce((s, [x]) => s + x, 0) / n;
  const my = points.reduce((s, [, y]) => s + y, 0) / n;
  let sxy = 0;
  let sxx = 0;
  for (const [x, y] of points) {
    sxy += (x - mx) * (y - my);
    sxx += (x - mx) ** 2;
  }
  return sxx === 0 ? 0 : sxy / sxx;
}

async function cycles(n: number, every: number, cycle: () => Promise<void>): Promise<RssReport> {
  const start = Date.now();
  await cycle(); // warm-up: first-use allocations (thread pools, caches) are not growth
  const samples: Array<[number, number]> = [[0, rssKb()]];
  for (let i = 1; i <= n; i++) {
    await cycle();
    if (i % every === 0) samples.push([i, rssKb()]);
  }
  return {
    cycles: n,
    samples,
    slopeKbPerCycle: slope(samples),
    firstKb: samples[0][1],
    lastKb: samples[samples.length - 1][1],
    seconds: (Date.now() - start) / 1000,
  };
}

/** `n` cycles of loading `path` and disposing the model (with one token tokenized, so it is used). */
export function loadFreeCycles(path: string, n: number, every = 50): Promise<RssReport> {
  return cycles(n, every, async () => {
    const model = await Model.load(path);
    model.tokenize('hi');
    model.dispose();
  });
}

/** `n` cycles of creating a context on `model` (its KV cache allocated) and disposing it. */
export function contextCycles(model: Model, n: number, every = 50, contextSize = 512): Promise<RssReport> {
  return cycles(n, every, async () => {
    const context = model.createContext({ contextSize, threads: 2 });
    context.dispose();
  });
}

/** How the operations of {@link randomAborts} ended. */
export interface AbortReport {
  operations: number;
  aborted: number;
  completed: number;
  /** Streams cancelled by another request on their context (STREAM_FAILED, documented). */
  preempted: number;
  /** Anything else: unexpected errors (a failure). */
  unexpected: string[];
  /** Operations that did not settle within the deadline (a hang: a failure). */
  hung: number;
  seconds: number;
}

const HUNG = Symbol('hung');

function deadline<T>(p: Promise<T>, ms: number): Promise<T | typeof HUNG> {
  let timer: NodeJS.Timeout | undefined;
  const t = new Promise<typeof HUNG>((resolve) => {
    timer = setTimeout(() => resolve(HUNG), ms);
  });
  return Promise.race([p, t]).finally(() => clearTimeout(timer));
}

/**
 * Run streams (and now and then a whole generation) `parallel` at a time over `contexts`,
 * aborting `aborts` of them at a random moment (before the start, after a random delay or
 * after a random number of pieces), with a seeded random choice. Every operation must settle
 * within `deadlineMs`.
 */
export async function randomAborts(
  contexts: InferenceContext[],
  aborts: number,
  options: { parallel?: number; deadlineMs?: number; seed?: number } = {},
): Promise<AbortReport> {
  const parallel = options.parallel ?? 4;
  const deadlineMs = options.deadlineMs ?? 30_000;
  // mulberry32: a seeded generator exact in 32-bit integer arithmetic.
  let state = (options.seed ?? 1) >>> 0;
  const rand = (n: number) => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t ^= t + Math.imul(t ^ (t >>> 7), 61 | t);
    return ((t ^ (t >>> 14)) >>> 0) % n;
  };
  const report: AbortReport = {
    operations: 0,
    aborted: 0,
    completed: 0,
    preempted: 0,
    unexpected: [],
    hung: 0,
    seconds: 0,
  };
  const start = Date.now();
  let abortsLeft = aborts;
  const one = async (context: InferenceContext): Promise<void> => {
    const controller = new AbortController();
    const willAbort = abortsLeft > 0 && rand(4) !== 0;
    if (willAbort) abortsLeft--;
    const when = rand(3); // 0: before the start, 1: after a delay, 2: after some pieces
    const pieces = rand(6);
    if (willAbort && when === 1) setTimeout(() => controller.abort(), rand(40));
    if (willAbort && when === 0) controller.abort();
    const prompt = `Tell me about the number ${rand(1000)}.`;
    const op = async () => {
      if (rand(5) === 0) {
        await context.generate(prompt, { maxTokens: 24, signal: controller.signal });
        return;
      }
      let n = 0;
      for await (const _ of context.stream(prompt, { maxTokens: 24, signal: controller.signal })) {
        if (willAbort && when === 2 && ++n >= pieces) controller.abort();
      }
    };
    const outcome = await deadline(
      op().then(
        () => 'completed' as const,
        (e: unknown) => e,
      ),
      deadlineMs,
    );
    report.operations++;
    if (outcome === HUNG) {
      report.hung++;
      controller.abort();
    } else if (outcome === 'completed') {
      report.completed++;
    } else if ((outcome as { name?: string })?.name === 'AbortError') {
      report.aborted++;
    } else if (outcome instanceof LocalLLMError && outcome.code === LocalLLMErrorCode.STREAM_FAILED) {
      report.preempted++;
    } else {
      report.unexpected.push(String(outcome));
    }
  };
  while (abortsLeft > 0 && report.hung === 0) {
    const batch = Array.from({ length: parallel }, (_, i) =>
      one(contexts[(i + rand(contexts.length)) % contexts.length]),
    );
    await Promise.all(batch);
  }
  report.seconds = (Date.now() - start) / 1000;
  return report;
}
