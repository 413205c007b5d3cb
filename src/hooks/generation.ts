// The state machine that useChat and useCompletion share: one request at a time, its status,
// error and timings, stop() through an AbortController, and an abort when the component unmounts.
import { useCallback, useEffect, useRef, useState } from 'react';
import { isAbortError } from '../api/errors';
import type { LocalLLM } from '../api/local-llm';
import type { InferenceMetrics } from '../api/types';

/**
 * Where a hook's request is (the Vercel AI SDK's names): `'submitted'` before the first piece of
 * text, `'streaming'` while pieces arrive, `'ready'` when it ended (or was stopped), `'error'`
 * when it failed.
 */
export type GenerationStatus = 'ready' | 'submitted' | 'streaming' | 'error';

/** What both hooks report about their current request, and how to stop it. */
export interface GenerationState {
  /** Stop the streaming answer: its text so far stays, `error` stays null. */
  stop: () => void;
  /** Where the current request is. */
  status: GenerationStatus;
  /** `status` is 'submitted' or 'streaming' (the Vercel AI SDK's `isLoading`). */
  isStreaming: boolean;
  /** The last request's error (a `LocalLLMError` with a `code` for the engine's errors), else null. */
  error: Error | null;
  /** The last answer's timings (`_timing` of its last chunk; for a stopped answer the context's last generation). */
  timing: InferenceMetrics | null;
}

/** What a request's work gets from {@link useGeneration}. */
export interface GenerationRun {
  /** Fires on `stop()`, on the next request and on unmount; pass it to the API call. */
  signal: AbortSignal;
  /** Whether this request may still update state (it is the latest and was not stopped). */
  live(): boolean;
  /** Mark the request as streaming (call at the first piece of text). */
  streaming(): void;
}

/** How a request ended: its timings, or why it has none. */
export type GenerationOutcome =
  | { kind: 'done'; timing: InferenceMetrics | null }
  | { kind: 'stopped'; timing: InferenceMetrics | null }
  | { kind: 'error'; error: Error }
  /** Replaced by a newer request, or the component unmounted: nothing was recorded. */
  | { kind: 'superseded' };

/** The timings of the context's last generation (a stopped stream's), `null` if unavailable. */
export function lastTiming(ai: LocalLLM): InferenceMetrics | null {
  try {
    return (ai as Partial<LocalLLM>).context?.getPerf?.() ?? null;
  } catch {
    return null; // disposed meanwhile
  }
}

/**
 * @internal The shared request state of the hooks: `run(work)` stops the running request,
 * clears the error and timings and runs `work`, whose result (or error) becomes the state.
 */
export function useGeneration() {
  const [status, setStatus] = useState<GenerationStatus>('ready');
  const [error, setError] = useState<Error | null>(null);
  const [timing, setTiming] = useState<InferenceMetrics | null>(null);
  const current = useRef<AbortController | null>(null);
  const mounted = useRef(false);

  useEffect(() => {
    mounted.current = true;
    return () => {
      mounted.current = false;
      current.current?.abort();
      current.current = null;
    };
  }, []);

  const stop = useCallback(() => {
    current.current?.abort();
  }, []);

  const run = useCallback(
    async (
      work: (run: GenerationRun) => Promise<InferenceMetrics | null>,
      onStopped: () => InferenceMetrics | null,
    ): Promise<GenerationOutcome> => {
      current.current?.abort();
      const controller = new AbortController();
      current.current = controller;
      const latest = () => mounted.current && current.current === controller;
      const live = () => latest() && !controller.signal.aborted;
      setError(null);
      setTiming(null);
      setStatus('submitted');
      try {
        const t = await work({
          signal: controller.signal,
          live,
          streaming: () => {
            if (live()) {
              setStatus('streaming');
            }
          },
        });
        if (!latest()) {
          return { kind: 'superseded' };
        }
        // (Stopped after the last piece, the answer is whole all the same: done.)
        setTiming(t);
        setStatus('ready');
        return { kind: 'done', timing: t };
      } catch (e) {
        if (!latest()) {
          return { kind: 'superseded' };
        }
        if (controller.signal.aborted || isAbortError(e)) {
          const t = onStopped();
          setTiming(t);
          setStatus('ready');
          return { kind: 'stopped', timing: t };
        }
        const err = e instanceof Error ? e : new Error(String(e));
        setError(err);
        setStatus('error');
        return { kind: 'error', error: err };
      } finally {
        if (current.current === controller) {
          current.current = null;
        }
      }
    },
    [],
  );

  /** Stop the running request and clear the status, error and timings. */
  const clear = useCallback(() => {
    current.current?.abort();
    current.current = null;
    setError(null);
    setTiming(null);
    setStatus('ready');
  }, []);

  const state: GenerationState = {
    stop,
    status,
    isStreaming: status === 'submitted' || status === 'streaming',
    error,
    timing,
  };
  return { state, run, clear };
}
