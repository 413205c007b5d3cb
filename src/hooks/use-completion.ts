// useCompletion: one streamed answer to one prompt, as React state.
import { useCallback, useRef, useState } from 'react';
import { LocalLLMError, LocalLLMErrorCode } from '../api/errors';
import type { LocalLLM } from '../api/local-llm';
import type { ChatMessage, GenerateOptions, GenerationResult, InferenceMetrics } from '../api/types';
import { type GenerationState, lastTiming, useGeneration } from './generation';
import type { ChatRequestOptions } from './use-chat';

/** Options of {@link useCompletion}. */
export interface UseCompletionOptions {
  /** A system message before the prompt (chat mode). */
  system?: string;
  /** Options of every chat request (`max_tokens`, `temperature`, ...); read at each `complete`. */
  request?: ChatRequestOptions;
  /**
   * Raw mode: continue the prompt text as it is, without the chat template, with these
   * generation options (`maxTokens`, `temperature`, `stop`, ...), through
   * `ai.context.streamPieces`. `system` and `request` are then not used.
   */
  raw?: Omit<GenerateOptions, 'signal'>;
  /** Called when the answer ended: whole, or cut short by `stop()` (`stopped` true). */
  onFinish?: (prompt: string, completion: string, info: { timing: InferenceMetrics | null; stopped: boolean }) => void;
  /** Called when a request failed (the error is also in `error`). */
  onError?: (error: Error) => void;
}

/** What {@link useCompletion} returns. */
export interface UseCompletionResult extends GenerationState {
  /** The answer; it grows while it streams, and a stopped answer keeps its text. */
  completion: string;
  /** A text field's value for the prompt (optional: `complete(prompt)` takes any text). */
  input: string;
  /** Set {@link input}. */
  setInput: (text: string) => void;
  /**
   * Answer `prompt` (default: {@link input}), streaming into {@link completion}. A running
   * answer is stopped first. Resolves to the answer (partial when stopped), or null when the
   * request failed (see {@link error}) or was replaced by a newer one; never rejects.
   */
  complete: (prompt?: string) => Promise<string | null>;
  /** Stop, and clear the answer, the error, the timings and the input. */
  reset: () => void;
}

/**
 * A single-turn answer on `ai` (null while the model loads: `complete` then sets a
 * NOT_INITIALIZED error): by default a chat of one user message (after `system`, if given),
 * or with `raw` the plain continuation of the prompt text. `stop()` and unmounting abort it.
 * ```tsx
 * const { completion, complete, stop, isStreaming, error } = useCompletion(ai, { request: { max_tokens: 128 } });
 * ```
 */
export function useCompletion(ai: LocalLLM | null, options: UseCompletionOptions = {}): UseCompletionResult {
  const [completion, setCompletion] = useState('');
  const [input, setInput] = useState('');
  const generation = useGeneration();
  const { run, clear } = generation;
  const latest = useRef({ ai, options, input });
  latest.current = { ai, options, input };

  const complete = useCallback(
    async (prompt?: string): Promise<string | null> => {
      const { ai: model, options: o, input: typed } = latest.current;
      const text = prompt ?? typed;
      setCompletion('');
      let answer = '';
      const outcome = await run(
        async ({ signal, live, streaming }) => {
          if (model === null) {
            throw new LocalLLMError(LocalLLMErrorCode.NOT_INITIALIZED, 'useCompletion: the LocalLLM instance is null');
          }
          const add = (piece: string | undefined) => {
            if (piece !== undefined && piece !== '' && live()) {
              answer += piece;
              streaming();
              setCompletion(answer);
            }
          };
          if (o.raw !== undefined) {
            let result: GenerationResult | null = null;
            const pieces = model.context.streamPieces(text, { ...o.raw, signal }, (r) => {
              result = r;
            });
            for await (const piece of pieces) {
              add(piece);
            }
            return (result as GenerationResult | null)?.timing ?? null;
          }
          const messages: ChatMessage[] = [
            ...(o.system !== undefined ? [{ role: 'system', content: o.system }] : []),
            { role: 'user', content: text },
          ];
          const stream = await model.chat.completions.create({ ...o.request, messages, stream: true, signal });
          let timing: InferenceMetrics | null = null;
          for await (const chunk of stream) {
            add(chunk.choices[0]?.delta.content);
            timing = chunk._timing ?? timing;
          }
          return timing;
        },
        () => (model === null ? null : lastTiming(model)),
      );
      if (outcome.kind === 'done' || outcome.kind === 'stopped') {
        o.onFinish?.(text, answer, { timing: outcome.timing, stopped: outcome.kind === 'stopped' });
        return answer;
      }
      if (outcome.kind === 'error') {
        o.onError?.(outcome.error);
      }
      return null;
    },
    [run],
  );

  const reset = useCallback(() => {
    clear();
    setCompletion('');
    setInput('');
  }, [clear]);

  return {
    completion,
    input,
    setInput,
    complete,
    reset,
    ...generation.state,
  };
}
