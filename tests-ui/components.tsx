// Small screens on the hooks, as an app would write them, for the tests: every render's state is
// also recorded (`onRender`) so that a test can check what was shown between two of its steps.
import type { ReactTestInstance } from 'react-test-renderer';
import { Pressable, Text, TextInput, View } from 'react-native';
import {
  LocalLLMError,
  useChat,
  useCompletion,
  type ChatRequestOptions,
  type LocalLLM,
  type UseChatResult,
  type UseCompletionOptions,
  type UseCompletionResult,
} from 'react-native-local-llm-rs';

/** A text button (disabled: greyed and inert). */
function Button(props: { title: string; onPress: () => void; disabled?: boolean }) {
  return (
    <Pressable accessibilityRole="button" onPress={props.onPress} disabled={props.disabled}>
      <Text>{props.title}</Text>
    </Pressable>
  );
}

/** The error as an app shows it: the code of a LocalLLMError, else the name. */
export function ErrorLine(props: { error: Error | null }) {
  if (props.error === null) {
    return null;
  }
  const code = props.error instanceof LocalLLMError ? props.error.code : props.error.name;
  return (
    <Text testID="error">
      {code}: {props.error.message}
    </Text>
  );
}

/** A chat screen on {@link useChat}. */
export function ChatBox(props: {
  ai: LocalLLM | null;
  request?: ChatRequestOptions;
  onRender?: (s: UseChatResult) => void;
}) {
  const chat = useChat(props.ai, { request: props.request });
  props.onRender?.(chat);
  return (
    <View>
      {chat.messages.map((m, i) => (
        <Text key={i} testID={`message-${i}`}>
          {m.role}: {typeof m.content === 'string' ? m.content : ''}
        </Text>
      ))}
      <TextInput testID="input" value={chat.input} onChangeText={chat.setInput} />
      <Button title="Send" onPress={() => chat.send()} disabled={chat.isStreaming} />
      <Button title="Stop" onPress={chat.stop} disabled={!chat.isStreaming} />
      <Button title="Reset" onPress={chat.reset} />
      <Text testID="status">{chat.status}</Text>
      {chat.timing !== null && <Text testID="timing">{chat.timing.generatedTokens} tokens</Text>}
      <ErrorLine error={chat.error} />
    </View>
  );
}

/** A one-question screen on {@link useCompletion}. */
export function CompletionBox(props: {
  ai: LocalLLM | null;
  options?: UseCompletionOptions;
  onRender?: (s: UseCompletionResult) => void;
}) {
  const c = useCompletion(props.ai, props.options);
  props.onRender?.(c);
  return (
    <View>
      <TextInput testID="prompt" value={c.input} onChangeText={c.setInput} />
      <Button title="Ask" onPress={() => c.complete()} disabled={c.isStreaming} />
      <Button title="Stop" onPress={c.stop} disabled={!c.isStreaming} />
      <Text testID="completion">{c.completion}</Text>
      <Text testID="status">{c.status}</Text>
      {c.timing !== null && <Text testID="timing">{c.timing.generatedTokens} tokens</Text>}
      <ErrorLine error={c.error} />
    </View>
  );
}

/** The text an element shows (its strings and its children's, joined). */
export function shownText(node: ReactTestInstance | string): string {
  return typeof node === 'string' ? node : node.children.map(shownText).join('');
}
