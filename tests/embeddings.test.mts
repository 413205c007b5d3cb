// Embeddings and reranking from TypeScript (issue 34) on encoder models: all-MiniLM-L6-v2
// (LOCAL_LLM_MINILM, sentence-transformers' weights converted by tools/convert/bert_to_gguf.py)
// and random-weight rerankers written by tools/synth (a cross-encoder and a Qwen3-Reranker).
// The CLI (`local-llm embedding`, itself checked against llama.cpp's llama-embedding by
// rust/cli/tests/encoders.rs) is the reference: the TypeScript vectors and scores equal its
// output. Also the AI SDK's embedMany and rerank, and the errors of a model used for what it
// cannot do.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { EmbeddingModelV3, RerankingModelV3 } from '@ai-sdk/provider';
import { embedMany, rerank } from 'ai';
import * as native from './generated/napi/local_llm_ffi.ts';
import { setBindings, LocalLLM, LocalLLMErrorCode } from '../src/api/index.ts';
import { code } from './helpers.mts';

native.default.initialize();
setBindings(native as any);

const root = join(import.meta.dirname, '..');
const venv = join(root, '.cache/venv/bin/python3');
const python = existsSync(venv) ? venv : 'python3';
const cli = process.env.LOCAL_LLM_CLI ?? join(root, 'target/release/local-llm');
const MINILM = process.env.LOCAL_LLM_MINILM ?? '';
assert.ok(MINILM, 'LOCAL_LLM_MINILM must be set (run scripts/checks/js-test.sh)');

/** Paraphrase pairs, each pair unrelated to the others. */
const TEXTS = [
  'A man is playing a guitar.',
  'Someone plays an acoustic guitar on stage.',
  'The stock market fell sharply today.',
  'Share prices dropped a lot this afternoon.',
];

/** The CLI's vectors (`local-llm embedding --embd-output-format json`) for `args`. */
function cliVectors(args: string[]): number[][] {
  const out = execFileSync(cli, ['embedding', '--embd-output-format', 'json', '-t', '2', ...args], {
    stdio: ['ignore', 'pipe', 'ignore'],
  }).toString();
  return JSON.parse(out).data.map((d: { embedding: number[] }) => d.embedding);
}

function cosine(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let ab = 0;
  let aa = 0;
  let bb = 0;
  for (let i = 0; i < a.length; i++) {
    ab += a[i] * b[i];
    aa += a[i] * a[i];
    bb += b[i] * b[i];
  }
  return ab / Math.sqrt(aa * bb);
}

/** Equal as float32 values (the CLI prints them in full). */
function assertSameVector(got: ArrayLike<number>, want: number[], what: string) {
  assert.equal(got.length, want.length, `${what}: length`);
  for (let i = 0; i < want.length; i++) {
    assert.equal(Math.fround(got[i]), Math.fround(want[i]), `${what}[${i}]`);
  }
}

let emb: LocalLLM;
before(async () => {
  emb = await LocalLLM.create({ model: MINILM, threads: 2, embeddings: true });
});
after(() => emb?.dispose());

test('all-MiniLM: an encoder, its embeddings equal the CLI and rank paraphrases closest', async () => {
  const info = emb.model.info;
  assert.equal(info.architecture, 'bert');
  assert.equal(info.isEncoder, true);
  assert.equal(info.poolingType, 'mean');
  assert.equal(info.canRerank, false);
  assert.equal(info.embeddingLength, 384);
  const res = await emb.embeddings.create({ input: TEXTS });
  const want = cliVectors(['-m', MINILM, '-p', TEXTS.join('\n')]);
  res.data.forEach((d, i) => assertSameVector(d.embedding as number[], want[i], TEXTS[i]));
  const vectors = res.data.map((d) => d.embedding as number[]);
  for (let i = 0; i < vectors.length; i++) {
    const near = cosine(vectors[i], vectors[i ^ 1]);
    for (let j = 0; j < vectors.length; j++) {
      if (j >> 1 !== i >> 1) {
        assert.ok(near > cosine(vectors[i], vectors[j]) + 0.1, `${TEXTS[i]} vs ${TEXTS[j]}`);
      }
    }
  }
  // One text alone gives the same vector as in the batch.
  assertSameVector(await emb.context.embed(TEXTS[2]), want[2], 'alone');
});

test('pooling and normalisation options equal the CLI flags of the same names', async () => {
  const model = emb.model;
  const cls = model.createEmbeddingContext({ threads: 2, poolingType: 'cls', normalize: -1 });
  try {
    const got = await cls.embedBatch(TEXTS.slice(0, 2));
    const want = cliVectors([
      '-m',
      MINILM,
      '--pooling',
      'cls',
      '--embd-normalize',
      '-1',
      '-p',
      TEXTS.slice(0, 2).join('\n'),
    ]);
    got.forEach((v, i) => assertSameVector(v, want[i], `cls ${i}`));
    assert.ok(Math.hypot(...got[0]) > 1.5, 'unnormalised');
  } finally {
    cls.dispose();
  }
});

test('AI SDK embedMany through ai.embeddingModel() gives the embeddings API vectors', async () => {
  const model: EmbeddingModelV3 = emb.embeddingModel();
  const many = await embedMany({ model, values: TEXTS });
  const direct = await emb.embeddings.create({ input: TEXTS });
  assert.deepEqual(
    many.embeddings,
    direct.data.map((d) => d.embedding),
  );
});

test('an encoder cannot generate, and a model without a classification head cannot rerank', async () => {
  await assert.rejects(emb.context.generate('Hello', { maxTokens: 4 }), (e: Error) =>
    /embedding model|encoder/.test(e.message),
  );
  await assert.rejects(emb.rerank('query', ['a document']), code(LocalLLMErrorCode.INVALID_OPTION));
});

// A cross-encoder (bert-rank) and a Qwen3-Reranker (a decoder: its rerank template, the yes
// probability of its yes/no head on the last token) rank alike through the same API.
for (const [what, script, kind] of [
  ['a cross-encoder reranker', 'make_encoder.py', 'bert-rank'],
  ['a Qwen3-Reranker', 'make_model.py', 'qwen3-rerank'],
] as const) {
  test(`${what}: rerank and the AI SDK rerank give the CLI scores, best first`, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'local-llm-rerank-'));
    const path = join(dir, `${kind}.gguf`);
    execFileSync(python, [join(root, 'tools/synth', script), kind, path]);
    const query = 'what is the sea?';
    const documents = ['The sea was calm this morning.', 'A fisherman counted his nets.', 'Tell me a story.'];
    const pairs = documents.map((d) => `${query}\t${d}`).join('\n');
    const want = cliVectors(['-m', path, '--pooling', 'rank', '--embd-normalize', '-1', '-p', pairs]).map((v) => v[0]);
    const ranker = await LocalLLM.create({ model: path, threads: 2, embeddings: true });
    try {
      assert.equal(ranker.model.info.canRerank, true);
      assert.equal(ranker.model.info.poolingType, 'rank');
      const ranked = await ranker.rerank(query, documents);
      assert.equal(ranked.length, 3);
      for (const r of ranked) {
        assert.equal(Math.fround(r.score), Math.fround(want[r.index]));
        assert.equal(r.document, documents[r.index]);
      }
      const order = [0, 1, 2].sort((a, b) => want[b] - want[a]);
      assert.deepEqual(
        ranked.map((r) => r.index),
        order,
      );
      assert.deepEqual(await ranker.rerank(query, documents, { topN: 2 }), ranked.slice(0, 2));
      const model: RerankingModelV3 = ranker.rerankingModel();
      const sdk = await rerank({ model, query, documents, topN: 2 });
      assert.deepEqual(
        sdk.ranking.map((r) => [r.originalIndex, Math.fround(r.score)]),
        ranked.slice(0, 2).map((r) => [r.index, Math.fround(r.score)]),
      );
      await assert.rejects(
        ranker.rerank(query, documents, { signal: AbortSignal.abort() }),
        (e: Error) => e.name === 'AbortError',
      );
    } finally {
      ranker.dispose();
    }
  });
}
