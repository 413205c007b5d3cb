// The Expo config plugin of react-native-local-llm-rs (loaded through ../app.plugin.js). Autolinking
// already adds the native module; this plugin makes an Expo prebuild app build and run it:
//   Android: the ABIs the app builds (`reactNativeArchitectures`) must be ones the prebuilt Rust
//     library exists for (CMake stops otherwise), and minSdk at least 24 (what it is built for).
//   iOS: the increased-memory-limit and extended-virtual-addressing entitlements, so that a
//     model of a few GB can be mapped and run without the app being killed for its memory.
// It warns at prebuild time when the prebuilt libraries (scripts/mobile/build-mobile.sh) are missing.
// CommonJS (.cjs in this ESM package): Expo loads app.plugin.js by transpiling it to CommonJS
// and `require`s what it imports; requiring an ES module fails on Node 20 (expo 57's prebuild:
// ERR_INTERNAL_ASSERTION "Cannot require() ES Module ... not yet fully loaded").
'use strict';
const { existsSync, readFileSync } = require('node:fs');
const { join } = require('node:path');
const {
  createRunOncePlugin,
  withEntitlementsPlist,
  withGradleProperties,
  WarningAggregator,
} = require('@expo/config-plugins');

/** The package's root folder. */
const PACKAGE_ROOT = join(__dirname, '..');
const PACKAGE = JSON.parse(readFileSync(join(PACKAGE_ROOT, 'package.json'), 'utf8'));

/** The Android ABIs the Rust library is built for (ubrn.config.yaml, scripts/mobile/build-mobile.sh). */
const ANDROID_ABIS = ['arm64-v8a', 'armeabi-v7a', 'x86_64', 'x86'];
/** The lowest Android API level the Rust library is built for. */
const MIN_SDK = 24;
/** The iOS entitlements the plugin adds (Apple's names). */
const MEMORY_ENTITLEMENTS = [
  'com.apple.developer.kernel.increased-memory-limit',
  'com.apple.developer.kernel.extended-virtual-addressing',
];

const OPTION_NAMES = new Set(['android', 'ios']);

/**
 * The plugin's options, checked: unknown names and bad values throw (prebuild then stops with
 * the message).
 * @param {unknown} options
 * @returns {{ abis: string[] | undefined, memoryEntitlements: boolean }}
 */
function parseOptions(options) {
  const o = options ?? {};
  const fail = (what) => {
    throw new Error(`react-native-local-llm-rs config plugin: ${what}`);
  };
  if (typeof o !== 'object' || Array.isArray(o)) fail('options must be an object');
  for (const key of Object.keys(o)) {
    if (!OPTION_NAMES.has(key)) fail(`unknown option '${key}' (known: android.abis, ios.memoryEntitlements)`);
  }
  const android = o.android ?? {};
  const ios = o.ios ?? {};
  for (const key of Object.keys(android)) if (key !== 'abis') fail(`unknown option 'android.${key}'`);
  for (const key of Object.keys(ios)) if (key !== 'memoryEntitlements') fail(`unknown option 'ios.${key}'`);
  let abis;
  if (android.abis !== undefined) {
    if (!Array.isArray(android.abis) || android.abis.length === 0) {
      fail(`android.abis must be a non-empty array of ${ANDROID_ABIS.join(', ')}`);
    }
    for (const abi of android.abis) {
      if (!ANDROID_ABIS.includes(abi)) fail(`android.abis: '${abi}' is not one of ${ANDROID_ABIS.join(', ')}`);
    }
    abis = [...new Set(android.abis)];
  }
  if (ios.memoryEntitlements !== undefined && typeof ios.memoryEntitlements !== 'boolean') {
    fail('ios.memoryEntitlements must be a boolean');
  }
  return { abis, memoryEntitlements: ios.memoryEntitlements ?? true };
}

/** @param {import('@expo/config-plugins').ExportedConfig} config */
function withAndroid(config, abis) {
  return withGradleProperties(config, (c) => {
    const props = c.modResults;
    const set = (key, value) => {
      const item = props.find((p) => p.type === 'property' && p.key === key);
      if (item) item.value = value;
      else props.push({ type: 'property', key, value });
    };
    const get = (key) => props.find((p) => p.type === 'property' && p.key === key)?.value;
    if (abis !== undefined) {
      set('reactNativeArchitectures', abis.join(','));
    }
    const minSdk = Number.parseInt(get('android.minSdkVersion') ?? '', 10);
    if (Number.isFinite(minSdk) && minSdk < MIN_SDK) {
      set('android.minSdkVersion', String(MIN_SDK));
    }
    const built = (get('reactNativeArchitectures') ?? ANDROID_ABIS.join(','))
      .split(',')
      .map((a) => a.trim())
      .filter((a) => a !== '');
    const missing = built.filter(
      (abi) => !existsSync(join(PACKAGE_ROOT, 'android/src/main/jniLibs', abi, 'liblocal_llm_ffi.a')),
    );
    if (missing.length > 0) {
      WarningAggregator.addWarningAndroid(
        'react-native-local-llm-rs',
        `the prebuilt Rust library is missing for ${missing.join(', ')}: run \`npm run build:mobile -- ${missing.join(' ')}\` ` +
          'in react-native-local-llm-rs, or build fewer ABIs with the plugin option android.abis',
      );
    }
    return c;
  });
}

/** @param {import('@expo/config-plugins').ExportedConfig} config */
function withIos(config, memoryEntitlements) {
  if (!existsSync(join(PACKAGE_ROOT, 'LocalLlmFramework.xcframework', 'Info.plist'))) {
    WarningAggregator.addWarningIOS(
      'react-native-local-llm-rs',
      'LocalLlmFramework.xcframework is missing: run `npm run build:mobile -- ios` in react-native-local-llm-rs before `pod install`',
    );
  }
  if (!memoryEntitlements) {
    return config;
  }
  return withEntitlementsPlist(config, (c) => {
    for (const key of MEMORY_ENTITLEMENTS) {
      c.modResults[key] = true;
    }
    return c;
  });
}

/**
 * The config plugin: `plugins: ['react-native-local-llm-rs']` or
 * `['react-native-local-llm-rs', { android: { abis: ['arm64-v8a'] }, ios: { memoryEntitlements: false } }]`.
 * @type {import('@expo/config-plugins').ConfigPlugin<{ android?: { abis?: string[] }, ios?: { memoryEntitlements?: boolean } } | void>}
 */
function withLocalLlm(config, options) {
  const { abis, memoryEntitlements } = parseOptions(options);
  return withIos(withAndroid(config, abis), memoryEntitlements);
}

module.exports = createRunOncePlugin(withLocalLlm, PACKAGE.name, PACKAGE.version);
