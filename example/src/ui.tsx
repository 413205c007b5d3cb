// Small shared pieces of the example's screens: a button, a labelled text field, a result
// line and error text for any thrown value.
import { useState, type ReactNode } from 'react';
import { Pressable, StyleSheet, Text, TextInput, View } from 'react-native';
import { LocalLLMError } from 'react-native-local-llm-rs';

/** A text button; greyed out and inert when `disabled`. */
export function Button(props: { title: string; onPress: () => void; disabled?: boolean }) {
  return (
    <Pressable
      accessibilityRole="button"
      onPress={props.onPress}
      disabled={props.disabled}
      style={[styles.button, props.disabled === true && styles.disabled]}>
      <Text style={styles.buttonText}>{props.title}</Text>
    </Pressable>
  );
}

/** A label above a text input. */
export function Field(props: {
  label: string;
  value: string;
  onChangeText?: (text: string) => void;
  editable?: boolean;
  multiline?: boolean;
  numeric?: boolean;
  note?: string;
}) {
  return (
    <View style={styles.field}>
      <Text style={styles.label}>{props.label}</Text>
      <TextInput
        style={[styles.input, props.editable === false && styles.disabled]}
        value={props.value}
        onChangeText={props.onChangeText}
        editable={props.editable}
        multiline={props.multiline}
        keyboardType={props.numeric === true ? 'number-pad' : 'default'}
        autoCapitalize="none"
        autoCorrect={false}
      />
      {props.note !== undefined && <Text style={styles.note}>{props.note}</Text>}
    </View>
  );
}

/** `label: value` on one line. */
export function Row(props: { label: string; children: ReactNode }) {
  return (
    <Text style={styles.row}>
      <Text style={styles.label}>{props.label}: </Text>
      {props.children}
    </Text>
  );
}

/** A readable message for a thrown value, with the package's error code when it has one. */
export function errorText(e: unknown): string {
  if (e instanceof LocalLLMError) {
    return `${e.code}: ${e.message}`;
  }
  return e instanceof Error ? `${e.name}: ${e.message}` : String(e);
}

/** Whether `e` is the AbortError a call rejects with after its AbortSignal fired. */
export function isAbort(e: unknown): boolean {
  return e instanceof Error && e.name === 'AbortError';
}

/**
 * A screen's one-at-a-time async action: `run(work)` marks it busy, clears the last error, and
 * records what `work` throws as error text.
 */
export function useTask(): { busy: boolean; error: string | null; run: (work: () => Promise<void>) => Promise<void> } {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const run = async (work: () => Promise<void>) => {
    setBusy(true);
    setError(null);
    try {
      await work();
    } catch (e) {
      setError(errorText(e));
    } finally {
      setBusy(false);
    }
  };
  return { busy, error, run };
}

/** Error text in red, nothing when `error` is null. */
export function ErrorText(props: { error: string | null }) {
  return props.error === null ? null : <Text style={styles.error}>{props.error}</Text>;
}

/** A positive integer from a text field, `fallback` when it is not one. */
export function parseCount(text: string, fallback: number): number {
  const n = Number.parseInt(text, 10);
  return Number.isFinite(n) && n > 0 ? n : fallback;
}

export const styles = StyleSheet.create({
  screen: { padding: 12, gap: 8 },
  title: { fontSize: 18, fontWeight: '600' },
  button: { backgroundColor: '#2563eb', borderRadius: 6, paddingVertical: 10, paddingHorizontal: 14 },
  buttonText: { color: 'white', fontWeight: '600', textAlign: 'center' },
  disabled: { opacity: 0.4 },
  field: { gap: 4 },
  label: { fontWeight: '600' },
  input: { borderWidth: 1, borderColor: '#9ca3af', borderRadius: 6, padding: 8 },
  note: { color: '#6b7280', fontSize: 12 },
  row: { fontVariant: ['tabular-nums'] },
  error: { color: '#dc2626' },
  buttons: { flexDirection: 'row', gap: 8 },
});
