// ESLint with React Native's shared config and Prettier, as react-native-builder-bob's
// library template wires them. `npm run lint` checks; `npm run format` rewrites.
import { fixupConfigRules } from '@eslint/compat';
import { FlatCompat } from '@eslint/eslintrc';
import js from '@eslint/js';
import prettier from 'eslint-plugin-prettier';
import { defineConfig } from 'eslint/config';
import * as espree from 'espree';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.dirname(fileURLToPath(import.meta.url));
const compat = new FlatCompat({
  baseDirectory: root,
  // The shared config's plugins are its own dependencies.
  resolvePluginsRelativeTo: path.join(root, 'node_modules/@react-native/eslint-config'),
  recommendedConfig: js.configs.recommended,
  allConfig: js.configs.all,
});

export default defineConfig([
  {
    extends: fixupConfigRules(compat.extends('@react-native', 'prettier')),
    plugins: { prettier },
    rules: {
      'react/react-in-jsx-scope': 'off',
      'prettier/prettier': 'error',
    },
  },
  {
    // Plain JavaScript (the Expo plugin, scripts) is not compiled by Babel: ESLint's own parser.
    files: ['**/*.js', '**/*.mjs'],
    languageOptions: { parser: espree, ecmaVersion: 'latest', sourceType: 'module' },
  },
  {
    files: ['**/*.cjs'],
    languageOptions: { parser: espree, ecmaVersion: 'latest', sourceType: 'commonjs' },
  },
  {
    ignores: [
      'node_modules/',
      'lib/',
      'target/',
      'rust/',
      'android/',
      'ios/',
      'cpp/',
      'example/',
      'src/generated/',
      'tests/generated/',
      '.cache/',
    ],
  },
]);
