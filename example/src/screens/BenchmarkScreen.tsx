// Prompt processing (pp) and generation (tg) speed through the context's benchmark API.
import { useState } from 'react';
import { ScrollView, Text } from 'react-native';
import type { BenchmarkResult, LocalLLM } from 'react-native-local-llm-rs';
import { Button, ErrorText, Field, Row, parseCount, styles, useTask } from '../ui';

/** The benchmark screen on a loaded instance. */
export function BenchmarkScreen(props: { ai: LocalLLM }) {
  const [promptTokens, setPromptTokens] = useState('128');
  const [generateTokens, setGenerateTokens] = useState('32');
  const [iterations, setIterations] = useState('3');
  const [result, setResult] = useState<BenchmarkResult | null>(null);
  const { busy, error, run: runTask } = useTask();

  const run = () =>
    runTask(async () => {
      setResult(null);
      setResult(
        await props.ai.context.benchmark({
          promptTokens: parseCount(promptTokens, 128),
          generateTokens: parseCount(generateTokens, 32),
          iterations: parseCount(iterations, 3),
        }),
      );
    });

  return (
    <ScrollView contentContainerStyle={styles.screen}>
      <Text style={styles.title}>Benchmark</Text>
      <Field label="Prompt tokens (pp)" value={promptTokens} onChangeText={setPromptTokens} numeric />
      <Field label="Generated tokens (tg)" value={generateTokens} onChangeText={setGenerateTokens} numeric />
      <Field label="Iterations" value={iterations} onChangeText={setIterations} numeric />
      <Button title={busy ? 'Running…' : 'Run'} onPress={run} disabled={busy} />
      <ErrorText error={error} />
      {result !== null && (
        <>
          <Row label={`pp${parseCount(promptTokens, 128)}`}>{result.promptTokensPerSec.toFixed(1)} tokens/s</Row>
          <Row label={`tg${parseCount(generateTokens, 32)}`}>{result.generatedTokensPerSec.toFixed(1)} tokens/s</Row>
          <Row label="Time to first token">{result.ttftMs.toFixed(0)} ms</Row>
          <Row label="Total">{result.totalMs.toFixed(0)} ms over {result.iterations} iterations</Row>
          {result.individual.map((m, i) => (
            <Row key={i} label={`#${i + 1}`}>
              pp {m.promptTokensPerSec.toFixed(1)}, tg {m.generatedTokensPerSec.toFixed(1)} tokens/s
            </Row>
          ))}
        </>
      )}
    </ScrollView>
  );
}
