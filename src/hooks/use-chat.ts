// useChat: a streaming multi-turn chat on a LocalLLM instance, as React state.
import { useCallback, useRef, useState } from 'react';
import { LocalLLMError, LocalLLMErrorCode } from '../api/errors';
import type { LocalLLM } from '../api/local-llm';
import type { ChatCompletionRequest } from '../api/chat-types';
import type { ChatMessage, InferenceMetrics } from '../api/types';
import { type GenerationState, lastTiming, useGeneration } from './generation';

/**
 * The options of a chat request that a hook passes on to `ai.chat.completions.create`
 * (`max_tokens`, `temperature`, `stop`, ...): everything but the messages, the stream switches
 * and the signal, which the hook sets.
 */
export type ChatRequestOptions = Omit<ChatCompletionRequest, 'messages' | 'stream' | 'stream_options' | 'signal'>;

/** Options of {@link useChat}. */
export interface UseChatOptions {
  /** The messages the chat starts with (e.g. a system prompt); `reset()` returns to them. */
  initialMessages?: ChatMessage[];
  /** Options of every request (`max_tokens`, `temperature`, ...); read at each `send`. */
  request?: ChatRequestOptions;
  /** Called when a reply ended: whole, or cut short by `stop()` (`stopped` true). */
  onFinish?: (message: ChatMessage, info: { timing: InferenceMetrics | null; stopped: boolean }) => void;
  /** Called when a request failed (the error is also in `error`). */
  onError?: (error: Error) => void;
}

/** What {@link useChat} returns. */
export interface UseChatResult extends GenerationState {
  /** The conversation: the initial messages, then user and assistant turns; the last assistant message grows while it streams. */
  messages: ChatMessage[];
  /** Replace the conversation (e.g. to edit it); stop a running reply first. */
  setMessages: (messages: ChatMessage[]) => void;
  /** A text field's value for the next message (optional: `send(text)` takes any text). */
  input: string;
  /** Set {@link input} (a `TextInput`'s `onChangeText`). */
  setInput: (text: string) => void;
  /**
   * Append `text` (default: {@link input}, which is then cleared) as a user message and stream
   * the assistant's reply into {@link messages}. Empty text is ignored. A reply still streaming
   * is stopped first. Resolves when the reply ended; never rejects (errors go to {@link error}).
   */
  send: (text?: string) => Promise<void>;
  /** Stop, and go back to the initial messages with no error, timings or input. */
  reset: () => void;
}

/**
 * A streaming chat on `ai` (null while the model loads: `send` then sets a NOT_INITIALIZED
 * error). Each `send` streams `ai.chat.completions.create({ messages, stream: true, ...request })`
 * into state chunk by chunk; `stop()` aborts it with an AbortSignal, as does unmounting.
 * ```tsx
 * const { messages, input, setInput, send, stop, isStreaming, error } = useChat(ai, { request: { max_tokens: 256 } });
 * ```
 */
export function useChat(ai: LocalLLM | null, options: UseChatOptions = {}): UseChatResult {
  const [initial] = useState<ChatMessage[]>(() => options.initialMessages ?? []);
  const [messages, setMessagesState] = useState<ChatMessage[]>(initial);
  const [input, setInput] = useState('');
  const generation = useGeneration();
  const { run, clear } = generation;
  // The latest values for callbacks of a stable identity.
  const latest = useRef({ ai, options, input });
  latest.current = { ai, options, input };
  const history = useRef(messages);

  const setMessages = useCallback((next: ChatMessage[]) => {
    history.current = next;
    setMessagesState(next);
  }, []);

  const send = useCallback(
    async (text?: string) => {
      const { ai: model, options: o, input: typed } = latest.current;
      const content = text ?? typed;
      if (content.trim() === '') {
        return;
      }
      if (text === undefined) {
        setInput('');
      }
      const asked: ChatMessage[] = [...history.current, { role: 'user', content }];
      setMessages(asked);
      let reply = '';
      const outcome = await run(
        async ({ signal, live, streaming }) => {
          if (model === null) {
            throw new LocalLLMError(LocalLLMErrorCode.NOT_INITIALIZED, 'useChat: the LocalLLM instance is null');
          }
          const stream = await model.chat.completions.create({
            ...o.request,
            messages: asked,
            stream: true,
            signal,
          });
          let timing: InferenceMetrics | null = null;
          for await (const chunk of stream) {
            const piece = chunk.choices[0]?.delta.content;
            if (piece !== undefined && piece !== '' && live()) {
              reply += piece;
              streaming();
              setMessages([...asked, { role: 'assistant', content: reply }]);
            }
            timing = chunk._timing ?? timing;
          }
          return timing;
        },
        () => (model === null ? null : lastTiming(model)),
      );
      const message: ChatMessage = { role: 'assistant', content: reply };
      if (outcome.kind === 'done' || outcome.kind === 'stopped') {
        if (outcome.kind === 'done' && reply === '') {
          setMessages([...asked, message]); // an empty answer is an answer
        }
        o.onFinish?.(message, { timing: outcome.timing, stopped: outcome.kind === 'stopped' });
      } else if (outcome.kind === 'error') {
        o.onError?.(outcome.error);
      }
    },
    [run, setMessages],
  );

  const reset = useCallback(() => {
    clear();
    setMessages(initial);
    setInput('');
  }, [clear, initial, setMessages]);

  return {
    messages,
    setMessages,
    input,
    setInput,
    send,
    reset,
    ...generation.state,
  };
}
