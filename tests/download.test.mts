// Model downloads from TypeScript (issue 15) against a real Node HTTP server on 127.0.0.1 that
// serves the real SmolLM2 file and random bytes, with injected faults: create from a URL with
// progress, resume after the server drops the connection, integrity mismatch, abort (and the
// resume that follows), 404, and the DownloadAdapter path. Checked with Node's own SHA-256.
// Issue 38 item 6, each with its bound: an abort of a stalled transfer settles and closes the
// connection in < 2 s; an adapter without cancel() settles on abort in < 500 ms; an HTML error
// page is refused (not GGUF) and not cached; a poisoned index entry is never returned.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as native from './generated/napi/local_llm_ffi.ts';
import { startFileServer, type FileServer } from './http-file-server.mts';
import {
  setBindings,
  LocalLLM,
  LocalLLMError,
  LocalLLMErrorCode,
  ModelManager,
  createNativeDownloader,
  type DownloadAdapter,
} from '../src/api/index.ts';

native.default.initialize();
setBindings(native as any);

const MODEL = process.env.LOCAL_LLM_MODEL ?? '';
assert.ok(MODEL, 'LOCAL_LLM_MODEL must be set (run scripts/checks/js-test.sh)');

const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');
/** Random bytes after the GGUF magic (downloads accept GGUF files only). */
const gguf = (n: number) => Buffer.concat([Buffer.from('GGUF'), randomBytes(n - 4)]);

let server: FileServer;
let base = '';
let routes: FileServer['routes'];
let log: FileServer['log'];
const dirs: string[] = [];

function cacheDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'local-llm-dl-'));
  dirs.push(d);
  return d;
}

before(async () => {
  server = await startFileServer();
  ({ base, routes, log } = server);
});

after(() => {
  server?.close();
  for (const d of dirs) {
    rmSync(d, { recursive: true, force: true });
  }
});

test('LocalLLM.create downloads a URL model with progress, then uses the cache', async () => {
  const data = readFileSync(MODEL);
  routes.set('/hf/smol/model.gguf', { data });
  const dir = cacheDir();
  const progress: number[][] = [];
  const ai = await LocalLLM.create({
    model: `${base}/hf/smol/model.gguf`,
    cacheDir: dir,
    expectedSha256: sha256(data),
    contextSize: 256,
    threads: 2,
    warmup: false,
    onDownloadProgress: (d, t, p) => progress.push([d, t, p]),
  });
  try {
    const r = await ai.chat.completions.create({ messages: [{ role: 'user', content: 'Hi' }], max_tokens: 2 });
    assert.ok(r.choices[0]!.message.content !== undefined);
  } finally {
    ai.dispose();
  }
  assert.ok(progress.length > 0);
  for (let i = 1; i < progress.length; i++) {
    assert.ok(progress[i]![0]! >= progress[i - 1]![0]!, 'progress never goes back');
  }
  assert.deepEqual(progress.at(-1), [data.length, data.length, 100]);
  const [entry] = await new ModelManager(dir).listModels();
  assert.equal(entry!.sha256, sha256(data));
  assert.equal(sha256(readFileSync(entry!.path)), sha256(data));
  // A second create is served from the cache: no new request.
  const before = log.get('/hf/smol/model.gguf')!.ranges.length;
  const again = await LocalLLM.create({
    model: `${base}/hf/smol/model.gguf`,
    cacheDir: dir,
    contextSize: 256,
    warmup: false,
  });
  again.dispose();
  assert.equal(log.get('/hf/smol/model.gguf')!.ranges.length, before);
});

test('a dropped connection is resumed with Range, sending only the rest', async () => {
  const data = gguf(3 << 20);
  routes.set('/drop.gguf', { data, dropAfter: 1 << 20, times: 1 });
  const mm = new ModelManager(cacheDir());
  const path = await mm.downloadModel(`${base}/drop.gguf`, { expectedSize: data.length });
  assert.equal(sha256(readFileSync(path)), sha256(data));
  const { ranges, sent } = log.get('/drop.gguf')!;
  assert.equal(ranges.length, 2);
  const resumedAt = Number(/^bytes=(\d+)-$/.exec(ranges[1] ?? '')?.[1]);
  assert.ok(resumedAt > 0 && resumedAt <= 1 << 20, `resumed at ${ranges[1]}`);
  assert.equal(sent, (1 << 20) + data.length - resumedAt);
});

test('wrong bytes reject with DOWNLOAD_INTEGRITY_MISMATCH and leave nothing', async () => {
  const data = gguf(200_000);
  routes.set('/bad.gguf', { data });
  const mm = new ModelManager(cacheDir());
  await assert.rejects(
    mm.downloadModel(`${base}/bad.gguf`, { expectedSha256: sha256(Buffer.from('other')) }),
    (e: unknown) => e instanceof LocalLLMError && e.code === LocalLLMErrorCode.DOWNLOAD_INTEGRITY_MISMATCH,
  );
  assert.deepEqual(await mm.listModels(), []);
  assert.ok(!existsSync(mm.modelPath(`${base}/bad.gguf`)));
  await assert.rejects(
    mm.downloadModel(`${base}/missing.gguf`),
    (e: unknown) => e instanceof LocalLLMError && e.code === LocalLLMErrorCode.DOWNLOAD_FAILED && /404/.test(e.message),
  );
});

test('abort rejects with an AbortError; the next call resumes the partial file', async () => {
  const data = gguf(2 << 20);
  routes.set('/slow.gguf', { data, delayMs: 15 });
  const mm = new ModelManager(cacheDir());
  const ac = new AbortController();
  await assert.rejects(
    mm.downloadModel(`${base}/slow.gguf`, {
      signal: ac.signal,
      onProgress: (d) => {
        if (d >= 500_000) ac.abort();
      },
    }),
    (e: unknown) => (e as Error).name === 'AbortError',
  );
  const part = `${mm.modelPath(`${base}/slow.gguf`)}.part`;
  assert.ok(statSync(part).size >= 500_000, 'the partial file stays');
  assert.deepEqual(await mm.listModels(), []);
  routes.set('/slow.gguf', { data });
  const path = await mm.downloadModel(`${base}/slow.gguf`);
  assert.equal(sha256(readFileSync(path)), sha256(data));
  assert.match(log.get('/slow.gguf')!.ranges[1] ?? '', /^bytes=[1-9]\d*-$/);
});

test('a DownloadAdapter brings the bytes; ModelManager verifies and indexes them', async () => {
  const data = gguf(300_000);
  routes.set('/adapter.gguf', { data });
  const calls: string[] = [];
  const adapter: DownloadAdapter = {
    async download(url, destPath, onProgress) {
      calls.push(url);
      const body = Buffer.from(await (await fetch(url)).arrayBuffer());
      writeFileSync(destPath, body);
      onProgress?.(body.length, body.length, 100);
    },
  };
  const dir = cacheDir();
  const mm = new ModelManager(dir, adapter);
  const path = await mm.downloadModel(`${base}/adapter.gguf`, { expectedSha256: sha256(data) });
  assert.deepEqual(calls, [`${base}/adapter.gguf`]);
  assert.equal(sha256(readFileSync(path)), sha256(data));
  const [entry] = await mm.listModels();
  assert.equal(entry!.sha256, sha256(data));
  // Cached now: the adapter is not called again.
  await mm.downloadModel(`${base}/adapter.gguf`);
  assert.equal(calls.length, 1);
  // A file that does not match is deleted.
  assert.equal(await mm.removeModel(`${base}/adapter.gguf`), true);
  await assert.rejects(
    mm.downloadModel(`${base}/adapter.gguf`, { expectedSize: data.length + 1 }),
    (e: unknown) => e instanceof LocalLLMError && e.code === LocalLLMErrorCode.DOWNLOAD_INTEGRITY_MISMATCH,
  );
  assert.ok(!existsSync(mm.modelPath(`${base}/adapter.gguf`)));
});

test('aborting a stalled download settles and closes the connection in < 2 s', async () => {
  routes.set('/stall.gguf', { data: gguf(1 << 20), stallAfter: 100_000 });
  const mm = new ModelManager(cacheDir());
  const ac = new AbortController();
  const done = mm.downloadModel(`${base}/stall.gguf`, {
    signal: ac.signal,
    onProgress: (d) => {
      if (d >= 100_000 && !ac.signal.aborted) {
        // The default read timeout is 60 s: only closing the socket ends the wait in time.
        setTimeout(() => ac.abort(), 300);
      }
    },
  });
  const aborted = new Promise<number>((resolve) => ac.signal.addEventListener('abort', () => resolve(Date.now())));
  await assert.rejects(done, (e: unknown) => (e as Error).name === 'AbortError');
  const settled = Date.now() - (await aborted);
  while (server.stalledOpen() > 0) {
    assert.ok(Date.now() - (await aborted) < 2000, 'the connection is still open 2 s after the abort');
    await new Promise((r) => setTimeout(r, 10));
  }
  const closed = Date.now() - (await aborted);
  assert.ok(settled < 2000, `settled ${settled} ms after the abort`);
  console.log(`stalled abort: settled in ${settled} ms, connection closed in ${closed} ms`);
});

test('an adapter without cancel(): the abort settles at once', async () => {
  routes.set('/hang.gguf', { data: gguf(1000) });
  const adapter: DownloadAdapter = {
    download: () => new Promise<void>(() => {}),
  };
  const mm = new ModelManager(cacheDir(), adapter);
  const ac = new AbortController();
  setTimeout(() => ac.abort(), 50);
  const t = Date.now();
  await assert.rejects(
    mm.downloadModel(`${base}/hang.gguf`, { signal: ac.signal }),
    (e: unknown) => (e as Error).name === 'AbortError',
  );
  const took = Date.now() - t;
  assert.ok(took < 500, `settled after ${took} ms`);
  assert.deepEqual(await mm.listModels(), []);
  // A cancel() that throws does not stop the abort either.
  const throwing = new ModelManager(cacheDir(), {
    download: () => new Promise<void>(() => {}),
    cancel: () => {
      throw new Error('cannot cancel');
    },
  });
  const ac2 = new AbortController();
  setTimeout(() => ac2.abort(), 50);
  await assert.rejects(
    throwing.downloadModel(`${base}/hang.gguf`, { signal: ac2.signal }),
    (e: unknown) => (e as Error).name === 'AbortError',
  );
});

test('an HTML error page (no SHA-256) is refused as not GGUF and not cached', async () => {
  const page = Buffer.from('<!DOCTYPE html><html><body>Sign in to continue</body></html>\n'.repeat(50));
  routes.set('/login/model.gguf', { data: page });
  const mm = new ModelManager(cacheDir());
  const url = `${base}/login/model.gguf`;
  await assert.rejects(
    mm.downloadModel(url),
    (e: unknown) =>
      e instanceof LocalLLMError &&
      e.code === LocalLLMErrorCode.DOWNLOAD_INTEGRITY_MISMATCH &&
      /not a GGUF/.test(e.message) &&
      /<!DOCTYPE/.test(e.message),
  );
  assert.deepEqual(await mm.listModels(), []);
  assert.ok(!existsSync(mm.modelPath(url)));
  assert.ok(!existsSync(`${mm.modelPath(url)}.part`));
  // The same page written by a DownloadAdapter is refused the same way.
  const adapted = new ModelManager(cacheDir(), {
    async download(_url, destPath) {
      writeFileSync(destPath, page);
    },
  });
  await assert.rejects(
    adapted.downloadModel(url),
    (e: unknown) => e instanceof LocalLLMError && e.code === LocalLLMErrorCode.DOWNLOAD_INTEGRITY_MISMATCH,
  );
  assert.deepEqual(await adapted.listModels(), []);
});

test('a poisoned index entry pointing outside the cache is never returned', async () => {
  const data = gguf(100_000);
  routes.set('/poison.gguf', { data });
  const dir = cacheDir();
  const outside = join(cacheDir(), 'secret.gguf');
  writeFileSync(outside, data);
  const mm = new ModelManager(dir);
  const url = `${base}/poison.gguf`;
  const poison = () => {
    const indexPath = join(dir, 'index.json');
    const index = JSON.parse(readFileSync(indexPath, 'utf8'));
    for (const e of Object.values(index.models) as { path: string }[]) {
      e.path = outside;
    }
    writeFileSync(indexPath, JSON.stringify(index));
  };
  await mm.downloadModel(url);
  poison();
  await assert.rejects(
    mm.getCachedModel(url, { expectedSha256: sha256(data) }),
    (e: unknown) => e instanceof LocalLLMError && e.code === LocalLLMErrorCode.CACHE_CORRUPT,
  );
  await mm.downloadModel(url);
  poison();
  assert.deepEqual(await mm.listModels(), []);
  await mm.downloadModel(url);
  poison();
  const path = await mm.downloadModel(url, { expectedSha256: sha256(data) });
  assert.equal(path, mm.modelPath(url));
  assert.equal(sha256(readFileSync(outside)), sha256(data), 'the outside file is untouched');
});

test("createNativeDownloader (local-llm-rn's adapter) downloads natively into the manager's cache", async () => {
  const data = gguf(200_000);
  routes.set('/native.gguf', { data });
  const dir = cacheDir();
  const mm = new ModelManager(dir, createNativeDownloader());
  const seen: number[] = [];
  const path = await mm.downloadModel(`${base}/native.gguf`, {
    expectedSha256: sha256(data),
    onProgress: (_d, _t, percent) => void seen.push(percent),
  });
  assert.equal(path, mm.modelPath(`${base}/native.gguf`));
  assert.equal(sha256(readFileSync(path)), sha256(data));
  assert.equal(seen.at(-1), 100);
  // Any other destination is refused.
  await assert.rejects(
    createNativeDownloader().download(`${base}/native.gguf`, join(dir, 'elsewhere.gguf')),
    (e: unknown) => e instanceof LocalLLMError && e.code === LocalLLMErrorCode.INVALID_PATH,
  );
});
