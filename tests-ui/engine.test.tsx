// The hooks and the example app's chat screen against the real engine: the N-API flavour of the
// generated bindings (tests/generated/napi, made by scripts/checks/js-test.sh napi) with the
// model of LOCAL_LLM_MODEL, rendered with @testing-library/react-native.
import * as native from '../tests/generated/napi/local_llm_ffi.ts';
import { configure, fireEvent, render, screen, waitFor } from '@testing-library/react-native';
import {
  LocalLLM,
  LocalLLMErrorCode,
  setBindings,
  type Bindings,
  type UseChatResult,
  type UseCompletionResult,
} from 'react-native-local-llm-rs';
import { ChatScreen } from '../example/src/screens/ChatScreen';
import { ChatBox, CompletionBox, shownText } from './components';

const MODEL = process.env.LOCAL_LLM_MODEL ?? '';
if (MODEL === '') {
  throw new Error('LOCAL_LLM_MODEL must be set to a GGUF model (run scripts/checks/js-test.sh napi)');
}

native.default.initialize();
setBindings(native as unknown as Bindings);
configure({ asyncUtilTimeout: 30000 });

const load = () => LocalLLM.create({ model: MODEL, contextSize: 1024, threads: 2 });
/** Greedy, with the end-of-generation token banned: a reply that streams for long. */
const LONG = { max_tokens: 400, ignore_eos: true, temperature: 0 };
const STORY = 'Tell me a long story about a dragon.';

let ai: LocalLLM;

beforeAll(async () => {
  ai = await load();
});

afterAll(() => {
  ai?.dispose();
});

const press = (name: string) => fireEvent.press(screen.getByRole('button', { name }));
const status = () => shownText(screen.getByTestId('status'));
const shown = (testID: string) => shownText(screen.getByTestId(testID));

describe('useChat on the real engine', () => {
  test('send streams the reply into messages, then it is whole', async () => {
    const states: UseChatResult[] = [];
    const request = { max_tokens: 32, temperature: 0 };
    render(<ChatBox ai={ai} request={request} onRender={(s) => states.push(s)} />);
    fireEvent.changeText(screen.getByTestId('input'), 'Name three colours.');
    press('Send');
    expect(screen.getByTestId('input')).toHaveDisplayValue('');
    expect(screen.getByTestId('message-0')).toHaveTextContent('user: Name three colours.');
    expect(status()).toBe('submitted');
    await waitFor(() => expect(status()).toBe('ready'));

    const last = states[states.length - 1];
    const reply = last.messages[1]?.content as string;
    expect(reply.trim()).not.toBe('');
    expect(shown('message-1')).toBe(`assistant: ${reply}`);
    expect(last.isStreaming).toBe(false);
    expect(last.error).toBeNull();
    expect(last.timing?.generatedTokens).toBeGreaterThan(0);
    expect(screen.getByTestId('timing')).toHaveTextContent(`${last.timing?.generatedTokens} tokens`);
    // Shown piece by piece: streaming renders with a growing prefix of the reply.
    const partial = states.filter((s) => s.status === 'streaming').map((s) => s.messages[1]?.content as string);
    expect(partial.length).toBeGreaterThan(2);
    expect(partial.every((p) => reply.startsWith(p) && p.length > 0)).toBe(true);
    expect(partial[0].length).toBeLessThan(reply.length);
    // The same text as a whole (greedy) completion.
    const whole = await ai.chat.completions.create({ messages: last.messages.slice(0, 1), ...request });
    expect(whole.choices[0].message.content).toBe(reply);
  });

  test('stop keeps the partial reply, with no error, and frees the engine', async () => {
    const states: UseChatResult[] = [];
    const view = render(<ChatBox ai={ai} request={LONG} onRender={(s) => states.push(s)} />);
    fireEvent.changeText(screen.getByTestId('input'), STORY);
    press('Send');
    await waitFor(() => expect(shown('message-1').length).toBeGreaterThan('assistant: '.length + 40));
    expect(status()).toBe('streaming');
    const before = shown('message-1');
    press('Stop');
    await waitFor(() => expect(status()).toBe('ready'));

    const last = states[states.length - 1];
    const kept = last.messages[1]?.content as string;
    expect(`assistant: ${kept}`.startsWith(before)).toBe(true);
    expect(shown('message-1')).toBe(`assistant: ${kept}`);
    expect(last.isStreaming).toBe(false);
    expect(last.error).toBeNull();
    expect(screen.queryByTestId('error')).toBeNull();
    const generated = last.timing?.generatedTokens ?? 0;
    expect(generated).toBeGreaterThan(0);
    expect(generated).toBeLessThan(LONG.max_tokens);
    // It stays as it is, and the next message (with the options of the new render) gets an answer.
    await new Promise((r) => setTimeout(r, 300));
    expect(shown('message-1')).toBe(`assistant: ${kept}`);
    view.rerender(<ChatBox ai={ai} request={{ max_tokens: 8 }} onRender={(s) => states.push(s)} />);
    fireEvent.changeText(screen.getByTestId('input'), 'Thanks!');
    press('Send');
    await waitFor(() => expect(status()).toBe('ready'));
    expect(shown('message-2')).toBe('user: Thanks!');
    expect(shown('message-3')).toMatch(/^assistant: ./);
    expect(states[states.length - 1].timing?.generatedTokens).toBeLessThanOrEqual(8);
  });

  test('an invalid option is an error with its code; the user message stays', async () => {
    render(<ChatBox ai={ai} request={{ max_tokens: -1 }} />);
    fireEvent.changeText(screen.getByTestId('input'), 'Hello');
    press('Send');
    await waitFor(() => expect(status()).toBe('error'));
    expect(screen.getByTestId('error')).toHaveTextContent(/^INVALID_OPTION: max_tokens/);
    expect(shown('message-0')).toBe('user: Hello');
    expect(screen.queryByTestId('message-1')).toBeNull();
  });

  test('sending to a disposed instance, or to none, is NOT_INITIALIZED', async () => {
    const other = await load();
    const view = render(<ChatBox ai={other} />);
    other.dispose();
    fireEvent.changeText(screen.getByTestId('input'), 'Hello');
    press('Send');
    await waitFor(() => expect(status()).toBe('error'));
    expect(screen.getByTestId('error')).toHaveTextContent('NOT_INITIALIZED: LocalLLM has been disposed');
    view.rerender(<ChatBox ai={null} />);
    fireEvent.changeText(screen.getByTestId('input'), 'Again');
    press('Send');
    await waitFor(() => expect(screen.getByTestId('error')).toHaveTextContent(/^NOT_INITIALIZED: useChat/));
  });

  test('unmounting stops the reply', async () => {
    const view = render(<ChatBox ai={ai} request={LONG} />);
    fireEvent.changeText(screen.getByTestId('input'), STORY);
    press('Send');
    await waitFor(() => expect(shown('message-1').length).toBeGreaterThan('assistant: '.length + 10));
    const perf = ai.context.getPerf();
    view.unmount();
    // The generation ends soon after, long before its max_tokens (it is not read to the end).
    await waitFor(() => expect(ai.context.getPerf()).not.toBe(perf));
    expect(ai.context.getPerf()?.generatedTokens).toBeLessThan(LONG.max_tokens);
    const next = await ai.chat.completions.create({ messages: [{ role: 'user', content: 'Hi' }], max_tokens: 4 });
    expect(next.usage.completion_tokens).toBeGreaterThan(0);
  });
});

describe('useCompletion on the real engine', () => {
  test('complete streams a chat answer; it equals the whole completion', async () => {
    const states: UseCompletionResult[] = [];
    const request = { max_tokens: 24, temperature: 0 };
    render(<CompletionBox ai={ai} options={{ request }} onRender={(s) => states.push(s)} />);
    fireEvent.changeText(screen.getByTestId('prompt'), 'What is the capital of France?');
    press('Ask');
    await waitFor(() => expect(status()).toBe('ready'));
    const answer = shown('completion');
    expect(answer.trim()).not.toBe('');
    const partial = states.filter((s) => s.status === 'streaming').map((s) => s.completion);
    expect(partial.length).toBeGreaterThan(2);
    expect(partial.every((p) => answer.startsWith(p))).toBe(true);
    expect(partial[0].length).toBeLessThan(answer.length);
    const whole = await ai.chat.completions.create({
      messages: [{ role: 'user', content: 'What is the capital of France?' }],
      ...request,
    });
    expect(whole.choices[0].message.content).toBe(answer);
  });

  test('raw mode continues the prompt text as context.generate does', async () => {
    const raw = { maxTokens: 16, temperature: 0 };
    render(<CompletionBox ai={ai} options={{ raw }} />);
    fireEvent.changeText(screen.getByTestId('prompt'), 'The three primary colours are');
    press('Ask');
    await waitFor(() => expect(status()).toBe('ready'));
    expect(shown('completion')).toBe(await ai.context.generate('The three primary colours are', raw));
    expect(screen.getByTestId('timing')).toHaveTextContent('16 tokens');
  });

  test('stop keeps the partial answer; an invalid raw option is an error', async () => {
    const view = render(<CompletionBox ai={ai} options={{ request: LONG }} />);
    fireEvent.changeText(screen.getByTestId('prompt'), STORY);
    press('Ask');
    await waitFor(() => expect(shown('completion').length).toBeGreaterThan(40));
    const before = shown('completion');
    press('Stop');
    await waitFor(() => expect(status()).toBe('ready'));
    expect(shown('completion').startsWith(before)).toBe(true);
    expect(screen.queryByTestId('error')).toBeNull();
    expect(Number(shown('timing').split(' ')[0])).toBeLessThan(LONG.max_tokens);

    view.rerender(<CompletionBox ai={ai} options={{ raw: { maxTokens: -1 } }} />);
    press('Ask');
    await waitFor(() => expect(status()).toBe('error'));
    expect(screen.getByTestId('error')).toHaveTextContent(/^INVALID_OPTION: /);
    expect(shown('completion')).toBe('');
  });
});

describe("the example app's ChatScreen on the real engine", () => {
  let screenAi: LocalLLM;
  beforeAll(async () => {
    screenAi = await load();
  });
  afterAll(() => screenAi?.dispose());

  test('Send streams the reply, Stop keeps it with [stopped] and the timings', async () => {
    render(<ChatScreen ai={screenAi} />);
    fireEvent.changeText(screen.getByDisplayValue(''), STORY);
    press('Send');
    expect(screen.getByText(`user: ${STORY}`)).toBeOnTheScreen();
    // The streaming reply line, while Stop is enabled.
    const streaming = await screen.findByText(/^assistant: .{40}/s);
    expect(screen.getByRole('button', { name: 'Stop' })).toBeEnabled();
    expect(screen.getByRole('button', { name: 'Send' })).toBeDisabled();
    const before = shownText(streaming).slice('assistant: '.length);
    press('Stop');
    await waitFor(() => expect(screen.getByRole('button', { name: 'Stop' })).toBeDisabled());
    const kept = shownText(screen.getByText(/\[stopped\]$/s));
    expect(kept.startsWith(`assistant: ${before}`)).toBe(true);
    expect(screen.getByText(/^Generation: \d+ tokens/)).toBeOnTheScreen();
  });

  test('a short reply ends on its own; a disposed instance shows NOT_INITIALIZED', async () => {
    render(<ChatScreen ai={screenAi} />);
    fireEvent.changeText(screen.getByDisplayValue(''), 'Say hello.');
    press('Send');
    await waitFor(() => expect(screen.getByRole('button', { name: 'Stop' })).toBeDisabled());
    const reply = shownText(screen.getByText(/^assistant: /));
    expect(reply.length).toBeGreaterThan('assistant: '.length);
    expect(reply).not.toMatch(/\[stopped\]$/);
    expect(screen.getByText(/^Prompt: \d+ tokens/)).toBeOnTheScreen();

    screenAi.dispose();
    fireEvent.changeText(screen.getByDisplayValue(''), 'Hello again');
    press('Send');
    const error = await screen.findByText(/^NOT_INITIALIZED: /);
    expect(shownText(error)).toBe(`${LocalLLMErrorCode.NOT_INITIALIZED}: LocalLLM has been disposed`);
  });
});
