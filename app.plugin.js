// Expo config plugin entry (`plugins: ['react-native-local-llm-rs']` in app.json); see plugin/.
export { default } from './plugin/with-local-llm.cjs';
