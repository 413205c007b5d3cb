// react-native-local-llm-rs: on-device LLM inference with the local-llm-rn API.
// Importing ./native installs the Rust library's JSI bindings (turbo module) and initializes
// the generated TypeScript; the API in ./api then calls them.
import { Platform } from 'react-native';
import native from './native';
import { setBindings, type Bindings } from './api/bindings';
import { setPlatform } from './api/device';

setBindings(native.local_llm_ffi as unknown as Bindings);
setPlatform({
  os: Platform.OS,
  version: Platform.OS === 'android' ? String(Platform.constants.Release) : String(Platform.Version),
});

export * from './api';
export * from './hooks';
