// Embeddings demo: the cosine similarity of two texts.
import { useState } from 'react';
import { ScrollView, Text } from 'react-native';
import type { LocalLLM } from 'react-native-local-llm-rs';
import { cosine } from '../cosine';
import { Button, ErrorText, Field, Row, styles, useTask } from '../ui';

interface Comparison {
  similarity: number;
  dimension: number;
  tokens: number;
  ms: number;
}

/** The embeddings screen on an instance created with `embeddings: true`. */
export function EmbeddingsScreen(props: { ai: LocalLLM }) {
  const [first, setFirst] = useState('The cat sleeps on the sofa.');
  const [second, setSecond] = useState('A kitten is napping on the couch.');
  const [result, setResult] = useState<Comparison | null>(null);
  const { busy, error, run } = useTask();

  const compare = () =>
    run(async () => {
      setResult(null);
      const start = Date.now();
      const res = await props.ai.embeddings.create({ input: [first, second] });
      const [a, b] = res.data.map((d) => d.embedding);
      if (typeof a === 'string' || typeof b === 'string') {
        throw new Error('expected float embeddings');
      }
      setResult({
        similarity: cosine(a, b),
        dimension: a.length,
        tokens: res.usage.total_tokens,
        ms: Date.now() - start,
      });
    });

  return (
    <ScrollView contentContainerStyle={styles.screen}>
      <Text style={styles.title}>Embeddings</Text>
      <Field label="First text" value={first} onChangeText={setFirst} multiline />
      <Field label="Second text" value={second} onChangeText={setSecond} multiline />
      <Button title={busy ? 'Embedding…' : 'Compare'} onPress={compare} disabled={busy} />
      <ErrorText error={error} />
      {result !== null && (
        <>
          <Row label="Cosine similarity">{result.similarity.toFixed(4)}</Row>
          <Row label="Dimensions">{result.dimension}</Row>
          <Row label="Tokens">{result.tokens}</Row>
          <Row label="Time">{result.ms} ms</Row>
        </>
      )}
    </ScrollView>
  );
}
