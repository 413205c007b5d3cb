// Metro for an app inside the package's repository: the app depends on the package by path
// (`file:..`, a symlink in node_modules), and Metro bundles the package's TypeScript source
// (the `source` export condition) so edits to ../src show up without building lib/.
const path = require('node:path');
const { getDefaultConfig, mergeConfig } = require('@react-native/metro-config');
const pkg = require('../package.json');

const root = path.resolve(__dirname, '..');
const escape = (s) => s.replace(/[|\\{}()[\]^$+*?.-]/g, '\\$&');
/** Everything under `dir` of the repository. */
const under = (dir) => new RegExp(`^${escape(path.join(root, dir))}([/\\\\].*)?$`);

// React and React Native must be the app's copies: block the repository's own (installed for
// the package's development) and point the package's imports of them at the app's.
const peers = Object.keys(pkg.peerDependencies);
const defaults = getDefaultConfig(__dirname);
// LOCAL_LLM_EXAMPLE_LIB=1 bundles the built lib/module instead, as apps that install the
// package from npm do (scripts/checks/example-test.sh checks both).
const conditions = process.env.LOCAL_LLM_EXAMPLE_LIB === '1' ? [] : ['source'];

module.exports = mergeConfig(defaults, {
  watchFolders: [root],
  resolver: {
    unstable_conditionNames: [...conditions, ...defaults.resolver.unstable_conditionNames],
    blockList: [
      ...[defaults.resolver.blockList].flat(),
      ...peers.map((name) => under(`node_modules/${name}`)),
      // Rust build output and development files of the repository: nothing the app imports.
      ...['target', 'rust', 'tests', 'tools', '.cache', 'example/android', 'example/ios'].map(under),
    ],
    extraNodeModules: Object.fromEntries(peers.map((name) => [name, path.join(__dirname, 'node_modules', name)])),
  },
});
