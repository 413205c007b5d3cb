// The Expo config plugin (app.plugin.js) evaluated by Expo's own config tooling, as
// `expo prebuild` / `expo config --type introspect` do: an app in a temporary folder lists the
// plugin in app.json and resolves this package through node_modules; @expo/config reads the
// config and runs the plugins, @expo/config-plugins compiles the mods in introspection mode (no
// native folders written) and we read the native files' contents it would write.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { getConfig } from '@expo/config';
import { compileModsAsync, withGradleProperties, withPlugins } from '@expo/config-plugins';
import type { ExpoConfig } from '@expo/config-types';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const ENTITLEMENTS = [
  'com.apple.developer.kernel.increased-memory-limit',
  'com.apple.developer.kernel.extended-virtual-addressing',
];
const apps: string[] = [];
after(() => apps.forEach((a) => rmSync(a, { recursive: true, force: true })));

/** An Expo app folder whose app.json lists `plugins`, with this package in its node_modules. */
function app(plugins: unknown[]): string {
  const root = mkdtempSync(join(tmpdir(), 'local-llm-expo-'));
  apps.push(root);
  mkdirSync(join(root, 'node_modules'));
  symlinkSync(ROOT, join(root, 'node_modules', 'react-native-local-llm-rs'), 'dir');
  writeFileSync(
    join(root, 'package.json'),
    JSON.stringify({ name: 'demo', version: '1.0.0', dependencies: { 'react-native-local-llm-rs': '*' } }),
  );
  const expo = {
    name: 'demo',
    slug: 'demo',
    ios: { bundleIdentifier: 'com.example.demo' },
    android: { package: 'com.example.demo' },
    plugins,
  };
  writeFileSync(join(root, 'app.json'), JSON.stringify({ expo }));
  return root;
}

type ModResults = {
  ios: { entitlements: Record<string, unknown> };
  android: { gradleProperties: Array<{ type: string; key?: string; value?: string }> };
};

/** What prebuild would write for `config` (introspection: nothing is written). */
async function introspect(root: string, config?: ExpoConfig): Promise<ModResults> {
  const exp = config ?? getConfig(root, { skipSDKVersionRequirement: true, isModdedConfig: true }).exp;
  const out = await compileModsAsync(exp, {
    projectRoot: root,
    platforms: ['ios', 'android'],
    introspect: true,
    assertMissingModProviders: false,
  });
  return (out as unknown as { _internal: { modResults: ModResults } })._internal.modResults;
}

const prop = (r: ModResults, key: string) =>
  r.android.gradleProperties.find((p) => p.type === 'property' && p.key === key)?.value;

test('the plugin resolves by package name and adds the memory entitlements; ABIs are left alone by default', async () => {
  const root = app(['react-native-local-llm-rs']);
  const { exp } = getConfig(root, { skipSDKVersionRequirement: true, isModdedConfig: true });
  const history = (exp._internal as { pluginHistory: Record<string, { version: string }> }).pluginHistory;
  assert.equal(history['react-native-local-llm-rs']?.version, '0.1.0');
  const r = await introspect(root, exp);
  for (const key of ENTITLEMENTS) {
    assert.equal(r.ios.entitlements[key], true, key);
  }
  assert.equal(prop(r, 'reactNativeArchitectures'), undefined);
});

test('options: android.abis sets reactNativeArchitectures; ios.memoryEntitlements false adds none', async () => {
  const root = app([
    [
      'react-native-local-llm-rs',
      { android: { abis: ['arm64-v8a', 'x86_64', 'arm64-v8a'] }, ios: { memoryEntitlements: false } },
    ],
  ]);
  const r = await introspect(root);
  assert.equal(prop(r, 'reactNativeArchitectures'), 'arm64-v8a,x86_64');
  for (const key of ENTITLEMENTS) {
    assert.equal(r.ios.entitlements[key], undefined, key);
  }
});

test('a minSdk below 24 set by an earlier plugin is raised; a higher one is kept', async () => {
  for (const [given, expected] of [
    ['21', '24'],
    ['26', '26'],
  ]) {
    const root = app([]);
    const { exp } = getConfig(root, { skipSDKVersionRequirement: true, isModdedConfig: true });
    const setMinSdk = (c: ExpoConfig) =>
      withGradleProperties(c, (m) => {
        m.modResults.push({ type: 'property', key: 'android.minSdkVersion', value: given });
        return m;
      });
    const config = withPlugins(exp, ['react-native-local-llm-rs', setMinSdk]);
    const r = await introspect(root, config);
    assert.equal(prop(r, 'android.minSdkVersion'), expected, `given ${given}`);
  }
});

test('listed twice, the plugin runs once', async () => {
  const root = app(['react-native-local-llm-rs', ['react-native-local-llm-rs', { android: { abis: ['x86'] } }]]);
  const r = await introspect(root);
  assert.equal(prop(r, 'reactNativeArchitectures'), undefined);
});

test('bad options stop the config evaluation with a message naming them', () => {
  const cases: Array<[unknown, RegExp]> = [
    [{ androd: {} }, /unknown option 'androd'/],
    [{ android: { abis: ['mips'] } }, /android\.abis: 'mips' is not one of/],
    [{ android: { abis: [] } }, /non-empty array/],
    [{ android: { minSdk: 21 } }, /unknown option 'android\.minSdk'/],
    [{ ios: { memoryEntitlements: 'yes' } }, /ios\.memoryEntitlements must be a boolean/],
    ['arm64', /options must be an object/],
  ];
  for (const [options, message] of cases) {
    const root = app([['react-native-local-llm-rs', options]]);
    assert.throws(() => getConfig(root, { skipSDKVersionRequirement: true, isModdedConfig: true }), message);
  }
});

test('prebuild warns about each ABI whose prebuilt Rust library is missing', async () => {
  const abis = ['arm64-v8a', 'x86'];
  const root = app([['react-native-local-llm-rs', { android: { abis } }]]);
  const warnings: string[] = [];
  // WarningAggregator prints prebuild's warnings with console.warn.
  const original = console.warn;
  console.warn = (text: unknown) => {
    if (String(text).includes('android: react-native-local-llm-rs')) warnings.push(String(text));
  };
  try {
    await introspect(root);
  } finally {
    console.warn = original;
  }
  const missing = abis.filter((abi) => !existsSync(join(ROOT, 'android/src/main/jniLibs', abi, 'liblocal_llm_ffi.a')));
  if (missing.length === 0) {
    assert.equal(warnings.length, 0);
  } else {
    assert.equal(warnings.length, 1, warnings.join('\n'));
    assert.match(
      warnings[0],
      new RegExp(`missing for ${missing.join(', ')}: run \`npm run build:mobile -- ${missing.join(' ')}\``),
    );
  }
});
