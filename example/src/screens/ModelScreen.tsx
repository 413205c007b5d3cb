// Load a GGUF model from a local path; show what was loaded.
import { useState } from 'react';
import { Platform, ScrollView, Text } from 'react-native';
import { LocalLLM } from 'react-native-local-llm-rs';
import { Button, ErrorText, Field, Row, errorText, styles } from '../ui';

const MB = 1024 * 1024;

// Where the README's adb commands put the model (the app's files directory); iOS paths
// include the app container's id, so the field starts empty there.
const DEFAULT_PATH = Platform.OS === 'android' ? '/data/data/com.localllmexample/files/SmolLM2-135M-Instruct.Q4_1.gguf' : '';
const PATH_NOTE =
  Platform.OS === 'android'
    ? "The app's files directory: example/README.md shows the adb commands that copy a model there."
    : 'The full path of a .gguf file in the app container, e.g. its Documents folder.';

/** The model screen: `ai` is the loaded instance (null when none); `onLoaded` replaces it. */
export function ModelScreen(props: { ai: LocalLLM | null; onLoaded: (ai: LocalLLM | null) => void }) {
  const [path, setPath] = useState(DEFAULT_PATH);
  const [loading, setLoading] = useState(false);
  const [error, setError] = useState<string | null>(null);

  const load = async () => {
    setLoading(true);
    setError(null);
    props.ai?.dispose();
    props.onLoaded(null);
    try {
      // `embeddings: true` also creates the context the embeddings screen uses.
      props.onLoaded(await LocalLLM.create({ model: path.trim(), contextSize: 2048, embeddings: true }));
    } catch (e) {
      setError(errorText(e));
    } finally {
      setLoading(false);
    }
  };

  const unload = () => {
    props.ai?.dispose();
    props.onLoaded(null);
  };

  const info = props.ai?.model.info;
  return (
    <ScrollView contentContainerStyle={styles.screen}>
      <Text style={styles.title}>Model</Text>
      <Field
        label="GGUF file on this device"
        value={path}
        onChangeText={setPath}
        note={PATH_NOTE}
      />
      <Text style={styles.note}>To download a model from a URL, use the Models tab.</Text>
      <Button title={loading ? 'Loading…' : 'Load'} onPress={load} disabled={loading || path.trim() === ''} />
      <Button title="Unload" onPress={unload} disabled={props.ai === null} />
      <ErrorText error={error} />
      {info !== undefined && (
        <>
          <Row label="Architecture">{info.architecture}</Row>
          <Row label="Name">{info.name ?? '—'}</Row>
          <Row label="Parameters">{(info.nParams / 1e6).toFixed(1)} M</Row>
          <Row label="File size">{(info.sizeBytes / MB).toFixed(1)} MB</Row>
          <Row label="Layers">{info.nLayer}</Row>
          <Row label="Training context">{info.contextLength}</Row>
          <Row label="Vocabulary">{info.nVocab}</Row>
          <Row label="Chat template">{info.hasChatTemplate ? 'from the file' : 'built-in'}</Row>
          <Row label="Load time">{info.loadMs.toFixed(0)} ms</Row>
        </>
      )}
    </ScrollView>
  );
}
