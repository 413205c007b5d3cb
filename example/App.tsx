// Example app of react-native-local-llm-rs: one screen per feature, chosen with a tab bar
// (plain state, no navigation library).
import { useState } from 'react';
import { Pressable, StatusBar, StyleSheet, Text, View } from 'react-native';
import { LocalLLM } from 'react-native-local-llm-rs';
import { BenchmarkScreen } from './src/screens/BenchmarkScreen';
import { ChatScreen } from './src/screens/ChatScreen';
import { DeviceScreen } from './src/screens/DeviceScreen';
import { EmbeddingsScreen } from './src/screens/EmbeddingsScreen';
import { ModelScreen } from './src/screens/ModelScreen';
import { ModelsScreen, createModelDownloads } from './src/screens/ModelsScreen';
import type { ModelDownloads } from './src/model-downloads';

const TABS = ['Model', 'Models', 'Chat', 'Embeddings', 'Benchmark', 'Device'] as const;
type Tab = (typeof TABS)[number];

function Screen(props: {
  tab: Tab;
  ai: LocalLLM | null;
  setAi: (ai: LocalLLM | null) => void;
  downloads: ModelDownloads;
  chatWith: (path: string) => Promise<void>;
}) {
  const { tab, ai } = props;
  if (tab === 'Model') {
    return <ModelScreen ai={ai} onLoaded={props.setAi} />;
  }
  if (tab === 'Models') {
    return <ModelsScreen downloads={props.downloads} onUse={props.chatWith} />;
  }
  if (tab === 'Device') {
    return <DeviceScreen />;
  }
  if (ai === null) {
    return <Text style={styles.hint}>Load a model on the Model tab first.</Text>;
  }
  switch (tab) {
    case 'Chat':
      return <ChatScreen ai={ai} />;
    case 'Embeddings':
      return <EmbeddingsScreen ai={ai} />;
    case 'Benchmark':
      return <BenchmarkScreen ai={ai} />;
  }
}

export default function App() {
  const [tab, setTab] = useState<Tab>('Model');
  const [ai, setAi] = useState<LocalLLM | null>(null);
  // Created once: a download keeps running while another tab is shown.
  const [downloads] = useState(createModelDownloads);
  // A model chosen on the Models tab replaces the loaded one and opens the chat.
  const chatWith = async (path: string) => {
    ai?.dispose();
    setAi(null);
    setAi(await LocalLLM.create({ model: path, contextSize: 2048, embeddings: true }));
    setTab('Chat');
  };
  return (
    <View style={styles.app}>
      <StatusBar barStyle="dark-content" />
      <View style={styles.body}>
        <Screen tab={tab} ai={ai} setAi={setAi} downloads={downloads} chatWith={chatWith} />
      </View>
      <View style={styles.tabs}>
        {TABS.map((t) => (
          <Pressable key={t} accessibilityRole="tab" onPress={() => setTab(t)} style={styles.tab}>
            <Text style={[styles.tabText, t === tab && styles.active]}>{t}</Text>
          </Pressable>
        ))}
      </View>
    </View>
  );
}

const styles = StyleSheet.create({
  app: { flex: 1, paddingTop: 48, backgroundColor: 'white' },
  body: { flex: 1 },
  hint: { padding: 12 },
  tabs: { flexDirection: 'row', borderTopWidth: 1, borderColor: '#d1d5db', paddingBottom: 24 },
  tab: { flex: 1, paddingVertical: 12 },
  tabText: { textAlign: 'center', fontSize: 12, color: '#6b7280' },
  active: { color: '#2563eb', fontWeight: '700' },
});
