// The full soak (issue 16) through the package's TypeScript API: scripts/checks/soak.sh runs it.
//   node --expose-gc --import tsx tests/soak/soak.mts [--cycles N] [--aborts N] [--every N]
// Prints a JSON report (RSS slopes in KB/cycle, abort outcomes) and exits non-zero when an
// operation hung or failed unexpectedly, or a slope is above --max-slope KB/cycle (default 4).
import * as native from '../generated/napi/local_llm_ffi.ts';
import { Model, setBindings } from '../../src/api/index.ts';
import { contextCycles, loadFreeCycles, randomAborts } from './soak-lib.mts';

native.default.initialize();
setBindings(native as any);

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
}
const MODEL = process.env.LOCAL_LLM_MODEL ?? '';
if (!MODEL) throw new Error('LOCAL_LLM_MODEL must be set (scripts/checks/soak.sh sets it)');
const cycles = arg('cycles', 1000);
const every = arg('every', 50);
const maxSlope = arg('max-slope', 4);

const log = (what: string, value: unknown) => console.log(`${what}: ${JSON.stringify(value)}`);
const loadFree = await loadFreeCycles(MODEL, cycles, every);
log('load/free', loadFree);
const model = await Model.load(MODEL);
const contexts = await contextCycles(model, cycles, every);
log('context create/dispose', contexts);
const pool = Array.from({ length: 3 }, () => model.createContext({ contextSize: 512, threads: 1 }));
const aborts = await randomAborts(pool, arg('aborts', 200), { parallel: 4, seed: arg('seed', 1) });
log('random aborts', aborts);
// The contexts still serve requests after the storm.
for (const c of pool) await c.generate('Hi', { maxTokens: 2 });
pool.forEach((c) => c.dispose());
model.dispose();

const failures = [
  ...(aborts.hung > 0 ? [`${aborts.hung} operations hung`] : []),
  ...aborts.unexpected.map((e) => `unexpected: ${e}`),
  ...(loadFree.slopeKbPerCycle > maxSlope
    ? [`load/free RSS grows ${loadFree.slopeKbPerCycle.toFixed(2)} KB/cycle`]
    : []),
  ...(contexts.slopeKbPerCycle > maxSlope ? [`context RSS grows ${contexts.slopeKbPerCycle.toFixed(2)} KB/cycle`] : []),
];
console.log(
  `SUMMARY load/free ${loadFree.slopeKbPerCycle.toFixed(3)} KB/cycle (${loadFree.firstKb}→${loadFree.lastKb} KB, ${loadFree.seconds} s); ` +
    `context ${contexts.slopeKbPerCycle.toFixed(3)} KB/cycle (${contexts.firstKb}→${contexts.lastKb} KB, ${contexts.seconds} s); ` +
    `aborts: ${aborts.operations} ops, ${aborts.aborted} aborted, ${aborts.completed} completed, ${aborts.preempted} preempted, ` +
    `${aborts.hung} hung, ${aborts.unexpected.length} unexpected (${aborts.seconds} s)`,
);
if (failures.length > 0) {
  console.error(`FAIL: ${failures.join('; ')}`);
  process.exit(1);
}
