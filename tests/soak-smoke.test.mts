// A short soak through the JS API (the full one is scripts/checks/soak.sh): 20 model load/free and 20
// context create/dispose cycles, and 20 random aborts across parallel streams with every
// promise settling within 30 s. Too few cycles for an RSS slope: growth is bounded loosely.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import * as native from './generated/napi/local_llm_ffi.ts';
import { Model, setBindings } from '../src/api/index.ts';
import { contextCycles, loadFreeCycles, randomAborts, slope } from './soak/soak-lib.mts';

native.default.initialize();
setBindings(native as any);

const MODEL = process.env.LOCAL_LLM_MODEL ?? '';
assert.ok(MODEL, 'LOCAL_LLM_MODEL must be set (run scripts/checks/js-test.sh)');
let model: Model | null = null;
after(() => model?.dispose());

test('the slope is a least-squares fit', () => {
  assert.equal(
    slope([
      [0, 10],
      [50, 110],
      [100, 210],
    ]),
    2,
  );
  assert.equal(
    slope([
      [0, 5],
      [50, 5],
    ]),
    0,
  );
  assert.ok(
    Math.abs(
      slope([
        [0, 0],
        [1, 1],
        [2, 0],
        [3, 1],
      ]) - 0.2,
    ) < 1e-12,
  );
});

test('20 load/free and 20 context create/dispose cycles grow RSS by less than 40 MB', async () => {
  const loads = await loadFreeCycles(MODEL, 20, 5);
  assert.equal(loads.samples.length, 5);
  assert.ok(loads.lastKb - loads.firstKb < 40 * 1024, JSON.stringify(loads));
  model = await Model.load(MODEL);
  const contexts = await contextCycles(model, 20, 5);
  assert.ok(contexts.lastKb - contexts.firstKb < 40 * 1024, JSON.stringify(contexts));
});

test('20 random aborts across parallel streams: every promise settles, the contexts still work', async () => {
  model ??= await Model.load(MODEL);
  const contexts = [0, 1].map(() => model!.createContext({ contextSize: 256, threads: 1 }));
  const report = await randomAborts(contexts, 20, { parallel: 3, deadlineMs: 30_000, seed: 7 });
  assert.equal(report.hung, 0, JSON.stringify(report));
  assert.deepEqual(report.unexpected, []);
  assert.ok(report.aborted > 0, JSON.stringify(report));
  assert.equal(report.operations, report.aborted + report.completed + report.preempted);
  for (const c of contexts) {
    assert.equal((await c.generateResult('Hi', { maxTokens: 2, temperature: 0 })).completionTokens, 2);
    c.dispose();
  }
});
