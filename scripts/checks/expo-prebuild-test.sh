#!/usr/bin/env bash
# The Expo config plugin (app.plugin.js) under the real `expo prebuild` (expo 57.0.33, the SDK
# of the example's react-native 0.86.3; no Android SDK, Xcode or CocoaPods needed):
#   1. npm ci of tools/expo-app (expo, react, react-native; install scripts off) into
#      ${LOCAL_LLM_CACHE:-~/.cache/local-llm}/expo-app, redone only when its lock file changes
#   2. the package as an app installing it sees it: package.json, app.plugin.js and plugin/
#      copied into the app's node_modules/react-native-local-llm-rs (resolved through the app's
#      node_modules, like an npm install)
#   3. `expo prebuild --no-install --clean` writes android/ and ios/ for three app.json files:
#      a. plugin with android.abis [arm64-v8a, x86_64], after it an app plugin that sets
#         android.minSdkVersion 21: gradle.properties must have reactNativeArchitectures
#         arm64-v8a,x86_64 and android.minSdkVersion 24; the iOS entitlements file both memory
#         entitlements (true); the plugin's warning names the ABIs whose library is missing
#      b. ios.memoryEntitlements false: neither entitlement; no ABI or minSdk change
#      c. an unknown ABI: prebuild fails and names it
# Usage: scripts/checks/expo-prebuild-test.sh (LOCAL_LLM_SKIP_EXPO=1 in scripts/test.sh skips it).
# Needs node >= 20.19.4 + npm and the npm registry (or npm's cache) for step 1.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
START=$SECONDS
step() { echo "--- [$((SECONDS - START)) s] $*"; }
fail() {
    echo "ERROR: $*" >&2
    exit 1
}
APP=${LOCAL_LLM_CACHE:-$HOME/.cache/local-llm}/expo-app
SRC=$ROOT/tools/expo-app
OUT=$(mktemp -d "${TMPDIR:-/tmp}/local-llm-expo-prebuild.XXXXXX")
trap 'rm -rf "$OUT"' EXIT

LOCK_SHA=$(sha256sum "$SRC/package-lock.json" | cut -d' ' -f1)
if [[ $(cat "$APP/.lock-sha256" 2>/dev/null) != "$LOCK_SHA" ]]; then
    step "npm ci (tools/expo-app: expo 57) into $APP"
    rm -rf "$APP"
    mkdir -p "$APP"
    cp "$SRC/package.json" "$SRC/package-lock.json" "$APP/"
    (cd "$APP" && npm ci --no-audit --no-fund --ignore-scripts)
    echo "$LOCK_SHA" >"$APP/.lock-sha256"
fi

step "the package in the app's node_modules (package.json, app.plugin.js, plugin/)"
PKG=$APP/node_modules/react-native-local-llm-rs
rm -rf "$PKG"
mkdir -p "$PKG"
cp -r "$ROOT/package.json" "$ROOT/app.plugin.js" "$ROOT/plugin" "$PKG/"
cat >"$APP/index.js" <<'EOF'
import { registerRootComponent } from 'expo';
registerRootComponent(() => null);
EOF
# An app plugin that lowers minSdk, listed after ours (its mods run first), as an earlier
# plugin or expo-build-properties would.
cat >"$APP/min-sdk-21.js" <<'EOF'
const { withGradleProperties } = require('@expo/config-plugins');
module.exports = (config) =>
  withGradleProperties(config, (c) => {
    c.modResults = c.modResults.filter((p) => p.key !== 'android.minSdkVersion');
    c.modResults.push({ type: 'property', key: 'android.minSdkVersion', value: '21' });
    return c;
  });
EOF

# prebuild NAME PLATFORM PLUGINS_JSON: run expo prebuild on an app.json listing PLUGINS_JSON;
# its output goes to $OUT/NAME.log; returns prebuild's status.
prebuild() {
    local name=$1 platform=$2 plugins=$3
    cp "$SRC/package.json" "$APP/package.json"
    cat >"$APP/app.json" <<EOF
{ "expo": { "name": "demo", "slug": "demo", "version": "1.0.0",
  "ios": { "bundleIdentifier": "com.example.demo" }, "android": { "package": "com.example.demo" },
  "plugins": $plugins } }
EOF
    (cd "$APP" && CI=1 EXPO_NO_TELEMETRY=1 EXPO_NO_GIT_STATUS=1 \
        npx expo prebuild --no-install --clean --platform "$platform") >"$OUT/$name.log" 2>&1
}
prop() { sed -n "s/^$1=//p" "$APP/android/gradle.properties"; }
entitlement() { # KEY: the value element after <key>KEY</key> in the app's entitlements file
    local file
    file=$(find "$APP/ios" -name '*.entitlements' | head -1)
    [[ -n $file ]] || fail "prebuild wrote no .entitlements file under ios/"
    grep -A1 "<key>$1</key>" "$file" | sed -n '2s/^[[:space:]]*//p'
}
MEMORY=(com.apple.developer.kernel.increased-memory-limit com.apple.developer.kernel.extended-virtual-addressing)

step "prebuild a: android.abis [arm64-v8a, x86_64] + an app plugin setting minSdk 21 (android, ios)"
prebuild a all '[["react-native-local-llm-rs", { "android": { "abis": ["arm64-v8a", "x86_64"] } }], "./min-sdk-21.js"]' || {
    cat "$OUT/a.log"
    fail "expo prebuild failed"
}
grep -q "Finished prebuild" "$OUT/a.log" || fail "prebuild did not finish: $(cat "$OUT/a.log")"
[[ $(prop reactNativeArchitectures) == arm64-v8a,x86_64 ]] ||
    fail "android/gradle.properties: reactNativeArchitectures=$(prop reactNativeArchitectures)"
[[ $(prop android.minSdkVersion) == 24 ]] || fail "android/gradle.properties: android.minSdkVersion=$(prop android.minSdkVersion)"
for key in "${MEMORY[@]}"; do
    [[ $(entitlement "$key") == '<true/>' ]] || fail "ios entitlements: $key is '$(entitlement "$key")'"
done
missing=()
for abi in arm64-v8a x86_64; do
    [[ -f $PKG/android/src/main/jniLibs/$abi/liblocal_llm_ffi.a ]] || missing+=("$abi")
done
if [[ ${#missing[@]} -gt 0 ]]; then
    want=$(printf '%s, ' "${missing[@]}")
    grep -qF "prebuilt Rust library is missing for ${want%, }:" "$OUT/a.log" ||
        fail "no warning about the missing libraries (${missing[*]}): $(cat "$OUT/a.log")"
fi
echo "android/gradle.properties: reactNativeArchitectures=$(prop reactNativeArchitectures)," \
    "android.minSdkVersion=$(prop android.minSdkVersion) (21 raised); ios entitlements: ${MEMORY[*]}"

step "prebuild b: ios.memoryEntitlements false (android, ios)"
prebuild b all '[["react-native-local-llm-rs", { "ios": { "memoryEntitlements": false } }]]' || {
    cat "$OUT/b.log"
    fail "expo prebuild failed"
}
for key in "${MEMORY[@]}"; do
    [[ -z $(entitlement "$key") ]] || fail "ios entitlements: $key is present"
done
TEMPLATE_ABIS=$(prop reactNativeArchitectures)
[[ $TEMPLATE_ABIS == *arm64-v8a* && $TEMPLATE_ABIS == *x86* ]] ||
    fail "android/gradle.properties: the template's reactNativeArchitectures changed: $TEMPLATE_ABIS"
[[ -z $(prop android.minSdkVersion) ]] || fail "android.minSdkVersion=$(prop android.minSdkVersion) was set"
echo "no entitlements; reactNativeArchitectures left at the template's $TEMPLATE_ABIS"

step "prebuild c: an unknown ABI fails"
if prebuild c android '[["react-native-local-llm-rs", { "android": { "abis": ["mips"] } }]]'; then
    fail "expo prebuild accepted android.abis ['mips']"
fi
grep -q "android.abis: 'mips' is not one of" "$OUT/c.log" || fail "the failure does not name the ABI: $(cat "$OUT/c.log")"
echo "prebuild failed: $(grep -o "android.abis: 'mips' is not one of[^\"]*" "$OUT/c.log" | head -1)"

rm -rf "$APP/android" "$APP/ios"
step "expo prebuild test passed"
