// Streaming chat with a stop button (AbortSignal) and generation speed.
import { useEffect, useRef, useState } from 'react';
import { ScrollView, Text, View } from 'react-native';
import type { ChatMessage, InferenceMetrics, LocalLLM } from 'react-native-local-llm-rs';
import { Button, ErrorText, Field, Row, errorText, isAbort, styles } from '../ui';

/** The chat screen on a loaded instance. */
export function ChatScreen(props: { ai: LocalLLM }) {
  const [messages, setMessages] = useState<ChatMessage[]>([]);
  const [input, setInput] = useState('');
  const [reply, setReply] = useState('');
  const [liveRate, setLiveRate] = useState<number | null>(null);
  const [timing, setTiming] = useState<InferenceMetrics | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const controller = useRef<AbortController | null>(null);
  // Leaving the tab stops a running generation.
  useEffect(() => () => controller.current?.abort(), []);

  const send = async () => {
    const history: ChatMessage[] = [...messages, { role: 'user', content: input }];
    setMessages(history);
    setInput('');
    setReply('');
    setError(null);
    setTiming(null);
    setLiveRate(null);
    const abort = new AbortController();
    controller.current = abort;
    setBusy(true);
    let text = '';
    let pieces = 0;
    let firstPieceAt = 0;
    try {
      const stream = await props.ai.chat.completions.create({
        messages: history,
        stream: true,
        max_tokens: 512,
        temperature: 0.7,
        signal: abort.signal,
      });
      for await (const chunk of stream) {
        const piece = chunk.choices[0].delta.content;
        if (piece !== undefined && piece !== '') {
          text += piece;
          pieces += 1;
          if (pieces === 1) {
            firstPieceAt = Date.now();
          } else {
            // Pieces are tokens, except when a UTF-8 character spans two: close enough live.
            setLiveRate(((pieces - 1) * 1000) / Math.max(1, Date.now() - firstPieceAt));
          }
          setReply(text);
        }
        if (chunk._timing !== undefined) {
          setTiming(chunk._timing);
        }
      }
    } catch (e) {
      if (isAbort(e)) {
        text += ' [stopped]';
        // The generation's timings are kept even when it was stopped.
        setTiming(props.ai.context.getPerf());
      } else {
        setError(errorText(e));
      }
    } finally {
      controller.current = null;
      setBusy(false);
      setMessages([...history, { role: 'assistant', content: text }]);
      setReply('');
    }
  };

  return (
    <ScrollView contentContainerStyle={styles.screen}>
      <Text style={styles.title}>Chat</Text>
      {messages.map((m, i) => (
        <Text key={i}>
          <Text style={styles.label}>{m.role}: </Text>
          {typeof m.content === 'string' ? m.content : ''}
        </Text>
      ))}
      {busy && (
        <Text>
          <Text style={styles.label}>assistant: </Text>
          {reply}
        </Text>
      )}
      <Field label="Message" value={input} onChangeText={setInput} multiline />
      <View style={styles.buttons}>
        <Button title="Send" onPress={send} disabled={busy || input.trim() === ''} />
        <Button title="Stop" onPress={() => controller.current?.abort()} disabled={!busy} />
        <Button title="Clear" onPress={() => setMessages([])} disabled={busy} />
      </View>
      <ErrorText error={error} />
      {busy && liveRate !== null && <Row label="Generating">{liveRate.toFixed(1)} tokens/s</Row>}
      {timing !== null && (
        <>
          <Row label="Prompt">
            {timing.promptTokens} tokens, {timing.promptTokensPerSec.toFixed(1)} tokens/s
          </Row>
          <Row label="Generation">
            {timing.generatedTokens} tokens, {timing.generatedTokensPerSec.toFixed(1)} tokens/s
          </Row>
        </>
      )}
    </ScrollView>
  );
}
