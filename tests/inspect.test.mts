// Model.inspect (issue 37): a GGUF file described from its header without loading it, on the
// real default model (run by scripts/checks/js-test.sh). What it reports must agree with the
// loaded model's own facts and memory estimate; bad paths and non-GGUF files are typed errors.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as native from './generated/napi/local_llm_ffi.ts';
import { setBindings, Model, LocalLLMError, LocalLLMErrorCode } from '../src/api/index.ts';
import { defaultModel } from './helpers.mts';

native.default.initialize();
setBindings(native as any);

function code(expected: LocalLLMErrorCode) {
  return (e: unknown) => {
    assert.ok(e instanceof LocalLLMError, `expected a LocalLLMError, got ${String(e)}`);
    assert.equal(e.code, expected, e.message);
    return true;
  };
}

test('inspect agrees with the loaded model', async () => {
  const path = defaultModel();
  const started = performance.now();
  const file = await Model.inspect(path, { contextSize: 512 });
  const inspectMs = performance.now() - started;
  const model = await Model.load(path);
  try {
    const info = model.info;
    assert.equal(file.architecture, info.architecture);
    assert.equal(file.name, info.name);
    assert.equal(file.supported, true);
    assert.equal(file.sizeBytes, info.sizeBytes);
    assert.equal(file.nParams, info.nParams);
    assert.equal(file.weightsBytes, info.weightsBytes);
    assert.equal(file.contextLength, info.contextLength);
    assert.equal(file.embeddingLength, info.embeddingLength);
    assert.equal(file.nLayer, info.nLayer);
    assert.equal(file.nHead, info.nHead);
    assert.equal(file.nHeadKv, info.nHeadKv);
    assert.equal(file.nVocab, info.nVocab);
    assert.equal(file.chatTemplate, info.chatTemplate);
    assert.equal(file.fileType, 'Q4_1');
    assert.equal(file.tokenizer, 'gpt2');
    assert.equal(file.metadata['general.architecture'], 'llama');
    assert.equal(
      file.tensorTypes.reduce((sum, t) => sum + t.bytes, 0),
      file.weightsBytes,
    );
    assert.ok(file.tensorTypes.some((t) => t.type === 'Q4_1' && t.count > 100));
    assert.deepEqual(file.memory, model.estimateMemory(512));
    const byDefault = await Model.inspect(path);
    assert.deepEqual(byDefault.memory, model.estimateMemory());
    console.log(`inspect: ${inspectMs.toFixed(1)} ms`);
  } finally {
    model.dispose();
  }
});

test('inspect refuses what is not a GGUF model file with a typed error', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'local-llm-inspect-'));
  const text = join(dir, 'notes.gguf');
  writeFileSync(text, 'GGUF but not really');
  await assert.rejects(Model.inspect(text), code(LocalLLMErrorCode.MODEL_LOAD_FAILED));
  await assert.rejects(Model.inspect(join(dir, 'missing.gguf')), code(LocalLLMErrorCode.INVALID_PATH));
  await assert.rejects(Model.inspect('https://example.com/m.gguf'), code(LocalLLMErrorCode.INVALID_PATH));
  await assert.rejects(Model.inspect(defaultModel(), { contextSize: -1 }), code(LocalLLMErrorCode.INVALID_OPTION));
});
