#!/usr/bin/env bash
# The example app (example/), without an Android SDK, NDK or Xcode:
#   1. npm ci in the repository (the package's own dependencies) unless done, lib/ built from
#      the current src/ (npm run prepare), npm ci in example/
#   2. tsc --noEmit in example/ (strict, @react-native/typescript-config)
#   3. Metro production bundles for android and ios (react-native bundle --dev false); their
#      source maps must show the package's TypeScript source (src/, the `source` export
#      condition), no lib/ file, and one React Native: the app's; and one android bundle of
#      the built lib/module (what apps installing the package from npm bundle); each compiled
#      to Hermes bytecode by the app's hermes-compiler (hermesc -O), as release builds do
#   4. autolinking: `react-native config` finds the package's podspec, android/ and package class
#   5. React Native codegen over the package's spec (codegenConfig in package.json), the same
#      commands the Android gradle plugin (schema + generate-specs-cli with javaPackageName)
#      and pod install (generate-codegen-artifacts.js for the app) run; the generated specs
#      must declare every method, the package's Kotlin module and Objective-C class must
#      implement them, and the app's module provider must map the module to that class
# Usage: scripts/example-test.sh. Needs node >= 20.19.4 + npm and the npm registry (or cache).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
EX=$ROOT/example
START=$SECONDS
step() { echo "--- [$((SECONDS - START)) s] $*"; }
fail() {
    echo "ERROR: $*" >&2
    exit 1
}
OUT=$(mktemp -d "${TMPDIR:-/tmp}/local-llm-example-test.XXXXXX")
trap 'rm -rf "$OUT"' EXIT
cd "$ROOT"

if [[ ! -x node_modules/.bin/bob || ! -d node_modules/@ubjs/core ]]; then
    step "npm ci (repository)"
    npm ci --no-audit --no-fund
fi
# The example type-checks against lib/typescript and one bundle uses lib/module: build them
# from the current src/.
step "npm run prepare (bob build: lib/)"
npm run --silent prepare

step "npm ci (example)"
(cd "$EX" && npm ci --no-audit --no-fund)
[[ $(readlink -f "$EX/node_modules/react-native-local-llm-rs") == "$ROOT" ]] ||
    fail "example/node_modules/react-native-local-llm-rs is not the repository (file:..)"

step "tsc --noEmit (example)"
(cd "$EX" && node_modules/.bin/tsc --noEmit -p tsconfig.json)

for platform in android ios; do
    step "Metro production bundle: $platform"
    (cd "$EX" && npx react-native bundle --platform "$platform" --dev false --entry-file index.js \
        --bundle-output "$OUT/$platform.js" --sourcemap-output "$OUT/$platform.map" \
        --assets-dest "$OUT/assets-$platform" >"$OUT/bundle-$platform.log" 2>&1) || {
        cat "$OUT/bundle-$platform.log"
        fail "react-native bundle --platform $platform failed"
    }
    echo "$platform.js: $(du -k "$OUT/$platform.js" | cut -f1) KiB"
    node - "$OUT/$platform.map" "$OUT/$platform.js" "$ROOT" "$EX" <<'EOF'
const fs = require('fs');
const [map, bundle, root, ex] = process.argv.slice(2);
const sources = JSON.parse(fs.readFileSync(map, 'utf8')).sources;
const errors = [];
const want = ['src/index.tsx', 'src/native/index.tsx', 'src/native/NativeLocalLlm.ts', 'src/api/local-llm.ts',
  'src/api/chat.ts', 'src/generated/local_llm_ffi.ts', 'example/App.tsx', 'example/src/screens/ChatScreen.tsx'];
for (const f of want) if (!sources.includes(`${root}/${f}`)) errors.push(`${f} is not in the bundle`);
const lib = sources.filter((s) => s.startsWith(`${root}/lib/`));
if (lib.length > 0) errors.push(`built files instead of the source: ${lib.join(', ')}`);
const rn = sources.filter((s) => /\/node_modules\/react-native\/index\.js$/.test(s));
if (rn.length !== 1 || rn[0] !== `${ex}/node_modules/react-native/index.js`) errors.push(`React Native copies: ${rn}`);
if (!fs.readFileSync(bundle, 'utf8').includes('installRustCrate')) errors.push('the turbo module call is missing');
if (errors.length > 0) {
  console.error(errors.join('\n'));
  process.exit(1);
}
console.log(`${sources.length} modules; the package from ${root}/src; React Native from example/node_modules`);
EOF
    # What a release build does next (react-native's react-native-xcode.sh and the gradle
    # plugin's createBundleReleaseJsAndAssets): compile the bundle to Hermes bytecode with the
    # hermesc of the app's hermes-compiler package; a syntax Hermes lacks fails here.
    step "Hermes bytecode: $platform (hermes-compiler)"
    HERMESC=$EX/node_modules/hermes-compiler/hermesc/linux64-bin/hermesc
    [[ -x $HERMESC ]] || fail "$HERMESC is missing (hermes-compiler is a dependency of react-native)"
    "$HERMESC" -emit-binary -max-diagnostic-width=80 -O -out "$OUT/$platform.hbc" "$OUT/$platform.js" \
        >"$OUT/hermesc-$platform.log" 2>&1 || {
        cat "$OUT/hermesc-$platform.log"
        fail "hermesc could not compile the $platform bundle"
    }
    [[ $(head -c 4 "$OUT/$platform.hbc" | od -An -tx1 | tr -d ' \n') == c61fbc03 ]] ||
        fail "$platform.hbc is not Hermes bytecode"
    echo "$platform.hbc: $(du -k "$OUT/$platform.hbc" | cut -f1) KiB"
done

step "Metro production bundle: android, from the built lib/module (as apps installing from npm)"
(cd "$EX" && LOCAL_LLM_EXAMPLE_LIB=1 npx react-native bundle --platform android --dev false --entry-file index.js \
    --bundle-output "$OUT/lib.js" --sourcemap-output "$OUT/lib.map" --assets-dest "$OUT/assets-lib" \
    >"$OUT/bundle-lib.log" 2>&1) || {
    cat "$OUT/bundle-lib.log"
    fail "react-native bundle of lib/module failed"
}
node - "$OUT/lib.map" "$ROOT" <<'EOF'
const fs = require('fs');
const [map, root] = process.argv.slice(2);
const sources = JSON.parse(fs.readFileSync(map, 'utf8')).sources;
const pkg = sources.filter((s) => s.startsWith(`${root}/src/`) || s.startsWith(`${root}/lib/`));
const want = ['index.js', 'native/index.js', 'native/NativeLocalLlm.js', 'api/local-llm.js', 'generated/local_llm_ffi.js'];
const missing = want.filter((f) => !pkg.includes(`${root}/lib/module/${f}`));
const src = pkg.filter((s) => s.startsWith(`${root}/src/`));
if (missing.length > 0 || src.length > 0) {
  console.error(`lib/module files missing: ${missing}; source files instead: ${src}`);
  process.exit(1);
}
console.log(`${pkg.length} modules of the package, all from lib/module`);
EOF

step "autolinking (react-native config, what gradle and CocoaPods read)"
(cd "$EX" && npx react-native config >"$OUT/config.json" 2>"$OUT/config.log") || {
    cat "$OUT/config.log"
    fail "react-native config failed"
}
node - "$OUT/config.json" "$ROOT" <<'EOF'
const fs = require('fs');
const path = require('path');
const [file, root] = process.argv.slice(2);
const dep = JSON.parse(fs.readFileSync(file, 'utf8')).dependencies['react-native-local-llm-rs'];
const errors = [];
if (dep === undefined) {
  console.error('react-native-local-llm-rs is not autolinked');
  process.exit(1);
}
const real = (p) => (fs.existsSync(p) ? fs.realpathSync(p) : `missing ${p}`);
const { ios, android } = dep.platforms;
if (real(ios?.podspecPath ?? '') !== path.join(root, 'LocalLlm.podspec')) errors.push(`podspec ${ios?.podspecPath}`);
if (real(path.join(android?.sourceDir ?? '', 'build.gradle')) !== path.join(root, 'android/build.gradle')) {
  errors.push(`android sourceDir ${android?.sourceDir}`);
}
const cls = /^import ([\w.]+);$/.exec(android?.packageImportPath ?? '')?.[1] ?? '';
if (!fs.existsSync(path.join(root, 'android/src/main/java', `${cls.replace(/\./g, '/')}.kt`))) {
  errors.push(`android package class ${android?.packageImportPath}`);
}
const codegen = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')).codegenConfig;
if (android?.libraryName !== codegen.name) errors.push(`android libraryName ${android?.libraryName}`);
if (errors.length > 0) {
  console.error(errors.join('\n'));
  process.exit(1);
}
console.log(`autolinked: ${path.relative(root, real(ios.podspecPath))}, android/ with ${cls} (${android.libraryName})`);
EOF

step "codegen: android (as the gradle plugin runs it)"
CG=$EX/node_modules/@react-native/codegen
RN=$EX/node_modules/react-native
read -r LIBRARY JAVA_PACKAGE SPEC_DIR < <(node -p \
    "const c = require('$ROOT/package.json').codegenConfig; [c.name, c.android.javaPackageName, c.jsSrcsDir].join(' ')")
node "$CG/lib/cli/combine/combine-js-to-schema-cli.js" --platform android "$OUT/schema.json" "$ROOT/$SPEC_DIR"
node "$RN/scripts/generate-specs-cli.js" --platform android --schemaPath "$OUT/schema.json" \
    --outputDir "$OUT/codegen-android" --libraryName "$LIBRARY" --javaPackageName "$JAVA_PACKAGE"
JAVA=$OUT/codegen-android/java/${JAVA_PACKAGE//.//}/NativeLocalLlmSpec.java
for f in "$JAVA" "$OUT/codegen-android/jni/$LIBRARY.h" "$OUT/codegen-android/jni/$LIBRARY-generated.cpp"; do
    [[ -s $f ]] || fail "codegen did not write ${f#"$OUT"/}"
done
grep -q "^package $JAVA_PACKAGE;" "$JAVA" || fail "NativeLocalLlmSpec.java is not in package $JAVA_PACKAGE"
METHODS=$(sed -n 's/.*public abstract [a-zA-Z]* \([a-zA-Z]*\)(.*/\1/p' "$JAVA" | sort)
[[ -n $METHODS ]] || fail "NativeLocalLlmSpec.java declares no methods"
for m in $METHODS; do
    grep -q "override fun $m(" "$ROOT"/android/src/main/java/${JAVA_PACKAGE//.//}/*.kt ||
        fail "the Kotlin module does not implement $m of the spec"
done
echo "NativeLocalLlmSpec ($JAVA_PACKAGE): $(echo $METHODS), implemented by the Kotlin module"

step "codegen: ios (as pod install runs it for the app)"
node "$RN/scripts/generate-codegen-artifacts.js" -p "$EX" -t ios -o "$OUT/codegen-ios" \
    >"$OUT/codegen-ios.log" 2>&1 || {
    cat "$OUT/codegen-ios.log"
    fail "iOS codegen failed"
}
H=$(find "$OUT/codegen-ios" -path "*/$LIBRARY/$LIBRARY.h")
[[ -n $H ]] || fail "codegen did not write $LIBRARY/$LIBRARY.h"
[[ -n $(find "$OUT/codegen-ios" -name "$LIBRARY-generated.mm") ]] || fail "codegen did not write $LIBRARY-generated.mm"
grep -q "@protocol NativeLocalLlmSpec" "$H" || fail "$LIBRARY.h has no NativeLocalLlmSpec protocol"
for m in $METHODS; do
    grep -q -- "- (.*)$m" "$H" || fail "$LIBRARY.h does not declare $m"
    grep -q -- "- (.*)$m" "$ROOT/ios/LocalLlm.mm" || fail "ios/LocalLlm.mm does not implement $m"
done
grep -q "#import \"$LIBRARY.h\"" "$ROOT/ios/LocalLlm.h" || fail "ios/LocalLlm.h does not import $LIBRARY.h"
echo "$LIBRARY.h: protocol NativeLocalLlmSpec with $(echo $METHODS), implemented by ios/LocalLlm.mm"
# The app finds the module's class through RCTModuleProviders (codegenConfig.ios.modulesProvider).
MODULE=$(sed -n "s/.*getEnforcing<Spec>('\([A-Za-z]*\)').*/\1/p" "$ROOT/$SPEC_DIR/NativeLocalLlm.ts")
CLASS=$(sed -n 's/^@interface \([A-Za-z]*\) : NSObject <NativeLocalLlmSpec>.*/\1/p' "$ROOT/ios/LocalLlm.h")
PROVIDERS=$(find "$OUT/codegen-ios" -name RCTModuleProviders.mm)
[[ -n $MODULE && -n $CLASS && -n $PROVIDERS ]] || fail "module name '$MODULE', class '$CLASS', RCTModuleProviders.mm '$PROVIDERS'"
grep -qF "@\"$MODULE\": @\"$CLASS\"" "$PROVIDERS" || fail "RCTModuleProviders.mm does not map $MODULE to $CLASS"
echo "RCTModuleProviders.mm: $MODULE -> $CLASS"

step "example test passed"
