#!/usr/bin/env bash
# The npm package as a user gets it:
#   1. npm pack (runs `prepare`: react-native-builder-bob writes lib/ from scratch)
#   2. the tarball's file list: what must be there, what must not, and the native libraries
#      (android/src/main/jniLibs/<ABI>/liblocal_llm_ffi.a, LocalLlmFramework.xcframework) whenever
#      the checkout has them; PACK_TEST_REQUIRE_NATIVE=1 makes missing ones an error
#   3. unpacked in a temp dir: `cargo metadata` (workspace = engine, ffi, zdnn-sys; locked
#      versions unchanged) and `cargo check -p local-llm-ffi`. `check`, not `build`: it
#      compiles every source file, runs build scripts and resolves every include of the shipped
#      crates, which is what packaging can break; code generation and linking add nothing about
#      the package and cost minutes (scripts/mobile/build-mobile.sh makes the real phone libraries).
#   4. a consumer project installs the tarball and type-checks (tsc --noEmit, strict, module
#      resolution as @react-native/typescript-config sets it) code using the public API;
#      `@ts-expect-error` lines fail if the package's types ever degrade to `any`. skipLibCheck
#      is on, as in React Native apps: ubrn's own declarations name the `NodeJS` namespace.
#   5. package.json's entry points (main, module, types, react-native, source, exports and
#      Node's resolution of them) and codegenConfig resolve to files in the installed package
# Usage: scripts/pack-test.sh. Needs node 20 + npm and cargo; the registry (npm, crates.io)
# only for what is not cached yet. Rust artifacts are kept in target/pack-test.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
START=$SECONDS
step() { echo "--- [$((SECONDS - START)) s] $*"; }
fail() {
    echo "ERROR: $*" >&2
    exit 1
}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/local-llm-pack-test.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
ABIS=(arm64-v8a armeabi-v7a x86_64 x86)

if [[ ! -x node_modules/.bin/bob ]]; then
    step "npm ci"
    npm ci --no-audit --no-fund
fi

step "npm pack (prepare: bob build)"
rm -rf lib
npm pack --pack-destination "$WORK" >"$WORK/pack.log" 2>&1 || {
    cat "$WORK/pack.log"
    fail "npm pack failed"
}
TGZ=$(ls "$WORK"/react-native-local-llm-*.tgz)
echo "$(basename "$TGZ"): $(du -k "$TGZ" | cut -f1) KiB"
tar tzf "$TGZ" | sed 's|^package/||' | sort >"$WORK/files.txt"
echo "$(wc -l <"$WORK/files.txt") files"

step "tarball contents"
REQUIRED=(
    package.json README.md Cargo.toml Cargo.lock ubrn.config.yaml uniffi.toml LocalLlm.podspec
    src/index.tsx src/api/index.ts src/native/NativeLocalLlm.ts src/generated/local_llm_ffi.ts
    lib/module/index.js lib/module/api/index.js lib/typescript/src/index.d.ts
    lib/typescript/src/api/index.d.ts
    rust/engine/Cargo.toml rust/engine/src/lib.rs rust/ffi/Cargo.toml rust/ffi/src/lib.rs
    rust/zdnn-sys/Cargo.toml rust/zdnn-sys/src/lib.rs rust/download/Cargo.toml rust/download/src/lib.rs
    cpp/react-native-local-llm.cpp cpp/generated/local_llm_ffi.cpp
    android/CMakeLists.txt android/build.gradle ios/LocalLlm.mm
)
for f in "${REQUIRED[@]}"; do
    grep -qxF "$f" "$WORK/files.txt" || fail "$f is missing from the tarball"
done
# Nothing for development only: the CLI, tests, scripts, tools, the example app, build output.
if grep -E '^(rust/cli/|rust/engine/tests/|rust/download/tests/|tests/|scripts/|tools/|example/|target/|node_modules/|\.cache/)|\.gguf$' \
    "$WORK/files.txt"; then
    fail "the files above must not be in the tarball"
fi
missing_native=()
for abi in "${ABIS[@]}"; do
    lib=android/src/main/jniLibs/$abi/liblocal_llm_ffi.a
    if [[ -f $lib ]]; then
        grep -qxF "$lib" "$WORK/files.txt" || fail "$lib exists but is not in the tarball"
        echo "ships $lib"
    else
        missing_native+=("$lib")
    fi
done
XCF=LocalLlmFramework.xcframework
if [[ -d $XCF ]]; then
    (cd "$ROOT" && find "$XCF" -type f | sort) >"$WORK/xcf.txt"
    [[ -s $WORK/xcf.txt ]] || fail "$XCF is empty"
    grep -qxF "$XCF/Info.plist" "$WORK/xcf.txt" || fail "$XCF has no Info.plist"
    comm -23 "$WORK/xcf.txt" "$WORK/files.txt" | grep . && fail "the files above of $XCF are not in the tarball"
    echo "ships $XCF ($(wc -l <"$WORK/xcf.txt") files)"
else
    missing_native+=("$XCF")
fi
if ((${#missing_native[@]} > 0)); then
    msg="not built here, so not in the tarball (npm run build:mobile makes them): ${missing_native[*]}"
    [[ ${PACK_TEST_REQUIRE_NATIVE:-0} == 1 ]] && fail "$msg"
    echo "NOTE: $msg"
fi

step "unpack; cargo metadata"
mkdir "$WORK/unpacked"
tar xzf "$TGZ" -C "$WORK/unpacked"
PKG=$WORK/unpacked/package
# npm stores every file with the same old mtime, which would make cargo reuse the
# target/pack-test results of an earlier tarball: give the sources a fresh one.
find "$PKG" -type f -exec touch {} +
cp "$PKG/Cargo.lock" "$WORK/Cargo.lock.shipped"
(cd "$PKG" && cargo metadata --format-version 1) >"$WORK/metadata.json"
node - "$WORK/metadata.json" <<'EOF'
const fs = require('fs');
const meta = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const names = meta.workspace_members
  .map((id) => meta.packages.find((p) => p.id === id).name)
  .sort();
const want = ['local-llm-download', 'local-llm-engine', 'local-llm-ffi', 'zdnn-sys'];
if (JSON.stringify(names) !== JSON.stringify(want)) {
  console.error(`workspace members ${names} != ${want}`);
  process.exit(1);
}
console.log(`workspace members: ${names.join(', ')}`);
EOF
# Without rust/cli, cargo drops the CLI's crates from Cargo.lock; every crate left must keep
# the version and checksum the repository pinned.
python3 - "$WORK/Cargo.lock.shipped" "$PKG/Cargo.lock" <<'EOF'
import sys, tomllib
def packages(path):
    with open(path, 'rb') as f:
        return {(p['name'], p['version']): p.get('checksum') for p in tomllib.load(f)['package']}
shipped, used = packages(sys.argv[1]), packages(sys.argv[2])
bad = [f'{n} {v}' for (n, v), c in used.items() if shipped.get((n, v), '?') != c]
if bad:
    sys.exit('crates not pinned by the shipped Cargo.lock: ' + ', '.join(bad))
print(f'{len(used)} crates resolved, all at the versions of the shipped Cargo.lock ({len(shipped) - len(used)} unused dropped)')
EOF
android_graph=$(cd "$PKG" && cargo tree -p local-llm-ffi --target aarch64-linux-android --prefix none -e normal | sort -u)
if grep -q '^zdnn-sys ' <<<"$android_graph"; then
    echo "ERROR: zdnn-sys is in the Android dependency graph (IBM Z code must stay out of phone libraries)" >&2
    exit 1
else
    echo "zdnn-sys is not in the Android dependency graph"
fi

step "cargo check -p local-llm-ffi in the unpacked package"
# The repository's target dir: the dependencies checked by `cargo clippy` are reused (only the
# unpacked workspace's own crates are new), which saves ~9 minutes on a cold CI machine.
(cd "$PKG" && CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}" nice cargo check --quiet -p local-llm-ffi)
echo "ok"

step "consumer project: npm install the tarball, tsc --noEmit (strict)"
TSC_VERSION=$(node -p "require('./node_modules/typescript/package.json').version")
mkdir "$WORK/consumer"
cat >"$WORK/consumer/package.json" <<EOF
{ "name": "consumer", "version": "1.0.0", "private": true, "type": "module" }
EOF
cat >"$WORK/consumer/tsconfig.json" <<'EOF'
{
  "compilerOptions": {
    "target": "ES2022",
    "lib": ["ES2022", "DOM"],
    "module": "ESNext",
    "moduleResolution": "Bundler",
    "customConditions": ["react-native"],
    "strict": true,
    "noEmit": true,
    "skipLibCheck": true,
    "types": []
  },
  "files": ["app.ts"]
}
EOF
cat >"$WORK/consumer/app.ts" <<'EOF'
import {
  LocalLLM,
  LocalLLMError,
  LocalLLMErrorCode,
  getBackends,
  getDeviceCapabilities,
  type BenchmarkResult,
  type ChatCompletionChunk,
  type ChatCompletionResponse,
  type ChatMessage,
  type EmbeddingResponse,
} from 'react-native-local-llm-rs';

export async function demo(path: string): Promise<string> {
  const ai: LocalLLM = await LocalLLM.create({ model: path, contextSize: 2048, embeddings: true });
  const messages: ChatMessage[] = [{ role: 'user', content: 'Hi' }];
  const res: ChatCompletionResponse = await ai.chat.completions.create({ messages, max_tokens: 16 });
  const total: number = res.usage.total_tokens;
  const controller = new AbortController();
  const stream = await ai.chat.completions.create({ messages, stream: true, signal: controller.signal });
  let text = res.choices[0].message.content;
  for await (const chunk of stream) {
    const c: ChatCompletionChunk = chunk;
    text += c.choices[0].delta.content ?? '';
  }
  const emb: EmbeddingResponse = await ai.embeddings.create({ input: ['a', 'b'] });
  const bench: BenchmarkResult = await ai.benchmark({ promptTokens: 32, generateTokens: 8 });
  const cpu = getBackends().find((b) => b.kind === 'cpu');
  const ram: number | null = getDeviceCapabilities().totalRAM;
  try {
    await LocalLLM.create({ model: 'https://example.com/m.gguf' });
  } catch (e) {
    if (e instanceof LocalLLMError && e.code === LocalLLMErrorCode.INVALID_PATH) {
      text += e.message;
    }
  }
  // The package's types must be precise: each line below is an error, and tsc fails on an
  // unused @ts-expect-error (as it would if the types were `any`).
  // @ts-expect-error max_tokens is a number
  await ai.chat.completions.create({ messages, max_tokens: 'many' });
  // @ts-expect-error a streamed completion has no `choices[0].message`
  (await ai.chat.completions.create({ messages, stream: true })).choices;
  // @ts-expect-error `model` is required
  await LocalLLM.create({ contextSize: 1 });
  ai.dispose();
  return `${text} ${total} ${emb.data.length} ${bench.generatedTokensPerSec} ${cpu?.name} ${ram}`;
}
EOF
(cd "$WORK/consumer" && npm install --no-audit --no-fund --legacy-peer-deps --prefer-offline \
    "$TGZ" "typescript@$TSC_VERSION" >"$WORK/consumer-install.log" 2>&1) || {
    cat "$WORK/consumer-install.log"
    fail "npm install of the tarball failed"
}
(cd "$WORK/consumer" && node_modules/.bin/tsc -p tsconfig.json) || fail "the consumer does not type-check"
echo "ok"

step "entry points and codegenConfig of the installed package"
(cd "$WORK/consumer" && node --input-type=module - <<'EOF'
import fs from 'node:fs';
import path from 'node:path';
const dir = path.resolve('node_modules/react-native-local-llm-rs');
const pkg = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8'));
const errors = [];
const exists = (what, rel) => {
  if (typeof rel !== 'string' || !fs.existsSync(path.join(dir, rel))) errors.push(`${what}: ${rel} does not exist`);
};
for (const key of ['main', 'module', 'types', 'react-native', 'source']) exists(key, pkg[key]);
const dot = pkg.exports?.['.'];
if (typeof dot !== 'object' || dot === null) errors.push('exports["."] is not a conditions object');
else for (const [cond, target] of Object.entries(dot)) exists(`exports["."].${cond}`, target);
exists('exports["./package.json"]', pkg.exports?.['./package.json']);
// Node's own resolution of the package name, default and `source` conditions.
const want = { default: pkg.exports['.'].default, source: pkg.exports['.'].source };
const resolved = import.meta.resolve('react-native-local-llm-rs');
if (resolved !== new URL(want.default, `file://${dir}/`).href) errors.push(`import resolves to ${resolved}`);
const cg = pkg.codegenConfig ?? {};
if (!/^[A-Za-z][A-Za-z0-9]*$/.test(cg.name ?? '')) errors.push(`codegenConfig.name ${cg.name}`);
if (cg.type !== 'modules') errors.push(`codegenConfig.type ${cg.type}`);
if (!/^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$/.test(cg.android?.javaPackageName ?? '')) {
  errors.push(`codegenConfig.android.javaPackageName ${cg.android?.javaPackageName}`);
}
const specs = fs.existsSync(path.join(dir, cg.jsSrcsDir ?? '-'))
  ? fs.readdirSync(path.join(dir, cg.jsSrcsDir)).filter((f) => /^Native\w+\.ts$/.test(f))
  : [];
if (specs.length === 0) errors.push(`codegenConfig.jsSrcsDir ${cg.jsSrcsDir} holds no Native*.ts spec`);
for (const f of specs) {
  const src = fs.readFileSync(path.join(dir, cg.jsSrcsDir, f), 'utf8');
  if (!/TurboModuleRegistry\.getEnforcing<Spec>\('\w+'\)/.test(src)) errors.push(`${f} is not a turbo module spec`);
}
if (errors.length > 0) {
  console.error(errors.join('\n'));
  process.exit(1);
}
console.log(`main/module/types/react-native/source/exports resolve; import -> ${path.relative(dir, new URL(resolved).pathname)}; codegen spec ${specs}`);
EOF
) || fail "entry points or codegenConfig"
(cd "$WORK/consumer" && node --conditions=source --input-type=module \
    -e "if (!import.meta.resolve('react-native-local-llm-rs').endsWith('/src/index.tsx')) process.exit(1)") ||
    fail "the source condition does not resolve to src/index.tsx"

step "pack test passed"
