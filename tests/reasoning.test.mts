// Reasoning output from TypeScript (issue 31): a `<think>` block comes back apart as llama-server
// returns it (`message.reasoning_content`, streamed `delta.reasoning_content`; `reasoning` on
// results and stream parts), `reasoning_format: 'none'` keeps it inline, `chat_template_kwargs` /
// `enableThinking` reach the template, and a thinking budget closes the block. The model is a
// synthetic qwen3 (tools/synth/make_model.py) with a Qwen 3-style template; a grammar makes its
// random weights write a block. The engine side is in rust/engine/tests/reasoning.rs.
import { test, before, after } from 'node:test';
import { generateText, streamText } from 'ai';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as native from './generated/napi/local_llm_ffi.ts';
import { setBindings, LocalLLM, LocalLLMErrorCode } from '../src/api/index.ts';
import { code } from './helpers.mts';

native.default.initialize();
setBindings(native as any);

const root = join(import.meta.dirname, '..');
const venv = join(root, '.cache/venv/bin/python3');
const python = existsSync(venv) ? venv : 'python3';
const dir = mkdtempSync(join(tmpdir(), 'local-llm-reasoning-'));

// Qwen 3's generation prompt: an empty block when enable_thinking is false; `open_block` (this
// test's variable) leaves the block open, as DeepSeek-R1's template does.
const TEMPLATE =
  '{%- for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}' +
  '{%- if add_generation_prompt %}<|im_start|>assistant\n' +
  '{%- if enable_thinking is defined and enable_thinking is false %}<think>\n\n</think>\n\n' +
  '{%- elif open_block is defined and open_block %}<think>\n{%- endif %}{%- endif %}';
const GRAMMAR = 'root ::= "<think>\\n" [a-z] [a-z ]{3,29} "\\n</think>\\n\\n" [a-z] [a-z ]{0,19}';
const messages = [{ role: 'user' as const, content: 'What is 2+2?' }];

let ai: LocalLLM;

before(async () => {
  const template = join(dir, 'template.jinja');
  writeFileSync(template, TEMPLATE);
  const model = join(dir, 'qwen3.gguf');
  execFileSync(python, [join(root, 'tools/synth/make_model.py'), 'qwen3', model, '--chat-template', template]);
  ai = await LocalLLM.create({ model, contextSize: 256, threads: 2 });
});

after(() => {
  ai?.dispose();
});

const request = { messages, grammar: GRAMMAR, temperature: 0, max_tokens: 48 };

test('a think block comes back as reasoning_content, or inline with reasoning_format none', async () => {
  const inline = await ai.chat.completions.create({ ...request, reasoning_format: 'none' });
  const whole = inline.choices[0].message.content ?? '';
  const match = /^<think>\n([a-z][a-z ]+)\n<\/think>\n\n([a-z][a-z ]*)$/.exec(whole);
  assert.ok(match !== null, whole);
  assert.equal(inline.choices[0].message.reasoning_content, undefined);

  const split = await ai.chat.completions.create(request);
  assert.equal(split.choices[0].message.reasoning_content, match[1].trim());
  assert.equal(split.choices[0].message.content, match[2]);
  assert.equal(split.usage.completion_tokens, inline.usage.completion_tokens);

  const stream = await ai.chat.completions.create({ ...request, stream: true });
  let reasoning = '';
  let content = '';
  for await (const chunk of stream) {
    const delta = chunk.choices[0]?.delta ?? {};
    assert.ok(!(delta.reasoning_content !== undefined && delta.content !== undefined));
    reasoning += delta.reasoning_content ?? '';
    content += delta.content ?? '';
  }
  assert.equal(reasoning, split.choices[0].message.reasoning_content);
  assert.equal(content, match[2]);

  // The context API: off by default (local-llm-rn's text as is), on with reasoningFormat.
  const plain = await ai.context.generateResult({ messages }, { grammar: GRAMMAR, temperature: 0, maxTokens: 48 });
  assert.equal(plain.text, whole);
  assert.equal(plain.reasoning, undefined);
  const parts = [];
  for await (const part of ai.context.streamParts(
    { messages },
    { grammar: GRAMMAR, temperature: 0, maxTokens: 48, reasoningFormat: 'deepseek' },
  )) {
    parts.push(part);
  }
  assert.equal(parts.map((p) => p.reasoning ?? '').join(''), match[1].trim());
  assert.equal(parts.map((p) => p.text).join(''), match[2]);
});

test('chat_template_kwargs and enableThinking reach the template', async () => {
  const base = { messages, temperature: 0, max_tokens: 1 };
  const on = await ai.chat.completions.create(base);
  const off = await ai.chat.completions.create({ ...base, chat_template_kwargs: { enable_thinking: false } });
  // The empty block "<think>\n\n</think>\n\n" is in the prompt.
  assert.ok(
    off.usage.prompt_tokens > on.usage.prompt_tokens,
    `${off.usage.prompt_tokens} vs ${on.usage.prompt_tokens}`,
  );
  const viaOption = await ai.context.generateResult({ messages }, { maxTokens: 1, enableThinking: false });
  assert.equal(viaOption.promptTokens, off.usage.prompt_tokens);
});

test('a thinking budget closes a block the prompt opened', async () => {
  const result = await ai.context.generateResult(
    { messages },
    {
      temperature: 0,
      maxTokens: 40,
      chatTemplateKwargs: { open_block: true },
      reasoningFormat: 'auto',
      thinkingBudgetTokens: 5,
      thinkingBudgetMessage: ' Done.',
      ignoreEos: true,
    },
  );
  assert.ok(result.reasoning?.endsWith(' Done.'), String(result.reasoning));
  assert.ok(result.text.length > 0 && !result.text.includes('</think>'), result.text);
});

test('the AI SDK gets the block as reasoning (generateText, streamText)', async () => {
  const model = ai.languageModel();
  const providerOptions = { 'local-llm': { grammar: GRAMMAR } };
  const call = { model, prompt: 'What is 2+2?', temperature: 0, maxOutputTokens: 48, providerOptions };
  const inline = await ai.context.generateResult({ messages }, { grammar: GRAMMAR, temperature: 0, maxTokens: 48 });
  const match = /^<think>\n([a-z][a-z ]+)\n<\/think>\n\n([a-z][a-z ]*)$/.exec(inline.text);
  assert.ok(match !== null, inline.text);
  const res = await generateText(call);
  assert.equal(res.reasoningText, match[1].trim());
  assert.equal(res.text, match[2]);
  const stream = streamText(call);
  let reasoning = '';
  for await (const part of stream.fullStream) {
    if (part.type === 'reasoning-delta') {
      reasoning += part.text;
    }
  }
  assert.equal(reasoning, match[1].trim());
  assert.equal(await stream.text, match[2]);
  // Inline on request.
  const kept = await generateText({
    ...call,
    providerOptions: { 'local-llm': { grammar: GRAMMAR, reasoningFormat: 'none' } },
  });
  assert.equal(kept.text, inline.text);
});

test('bad reasoning options are INVALID_OPTION errors naming them', async () => {
  await assert.rejects(
    ai.chat.completions.create({ messages, reasoning_format: 'fancy' as any }),
    (e: any) => e.code === LocalLLMErrorCode.INVALID_OPTION && /reasoning_format/.test(e.message),
  );
  await assert.rejects(
    ai.context.generateResult({ messages }, { chatTemplateKwargs: [] as any }),
    code(LocalLLMErrorCode.INVALID_OPTION),
  );
  await assert.rejects(
    ai.context.generateResult({ messages }, { thinkingBudgetTokens: -1 }),
    code(LocalLLMErrorCode.INVALID_OPTION),
  );
});
