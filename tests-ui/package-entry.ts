// What `import ... from 'react-native-local-llm-rs'` gives the tests (see jest.config.cjs): the
// package's entry (src/index.tsx) without the turbo module, whose bindings a test sets itself
// (the N-API flavour) or replaces by the Jest mock.
export * from '../src/api';
export * from '../src/hooks';
