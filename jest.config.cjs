// Jest for the React hooks, the Jest mock and the example app's screens (`npm run test:ui`):
// React Native's preset with @testing-library/react-native. tests-ui/engine.test.tsx runs the
// real engine through the N-API flavour of the bindings (tests/generated/napi, made by
// `scripts/checks/js-test.sh napi`) on the model of LOCAL_LLM_MODEL.
const babel = [
  'babel-jest',
  {
    presets: ['module:@react-native/babel-preset'],
    plugins: [require.resolve('./tests-ui/import-meta-url.cjs')],
    babelrc: false,
    configFile: false,
  },
];

module.exports = {
  preset: '@react-native/jest-preset',
  rootDir: __dirname,
  roots: ['<rootDir>/tests-ui'],
  testMatch: ['**/*.test.tsx'],
  // No babel.config.* at the root (react-native-builder-bob and the example app keep theirs):
  // the preset's Babel options are given here.
  transform: { '^.+\\.(js|ts|tsx)$': babel },
  transformIgnorePatterns: [
    'node_modules/(?!((jest-)?react-native|@react-native(-community)?)/)',
    // @ubjs/node, a link from node_modules to the runtime built in ~/.cache (compiled CommonJS).
    '/ubjs-node/',
  ],
  setupFiles: ['<rootDir>/tests-ui/setup.ts'],
  moduleNameMapper: {
    // An app's import of the package: the API and the hooks without the turbo module.
    '^react-native-local-llm-rs$': '<rootDir>/tests-ui/package-entry.ts',
    '^react-native-local-llm-rs/jest/mock$': '<rootDir>/jest/mock.js',
    // One React and one React Native for the package and the example's screens, also when
    // example/node_modules holds its own copies (after scripts/checks/example-test.sh).
    '^react$': '<rootDir>/node_modules/react',
    '^react/(.*)$': '<rootDir>/node_modules/react/$1',
    '^react-native$': '<rootDir>/node_modules/react-native',
    '^react-native/(.*)$': '<rootDir>/node_modules/react-native/$1',
  },
  // The engine tests share one process and one model (2 cores: one test file at a time).
  maxWorkers: 1,
  testTimeout: 60000,
};
