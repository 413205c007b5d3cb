// The Jest mock (react-native-local-llm-rs/jest/mock) as an app's test uses it: the example app's
// ChatScreen and the hooks rendered on the mock, and the mock's API checked against the real one.
import { fireEvent, render, screen, waitFor } from '@testing-library/react-native';
import {
  LocalLLM,
  LocalLLMError,
  LocalLLMErrorCode,
  ModelManager,
  canRunModel,
  getDeviceCapabilities,
  recommendQuantization,
  type ChatCompletionChunk,
  type UseChatResult,
} from 'react-native-local-llm-rs';
import { configureMock } from 'react-native-local-llm-rs/jest/mock';
import * as realErrors from '../src/api/errors';
import { ChatScreen } from '../example/src/screens/ChatScreen';
import { ChatBox, CompletionBox, shownText } from './components';

jest.mock('react-native-local-llm-rs', () => require('react-native-local-llm-rs/jest/mock'));

const press = (name: string) => fireEvent.press(screen.getByRole('button', { name }));
const ask = [{ role: 'user', content: 'Hello there, mock' }];

afterEach(() => configureMock());

describe("the example app's ChatScreen on the mock", () => {
  test('Send shows the canned reply and its timings', async () => {
    const ai = await LocalLLM.create({ model: '/models/any.gguf' });
    render(<ChatScreen ai={ai} />);
    fireEvent.changeText(screen.getByDisplayValue(''), 'Hello there');
    press('Send');
    expect(await screen.findByText('assistant: You said: Hello there')).toBeOnTheScreen();
    expect(screen.getByText('user: Hello there')).toBeOnTheScreen();
    expect(screen.getByText(/^Generation: 4 tokens/)).toBeOnTheScreen();
    expect(screen.getByRole('button', { name: 'Stop' })).toBeDisabled();
  });

  test('Stop keeps the words so far; a disposed instance shows NOT_INITIALIZED', async () => {
    configureMock({ reply: () => 'one two three four five six seven eight nine ten', delayMs: 20 });
    const ai = await LocalLLM.create({ model: 'any.gguf' });
    render(<ChatScreen ai={ai} />);
    fireEvent.changeText(screen.getByDisplayValue(''), 'Count');
    press('Send');
    await screen.findByText(/^assistant: one two/);
    press('Stop');
    const stopped = shownText(await screen.findByText(/\[stopped\]$/));
    expect(stopped).toMatch(/^assistant: one two( \w+)* \[stopped\]$/);
    expect(stopped).not.toContain('ten');

    ai.dispose();
    fireEvent.changeText(screen.getByDisplayValue(''), 'Again');
    press('Send');
    expect(await screen.findByText('NOT_INITIALIZED: LocalLLM has been disposed')).toBeOnTheScreen();
  });
});

describe('the hooks on the mock', () => {
  test('useChat streams the canned reply word by word, cut to max_tokens words', async () => {
    configureMock({ delayMs: 5 }); // a render per word (without a delay they are batched)
    const ai = await LocalLLM.create({ model: 'any.gguf' });
    const states: UseChatResult[] = [];
    render(<ChatBox ai={ai} request={{ max_tokens: 3 }} onRender={(s) => states.push(s)} />);
    fireEvent.changeText(screen.getByTestId('input'), 'a b c d');
    press('Send');
    await waitFor(() => expect(screen.getByTestId('status')).toHaveTextContent('ready'));
    expect(screen.getByTestId('message-1')).toHaveTextContent('assistant: You said: a');
    expect(screen.getByTestId('timing')).toHaveTextContent('3 tokens');
    const partial = states.filter((s) => s.isStreaming).map((s) => s.messages[1]?.content);
    expect(partial).toEqual(expect.arrayContaining(['You', 'You said:']));
  });

  test('useCompletion answers; an invalid option is INVALID_OPTION', async () => {
    const ai = await LocalLLM.create({ model: 'any.gguf' });
    const view = render(<CompletionBox ai={ai} />);
    fireEvent.changeText(screen.getByTestId('prompt'), 'Why?');
    press('Ask');
    await waitFor(() => expect(screen.getByTestId('completion')).toHaveTextContent('You said: Why?'));
    view.rerender(<CompletionBox ai={ai} options={{ request: { max_tokens: -1 } }} />);
    press('Ask');
    await waitFor(() => expect(screen.getByTestId('error')).toHaveTextContent(/^INVALID_OPTION: max_tokens/));
  });
});

describe('the mock API', () => {
  test('its exports are the real ones (plus configureMock)', () => {
    const mock = jest.requireActual<object>('react-native-local-llm-rs/jest/mock');
    const real = jest.requireActual<object>('react-native-local-llm-rs');
    const extra = Object.keys(mock).filter((name) => !(name in real));
    expect(extra).toEqual(['configureMock']);
    expect(Object.keys(mock)).toEqual(expect.arrayContaining(['LocalLLM', 'useChat', 'useCompletion', 'ModelManager']));
  });

  test('error codes and class agree with the real ones', () => {
    expect({ ...LocalLLMErrorCode }).toEqual({ ...realErrors.LocalLLMErrorCode });
    const e = new LocalLLMError(LocalLLMErrorCode.INVALID_PATH, 'no file');
    expect(e).toBeInstanceOf(Error);
    expect([e.name, e.code, e.message]).toEqual(['LocalLLMError', 'INVALID_PATH', 'no file']);
  });

  test('chat completions: whole, streamed, max_tokens and abort', async () => {
    const ai = await LocalLLM.create({ model: 'https://example.com/SmolLM2.gguf' });
    const whole = await ai.chat.completions.create({ messages: ask });
    expect(whole.choices[0].message.content).toBe('You said: Hello there, mock');
    expect(whole.choices[0].finish_reason).toBe('stop');
    expect(whole.usage).toEqual({ prompt_tokens: 3, completion_tokens: 5, total_tokens: 8 });
    expect(whole.model).toBe('SmolLM2');

    const cut = await ai.chat.completions.create({ messages: ask, max_tokens: 2 });
    expect([cut.choices[0].message.content, cut.choices[0].finish_reason]).toEqual(['You said:', 'length']);

    const chunks: ChatCompletionChunk[] = [];
    for await (const c of await ai.chat.completions.create({ messages: ask, stream: true })) {
      chunks.push(c);
    }
    expect(chunks[0].choices[0].delta).toEqual({ role: 'assistant' });
    expect(chunks.map((c) => c.choices[0]?.delta.content ?? '').join('')).toBe('You said: Hello there, mock');
    expect(chunks[chunks.length - 1]._timing?.generatedTokens).toBe(5);
    expect(chunks[chunks.length - 1].choices[0].finish_reason).toBe('stop');

    const controller = new AbortController();
    const stream = await ai.chat.completions.create({ messages: ask, stream: true, signal: controller.signal });
    const read = async () => {
      for await (const c of stream) {
        if (c.choices[0]?.delta.content !== undefined) {
          controller.abort();
        }
      }
    };
    await expect(read()).rejects.toMatchObject({ name: 'AbortError' });
    await expect(ai.chat.completions.create({ messages: ask, signal: controller.signal })).rejects.toMatchObject({
      name: 'AbortError',
    });
    expect(await ai.context.generate('a b c', { maxTokens: 3 })).toBe('You said: a');
    expect(ai.context.getPerf()?.generatedTokens).toBe(3);
    await expect(ai.chat.completions.create({ messages: [] })).rejects.toMatchObject({
      code: LocalLLMErrorCode.INVALID_OPTION,
    });
  });

  test('embeddings, dispose, device helpers and ModelManager', async () => {
    const plain = await LocalLLM.create({ model: 'a.gguf' });
    expect(() => plain.embeddings).toThrow(expect.objectContaining({ code: LocalLLMErrorCode.EMBEDDING_FAILED }));
    const ai = await LocalLLM.create({ model: 'a.gguf', embeddings: true });
    const res = await ai.embeddings.create({ input: ['cat', 'dog', 'cat'] });
    const [cat, dog, cat2] = res.data.map((d) => d.embedding as number[]);
    expect(cat).toEqual(cat2);
    expect(cat).not.toEqual(dog);
    expect(Math.hypot(...cat)).toBeCloseTo(1);
    ai.dispose();
    expect(() => ai.chat).toThrow(expect.objectContaining({ code: LocalLLMErrorCode.NOT_INITIALIZED }));
    await expect(LocalLLM.create({ model: '' })).rejects.toBeInstanceOf(LocalLLMError);

    expect(getDeviceCapabilities().totalRAM).toBeGreaterThan(0);
    expect(canRunModel(100 * 1024 ** 2).canRun).toBe(true);
    expect(canRunModel(100 * 1024 ** 3).canRun).toBe(false);
    expect(recommendQuantization()).toBe('Q8_0');
    const manager = new ModelManager();
    const progress: number[] = [];
    const path = await manager.downloadModel('https://example.com/m/tiny.gguf', {
      onProgress: (_d, _t, p) => progress.push(p),
    });
    expect(path).toBe('/mock/models/tiny.gguf');
    expect(progress).toEqual([100]);
    expect((await manager.listModels()).map((m) => m.path)).toEqual([path]);
  });
});
