// The canned chat of the Jest mock (see mock.js): a deterministic reply, whole or streamed word
// by word, cut to max_tokens words, abortable; and deterministic embeddings.
'use strict';

const { abortError, invalidOption } = require('./mock-errors');

const DEFAULTS = { reply: (text) => `You said: ${text}`, delayMs: 0 };
let settings = { ...DEFAULTS };

/**
 * Set how the mock answers: `reply(lastUserText, messages)` makes the reply text, `delayMs`
 * waits between streamed words (default 0: a microtask). No argument restores the defaults.
 */
function configureMock(options) {
  settings = { ...DEFAULTS, ...(options || {}) };
}

const textOf = (content) =>
  typeof content === 'string'
    ? content
    : Array.isArray(content)
      ? content.map((p) => (p && typeof p.text === 'string' ? p.text : '')).join('')
      : '';
const words = (text) => text.match(/\s*\S+/g) || [];

/** Wait `delayMs` (or a microtask), rejecting with an AbortError when `signal` fires first. */
function pause(signal) {
  if (signal && signal.aborted) {
    return Promise.reject(abortError());
  }
  if (!(settings.delayMs > 0)) {
    return Promise.resolve();
  }
  return new Promise((resolve, reject) => {
    const onAbort = () => {
      clearTimeout(timer);
      reject(abortError());
    };
    const timer = setTimeout(() => {
      if (signal) signal.removeEventListener('abort', onAbort);
      resolve();
    }, settings.delayMs);
    if (signal) signal.addEventListener('abort', onAbort, { once: true });
  });
}

/** The reply to a request: its words (cut to max_tokens), finish reason, usage and timings. */
function answer(params) {
  if (params === null || typeof params !== 'object') {
    throw invalidOption('request', params, 'a chat completion request object');
  }
  const { messages } = params;
  if (!Array.isArray(messages) || messages.length === 0) {
    throw invalidOption('messages', messages, 'a non-empty array of messages');
  }
  const max = params.max_completion_tokens ?? params.max_tokens ?? 256;
  if (!Number.isInteger(max) || max < 0) {
    throw invalidOption('max_tokens', max, 'an integer >= 0');
  }
  const lastUser = [...messages].reverse().find((m) => m && m.role === 'user');
  const all = words(String(settings.reply(textOf(lastUser && lastUser.content), messages)));
  const pieces = all.slice(0, max);
  const promptTokens = messages.reduce((n, m) => n + words(textOf(m && m.content)).length, 0);
  return {
    pieces,
    finish: pieces.length < all.length ? 'length' : 'stop',
    usage: {
      prompt_tokens: promptTokens,
      completion_tokens: pieces.length,
      total_tokens: promptTokens + pieces.length,
    },
    timing: {
      promptEvalMs: promptTokens,
      generationMs: pieces.length,
      promptTokens,
      generatedTokens: pieces.length,
      promptTokensPerSec: 1000,
      generatedTokensPerSec: 1000,
    },
  };
}

let ids = 0;

/** `ai.chat.completions` of a mock instance. */
function completions(instance, model) {
  const chunk = (id, delta, finish, name) => ({
    id,
    object: 'chat.completion.chunk',
    created: Math.floor(Date.now() / 1000),
    model: name,
    choices: [{ index: 0, delta, finish_reason: finish }],
  });
  async function* stream(params, a, id) {
    const { signal } = params;
    const name = params.model ?? model;
    await pause(signal);
    yield chunk(id, { role: 'assistant' }, null, name);
    let generated = 0;
    for (const piece of a.pieces) {
      await pause(signal);
      generated += 1;
      instance.lastTiming = { ...a.timing, generatedTokens: generated, generationMs: generated };
      yield chunk(id, { content: piece }, null, name);
    }
    await pause(signal);
    instance.lastTiming = a.timing;
    yield { ...chunk(id, {}, a.finish, name), usage: a.usage, _timing: a.timing };
    if (params.stream_options && params.stream_options.include_usage) {
      yield { ...chunk(id, {}, null, name), choices: [], usage: a.usage };
    }
  }
  return {
    async create(params) {
      const a = answer(params);
      if (params.signal && params.signal.aborted) {
        throw abortError();
      }
      const id = `chatcmpl-mock-${++ids}`;
      if (params.stream) {
        return stream(params, a, id);
      }
      await pause(params.signal);
      instance.lastTiming = a.timing;
      const content = a.pieces.join('');
      return {
        id,
        object: 'chat.completion',
        created: Math.floor(Date.now() / 1000),
        model: params.model ?? model,
        choices: [
          { index: 0, message: { role: 'assistant', content, refusal: null }, finish_reason: a.finish, logprobs: null },
        ],
        usage: a.usage,
        _timing: a.timing,
      };
    },
  };
}

/** A deterministic unit vector of 8 numbers for `text`. */
function embed(text) {
  const v = Array.from({ length: 8 }, (_, i) => {
    let h = i + 1;
    for (const c of text) h = (h * 31 + c.charCodeAt(0)) % 1000003;
    return (h % 2001) / 1000 - 1;
  });
  const norm = Math.hypot(...v) || 1;
  return v.map((x) => x / norm);
}

module.exports = { completions, configureMock, embed, words };
