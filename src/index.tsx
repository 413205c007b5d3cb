// react-native-local-llm: on-device LLM inference with the local-llm-rn API.
// Importing ./native installs the Rust library's JSI bindings (turbo module) and initializes
// the generated TypeScript; the API in ./api then calls them.
import native from './native';
import { setBindings, type Bindings } from './api/bindings';

setBindings(native.local_llm_ffi as unknown as Bindings);

export * from './api';
