// Download a model from a URL with progress, pause and resume; list and remove cached models;
// hand one to the chat. A view over ModelDownloads (../model-downloads.ts), which holds the logic.
import { useState, useSyncExternalStore } from 'react';
import { ScrollView, Text, View } from 'react-native';
import { ModelManager } from 'react-native-local-llm-rs';
import { ModelDownloads, formatProgress, type CachedModel } from '../model-downloads';
import { Button, ErrorText, Field, Row, errorText, styles, useTask } from '../ui';

/**
 * The app's one download controller (it outlives the screen, so a download continues). Its cache
 * is the package's default folder (Android: local-llm/models in the app's files directory; iOS:
 * Library/Application Support/local-llm/models, excluded from backups).
 */
export function createModelDownloads(): ModelDownloads {
  const downloads = new ModelDownloads(new ModelManager());
  void downloads.refresh();
  return downloads;
}

/** The Models screen; `onUse` loads the chosen file for the chat. */
export function ModelsScreen(props: { downloads: ModelDownloads; onUse: (path: string) => Promise<void> }) {
  const { downloads } = props;
  const state = useSyncExternalStore(
    (changed) => downloads.subscribe(changed),
    () => downloads.state,
  );
  const [busyModel, setBusyModel] = useState<string | null>(null);
  const task = useTask();
  const { phase } = state;
  const running = phase.kind === 'downloading';

  const chatWith = (model: CachedModel) =>
    task.run(async () => {
      setBusyModel(model.path);
      try {
        downloads.choose(model);
        await props.onUse(model.path);
      } finally {
        setBusyModel(null);
      }
    });

  return (
    <ScrollView contentContainerStyle={styles.screen}>
      <Text style={styles.title}>Models</Text>
      <Field label="Model URL" value={state.url} onChangeText={(u) => downloads.setUrl(u)} editable={!running} />
      <Field
        label="Expected SHA-256"
        value={state.expectedSha256}
        onChangeText={(s) => downloads.setExpectedSha256(s)}
        editable={!running}
        note="Empty: not checked. A file with another hash is deleted (DOWNLOAD_INTEGRITY_MISMATCH)."
      />
      <View style={styles.buttons}>
        <Button title="Download" onPress={() => void downloads.start()} disabled={running || phase.kind === 'paused'} />
        <Button title="Pause" onPress={() => downloads.pause()} disabled={!running} />
        <Button
          title="Resume"
          onPress={() => void downloads.resume()}
          disabled={phase.kind !== 'paused' && phase.kind !== 'failed'}
        />
      </View>
      {phase.kind === 'downloading' && <Row label="Downloading">{formatProgress(phase)}</Row>}
      {phase.kind === 'paused' && <Row label="Paused at">{formatProgress(phase)}</Row>}
      {phase.kind === 'done' && <Row label="Saved">{phase.path}</Row>}
      {phase.kind === 'failed' && <ErrorText error={errorText(phase.error)} />}
      <Text style={styles.title}>Cached models</Text>
      {state.models.length === 0 && <Text>None yet.</Text>}
      {state.models.map((m) => (
        <View key={m.path} style={styles.field}>
          <Text style={styles.label}>{m.url.split('/').pop()}</Text>
          <Text style={styles.note}>
            {(m.size / (1024 * 1024)).toFixed(1)} MB, SHA-256 {m.sha256.slice(0, 12)}…, {m.downloadedAt}
            {state.chosen === m.path ? ' (in use)' : ''}
          </Text>
          <View style={styles.buttons}>
            <Button
              title={busyModel === m.path ? 'Loading…' : 'Chat with it'}
              onPress={() => void chatWith(m)}
              disabled={busyModel !== null}
            />
            <Button title="Remove" onPress={() => void downloads.remove(m)} disabled={busyModel !== null} />
          </View>
        </View>
      ))}
      <ErrorText error={task.error} />
      <ErrorText error={state.cacheError === null ? null : errorText(state.cacheError)} />
    </ScrollView>
  );
}
