// Tool calling and log-probabilities through the package's TypeScript API on the real engine
// (run by scripts/checks/js-test.sh, which sets LOCAL_LLM_MODEL to SmolLM2, whose template has no tool
// support, so tools go through the documented fallback). A second model is SmolLM2's file with
// a Qwen-style tool-aware template (written by gguf-py's gguf_new_metadata).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as native from './generated/napi/local_llm_ffi.ts';
import {
  setBindings,
  ChatCompletions,
  LocalLLM,
  LocalLLMError,
  LocalLLMErrorCode,
  type ChatCompletionTool,
  type ChatMessage,
  type GenerationResult,
} from '../src/api/index.ts';
import { code } from './helpers.mts';

native.default.initialize();
setBindings(native as any);

const MODEL = process.env.LOCAL_LLM_MODEL ?? '';
assert.ok(MODEL, 'LOCAL_LLM_MODEL must be set (run scripts/checks/js-test.sh)');

const TOOLS: ChatCompletionTool[] = [
  {
    type: 'function',
    function: {
      name: 'get_weather',
      description: 'Current weather in a city',
      parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
    },
  },
];
const QUESTION: ChatMessage[] = [{ role: 'user', content: 'What is the weather in Paris?' }];
const ROUND_TRIP = (result: string): ChatMessage[] => [
  ...QUESTION,
  {
    role: 'assistant',
    content: null,
    tool_calls: [{ id: 'call_0', type: 'function', function: { name: 'get_weather', arguments: '{"city": "Paris"}' } }],
  },
  { role: 'tool', tool_call_id: 'call_0', content: result },
];

// A Qwen-style template: tools listed in the system turn, calls as <tool_call> JSON, results
// in <tool_response> inside a user turn.
const QWEN_STYLE = [
  "{%- if tools %}{{- '<|im_start|>system\\nTools:' }}{%- for tool in tools %}{{- '\\n' + (tool.function | tojson) }}{%- endfor %}{{- '<|im_end|>\\n' }}{%- endif %}",
  '{%- for message in messages %}',
  "{%- if message.role == 'tool' %}{{- '<|im_start|>user\\n<tool_response>\\n' + message.content + '\\n</tool_response><|im_end|>\\n' }}",
  "{%- elif message.tool_calls %}{{- '<|im_start|>assistant' }}{%- for tc in message.tool_calls %}{{- '\\n<tool_call>\\n{\"name\": \"' + tc.function.name + '\", \"arguments\": ' + (tc.function.arguments | tojson) + '}\\n</tool_call>' }}{%- endfor %}{{- '<|im_end|>\\n' }}",
  "{%- else %}{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}{%- endif %}",
  '{%- endfor %}',
  "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}",
].join('');

let ai: LocalLLM;
let tmp: string;

before(async () => {
  tmp = mkdtempSync(join(tmpdir(), 'local-llm-tools-'));
  ai = await LocalLLM.create({ model: MODEL, contextSize: 1024, threads: 2 });
});

after(() => {
  ai?.dispose();
  rmSync(tmp, { recursive: true, force: true });
});

const ONE = { temperature: 0, max_tokens: 1 } as const;

test('fallback (SmolLM2): tools lengthen the prompt, tool_choice none does not, round trips render the tool result', async () => {
  const base = await ai.chat.completions.create({ messages: QUESTION, ...ONE });
  const withTools = await ai.chat.completions.create({ messages: QUESTION, tools: TOOLS, ...ONE });
  const none = await ai.chat.completions.create({ messages: QUESTION, tools: TOOLS, tool_choice: 'none', ...ONE });
  assert.ok(withTools.usage.prompt_tokens > base.usage.prompt_tokens + 40);
  assert.equal(none.usage.prompt_tokens, base.usage.prompt_tokens);
  const short = await ai.chat.completions.create({ messages: ROUND_TRIP('21'), tools: TOOLS, ...ONE });
  const long = await ai.chat.completions.create({ messages: ROUND_TRIP('21 degrees and sunny'), tools: TOOLS, ...ONE });
  const extra = ai.model.tokenize(' degrees and sunny', { addSpecial: false, parseSpecial: false }).length;
  assert.equal(long.usage.prompt_tokens - short.usage.prompt_tokens, extra);
});

test('tool-aware template: the prompt is the template rendering of tools, call and result', async () => {
  const path = join(tmp, 'qwen-style.gguf');
  const templateFile = join(tmp, 'template.jinja');
  writeFileSync(templateFile, QWEN_STYLE);
  execFileSync(
    'python3',
    ['-m', 'gguf.scripts.gguf_new_metadata', MODEL, path, '--chat-template-file', templateFile, '--force'],
    {
      stdio: 'ignore',
    },
  );
  const ai2 = await LocalLLM.create({ model: path, contextSize: 1024, threads: 2 });
  try {
    const res = await ai2.chat.completions.create({
      messages: ROUND_TRIP('{"temperature": 21}'),
      tools: TOOLS,
      ...ONE,
    });
    // The expected prompt, written out by hand from the template above.
    const expected =
      '<|im_start|>system\nTools:\n{"name": "get_weather", "description": "Current weather in a city", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}<|im_end|>\n' +
      '<|im_start|>user\nWhat is the weather in Paris?<|im_end|>\n' +
      '<|im_start|>assistant\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call><|im_end|>\n' +
      '<|im_start|>user\n<tool_response>\n{"temperature": 21}\n</tool_response><|im_end|>\n' +
      '<|im_start|>assistant\n';
    assert.equal(
      res.usage.prompt_tokens,
      ai2.model.tokenize(expected, { addSpecial: true, parseSpecial: true }).length,
    );
  } finally {
    ai2.dispose();
  }
});

test('tool_choice required: decoding is constrained to a call, which comes back in OpenAI shape', async () => {
  const ids: string[] = [];
  for (const stream of [false, true, false]) {
    const params = {
      messages: QUESTION,
      tools: TOOLS,
      tool_choice: 'required' as const,
      temperature: 0,
      max_tokens: 48,
    };
    let call: { id?: string; type?: string; function?: { name?: string; arguments?: string } };
    if (stream) {
      const chunks = [];
      for await (const c of await ai.chat.completions.create({ ...params, stream: true })) chunks.push(c);
      const last = chunks[chunks.length - 1];
      assert.equal(last.choices[0].finish_reason, 'tool_calls');
      const calls = chunks.flatMap((c) => c.choices[0].delta.tool_calls ?? []);
      assert.equal(calls.length, 1);
      assert.equal(calls[0].index, 0);
      call = calls[0];
      const text = chunks.map((c) => c.choices[0].delta.content ?? '').join('');
      assert.ok(!text.includes('<tool_call>'), 'call markup never streams as content');
    } else {
      const res = await ai.chat.completions.create(params);
      const msg = res.choices[0].message;
      assert.equal(res.choices[0].finish_reason, 'tool_calls');
      assert.equal(msg.content, null);
      assert.equal(msg.tool_calls?.length, 1);
      call = msg.tool_calls![0];
    }
    assert.equal(call.type, 'function');
    assert.equal(call.function?.name, 'get_weather');
    // Ids are unique across responses (UIs key calls by them).
    assert.match(call.id ?? '', /^call_[0-9a-f]{24}$/);
    assert.ok(!ids.includes(call.id!), `repeated id ${call.id}`);
    ids.push(call.id!);
    // The arguments follow the tool's parameters schema (city: a string, required).
    const args = JSON.parse(call.function?.arguments ?? '');
    assert.deepEqual(Object.keys(args), ['city']);
    assert.equal(typeof args.city, 'string');
  }
  await assert.rejects(
    ai.chat.completions.create({
      messages: QUESTION,
      tools: TOOLS,
      tool_choice: { type: 'function', function: { name: 'nope' } },
      ...ONE,
    }),
    code(LocalLLMErrorCode.INVALID_OPTION),
  );
  await assert.rejects(
    ai.chat.completions.create({ messages: QUESTION, tools: [{ type: 'function' } as any], ...ONE }),
    code(LocalLLMErrorCode.INVALID_OPTION),
  );
});

test('logprobs: OpenAI shape, greedy top-1 is the token, bytes spell the content, stream agrees', async () => {
  // Pure greedy (no repeat penalty): then the chosen token is the most likely one.
  const params = {
    messages: QUESTION,
    temperature: 0,
    repeat_penalty: 1,
    max_tokens: 12,
    logprobs: true,
    top_logprobs: 3,
  };
  const res = await ai.chat.completions.create(params);
  const content = res.choices[0].logprobs?.content ?? [];
  assert.equal(content.length, res.usage.completion_tokens);
  for (const t of content) {
    assert.ok(t.logprob <= 0);
    assert.equal(t.top_logprobs.length, 3);
    assert.equal(t.top_logprobs[0].token, t.token);
    assert.equal(t.top_logprobs[0].logprob, t.logprob);
    assert.ok(t.top_logprobs[1].logprob <= t.top_logprobs[0].logprob);
  }
  const bytes = Buffer.from(content.flatMap((t) => t.bytes ?? []));
  assert.equal(bytes.toString('utf8'), res.choices[0].message.content);
  const streamed = [];
  for await (const c of await ai.chat.completions.create({ ...params, stream: true })) {
    streamed.push(...(c.choices[0].logprobs?.content ?? []));
  }
  assert.deepEqual(streamed, content);
  const plain = await ai.chat.completions.create({ messages: QUESTION, ...ONE });
  assert.equal(plain.choices[0].logprobs, null);
  const viaGenerate = await ai.context.generateResult(
    { messages: QUESTION },
    { temperature: 0, repeatPenalty: 1, maxTokens: 12, nProbs: 3 },
  );
  assert.deepEqual(viaGenerate.logprobs, content);
  await assert.rejects(
    ai.chat.completions.create({ ...params, top_logprobs: 21 }),
    code(LocalLLMErrorCode.INVALID_OPTION),
  );
  await assert.rejects(
    ai.chat.completions.create({ messages: QUESTION, top_logprobs: 2 }),
    code(LocalLLMErrorCode.INVALID_OPTION),
  );
});

test('a generation with tool calls maps to OpenAI messages and stream chunks', async () => {
  // A context whose generation called a tool after some text (the model cannot be made to).
  const call = {
    id: 'call_0',
    type: 'function' as const,
    function: { name: 'get_weather', arguments: '{"city":"Paris"}' },
  };
  const result = (text: string): GenerationResult => ({
    text,
    toolCalls: [call],
    tokens: [1, 2, 3],
    promptTokens: 10,
    completionTokens: 3,
    finishReason: 'tool_calls',
    openAiFinishReason: 'tool_calls',
    timing: {
      promptEvalMs: 1,
      generationMs: 1,
      promptTokens: 10,
      generatedTokens: 3,
      promptTokensPerSec: 1,
      generatedTokensPerSec: 1,
    },
  });
  const fake = {
    takeTurn: () => ({ ready: Promise.resolve(), done: () => {} }),
    generateResultInTurn: async () => result(''),
    async *streamParts(_p: unknown, _o: unknown, onResult: (r: GenerationResult) => void) {
      yield { text: 'Let me check.', logprobs: [] };
      onResult(result('Let me check.'));
    },
  };
  const chat = new ChatCompletions(() => fake as any, 'm');
  const res = await chat.create({ messages: QUESTION, tools: TOOLS });
  assert.deepEqual(res.choices[0].message, { role: 'assistant', content: null, refusal: null, tool_calls: [call] });
  assert.equal(res.choices[0].finish_reason, 'tool_calls');
  const chunks = [];
  for await (const c of await chat.create({ messages: QUESTION, tools: TOOLS, stream: true })) chunks.push(c);
  assert.deepEqual(
    chunks.map((c) => [c.choices[0].delta, c.choices[0].finish_reason]),
    [
      [{ role: 'assistant' }, null],
      [{ content: 'Let me check.' }, null],
      [{ tool_calls: [{ index: 0, ...call }] }, null],
      [{}, 'tool_calls'],
    ],
  );
});
