// Drop-in compatibility with local-llm-rn, judged by local-llm-rn itself.
//
// At test time this fetches the published packages (`npm pack local-llm-rn@1.0.3
// local-llm-js-core@0.3.0`, cached under ~/.cache/local-llm/anchors), extracts every TypeScript
// example from local-llm-rn's README and from the doc comments of its sources, and compiles each
// one with `tsc --strict` twice: against local-llm-rn's own types (the oracle) and against this
// package (the import pointed at src/index.tsx). Every example that compiles against
// local-llm-rn must compile against us. The examples that need nothing but a model file are then
// run on the real engine. Every TypeScript block of our own README and docs must compile too.
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import ts from 'typescript';

import * as native from './generated/napi/local_llm_ffi.ts';
import { setBindings, type Bindings } from '../src/api/index.ts';
import { defaultModel } from './helpers.mts';

setBindings(native as unknown as Bindings);

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const OUR_ENTRY = join(ROOT, 'src/index.tsx');
const OUR_API = join(ROOT, 'src/api/index.ts');
const ANCHORS = join(process.env.LOCAL_LLM_CACHE ?? join(homedir(), '.cache/local-llm'), 'anchors');
const RN = 'local-llm-rn-1.0.3';
const CORE = 'local-llm-js-core-0.3.0';

/** `npm pack` the anchors once into the cache and unpack them (`<dir>/package/...`). */
function fetchAnchors(): void {
  for (const name of [RN, CORE]) {
    const dir = join(ANCHORS, name);
    if (existsSync(join(dir, 'package/package.json'))) continue;
    mkdirSync(dir, { recursive: true });
    const spec = name.replace(/-(\d+\.\d+\.\d+)$/, '@$1');
    execFileSync('npm', ['pack', spec, '--pack-destination', dir, '--silent'], { stdio: 'pipe' });
    const tgz = readdirSync(dir).find((f) => f.endsWith('.tgz'));
    assert.ok(tgz, `npm pack ${spec} wrote no tarball`);
    execFileSync('tar', ['-xzf', join(dir, tgz), '-C', dir]);
  }
}

/** One example: where it comes from and its code. */
interface Example {
  origin: string;
  code: string;
}

/** The fenced ts/typescript/tsx blocks of a markdown text. */
function markdownBlocks(text: string, origin: string): Example[] {
  const out: Example[] = [];
  const re = /^```(ts|typescript|tsx)\s*\n([\s\S]*?)^```/gm;
  for (let m = re.exec(text); m; m = re.exec(text)) {
    const line = text.slice(0, m.index).split('\n').length;
    out.push({ origin: `${origin}:${line}`, code: m[2] });
  }
  return out;
}

/** The ```ts blocks inside the doc comments of a TypeScript source (` * ` prefixes removed). */
function docCommentBlocks(text: string, origin: string): Example[] {
  const stripped = text
    .split('\n')
    .map((l) => l.replace(/^\s*\*\s?/, ''))
    .join('\n');
  return markdownBlocks(stripped, origin);
}

/** Names an example may use without importing them (the README's own sections import them once). */
const PACKAGE_NAMES = [
  'LocalLLM',
  'LocalLLMError',
  'LocalLLMErrorCode',
  'ModelManager',
  'getDeviceCapabilities',
  'canRunModel',
  'recommendQuantization',
];

/**
 * An example as a module: its imports (package name replaced by `pkg`) at the top, the names it
 * uses but does not import, the free variables the README's fragments rely on (`ai`, `response`,
 * `modelPath`, `setText`) declared with the package's own types, and its statements in an async
 * function (the README awaits at top level).
 */
function asModule(code: string, pkg: string): string {
  const importRe = /^import\s[\s\S]*?from\s+['"][^'"]+['"];?[ \t]*$/gm;
  const imports = (code.match(importRe) ?? []).map((i) =>
    i.replace(/from\s+['"](local-llm-rn|react-native-local-llm-rs)['"]/, `from '${pkg}'`),
  );
  const body = code.replace(importRe, '');
  const imported = new Set(imports.flatMap((i) => [...i.matchAll(/\b([A-Za-z_$][\w$]*)\b/g)].map((m) => m[1])));
  const missing = PACKAGE_NAMES.filter((n) => !imported.has(n) && new RegExp(`\\b${n}\\b`).test(body));
  const streamed = /for await \(const \w+ of response\)/.test(body);
  return [
    ...imports,
    `import * as __pkg from '${pkg}';`,
    missing.length ? `import { ${missing.join(', ')} } from '${pkg}';` : '',
    'declare const modelPath: string;',
    'declare function setText(update: (text: string) => string): void;',
    'declare const ai: Awaited<ReturnType<typeof __pkg.LocalLLM.create>>;',
    `const __response = () => ai.chat.completions.create({ messages: [{ role: 'user', content: 'Hi' }]${streamed ? ', stream: true' : ''} });`,
    'declare const response: Awaited<ReturnType<typeof __response>>;',
    'export async function __example(): Promise<void> {',
    body,
    '}',
  ].join('\n');
}

/** Compile `files` (name → source) with tsc --strict; the diagnostics of each file, as text. */
function compile(files: Map<string, string>, paths: Record<string, string[]>): Map<string, string[]> {
  // Inside the repository, so that the examples' own imports (ai, zod, react) resolve.
  const dir = mkdtempSync(join(ROOT, 'tests', '.compat-'));
  try {
    const names = [...files].map(([name, src]) => {
      const path = join(dir, name);
      writeFileSync(path, src);
      return path;
    });
    const program = ts.createProgram(names, {
      strict: true,
      noEmit: true,
      skipLibCheck: true,
      target: ts.ScriptTarget.ES2022,
      lib: ['lib.es2022.d.ts', 'lib.dom.d.ts'],
      module: ts.ModuleKind.ESNext,
      moduleResolution: ts.ModuleResolutionKind.Bundler,
      jsx: ts.JsxEmit.ReactJSX,
      esModuleInterop: true,
      allowImportingTsExtensions: true,
      resolveJsonModule: true,
      types: ['node'],
      typeRoots: [join(ROOT, 'node_modules/@types')],
      paths: { 'react-native': [join(ROOT, 'node_modules/react-native')], ...paths },
    });
    const out = new Map<string, string[]>();
    for (const [i, name] of [...files.keys()].entries()) {
      const sf = program.getSourceFile(names[i]);
      assert.ok(sf, `tsc did not read ${name}`);
      const diags = [...program.getSyntacticDiagnostics(sf), ...program.getSemanticDiagnostics(sf)];
      out.set(
        name,
        diags.map((d) => {
          const { line } =
            d.file && d.start !== undefined ? d.file.getLineAndCharacterOfPosition(d.start) : { line: 0 };
          return `line ${line + 1}: TS${d.code} ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`;
        }),
      );
    }
    return out;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * local-llm-rn's public surface against ours, one line per check: what an app passes in
 * (options, messages, requests) must be accepted by us, what it reads back (results, errors,
 * device data) must have local-llm-rn's type, and every static and instance member exists
 * with a signature local-llm-rn's callers can use.
 */
const SURFACE = `
import type * as T from 'local-llm-rn';
import type * as C from 'local-llm-js-core';
import type * as O from 'react-native-local-llm-rs';
import { LocalLLM as TL, LocalLLMErrorCode as TE } from 'local-llm-rn';
import { LocalLLM as OL, LocalLLMErrorCode as OE } from 'react-native-local-llm-rs';
import * as TN from 'local-llm-rn';
import * as ON from 'react-native-local-llm-rs';
declare const t: TL;
declare const o: OL;
declare function take<X>(x: X): void;
declare function give<X>(): X;
type Params<F> = F extends (...a: infer P) => unknown ? P : never;
type CreateParams = Params<typeof t.chat.completions.create>[0];
// What an app passes in.
take<O.LocalLLMOptions>(give<T.LocalLLMOptions>());
take<O.ChatMessage>(give<T.ChatMessage>());
take<O.ContentPart>(give<T.ContentPart>());
take<O.ComputeMode>(give<T.ComputeMode>());
take<O.GenerateOptions>(give<T.GenerateOptions>());
take<O.FlashAttentionMode>(give<T.FlashAttentionMode>());
take<O.KvCacheType>(give<T.KvCacheType>());
take<O.ContextOverflowStrategy>(give<T.ContextOverflowStrategy>());
take<O.ContextOverflowConfig>(give<T.ContextOverflowConfig>());
take<O.EmbeddingPoolingType>(give<T.EmbeddingPoolingType>());
take<O.ResponseFormat>(give<T.ResponseFormat>());
take<O.ChatCompletionTool>(give<T.ChatCompletionTool>());
take<O.ChatCompletionToolChoice>(give<T.ChatCompletionToolChoice>());
take<O.ModelOptions>(give<T.ModelOptions>());
take<O.ContextOptions>(give<T.ContextOptions>());
take<O.EmbeddingContextOptions>(give<T.EmbeddingContextOptions>());
take<O.QuantizationType>(give<T.QuantizationType>());
take<O.QuantizeOptions>(give<T.QuantizeOptions>());
take<O.BenchmarkOptions>(give<T.BenchmarkOptions>());
take<O.DownloadOptions>(give<T.DownloadOptions>());
take<O.DownloadAdapter>(give<T.DownloadAdapter>());
take<Params<typeof o.chat.completions.create>[0]>(give<C.ChatCompletionRequest & { stream?: false }>());
take<Params<typeof o.chat.completions.create>[0]>(give<C.ChatCompletionRequest & { stream: true }>());
take<Params<typeof o.embeddings.create>[0]>(give<C.EmbeddingRequest>());
// Every value local-llm-rn exports (classes, functions, enums) is exported here too.
take<keyof typeof ON>(give<keyof typeof TN>());
// Every member local-llm-rn's option and request types name exists here too (assignability
// alone lets an optional member be missing).
take<keyof O.LocalLLMOptions>(give<keyof T.LocalLLMOptions>());
take<keyof O.GenerateOptions>(give<keyof T.GenerateOptions>());
take<keyof O.ContextOverflowConfig>(give<keyof T.ContextOverflowConfig>());
take<keyof O.ModelOptions>(give<keyof T.ModelOptions>());
take<keyof O.ContextOptions>(give<keyof T.ContextOptions>());
take<keyof O.EmbeddingContextOptions>(give<keyof T.EmbeddingContextOptions>());
take<keyof O.QuantizeOptions>(give<keyof T.QuantizeOptions>());
take<keyof O.BenchmarkOptions>(give<keyof T.BenchmarkOptions>());
take<keyof O.DownloadOptions>(give<keyof T.DownloadOptions>());
take<keyof Params<typeof o.chat.completions.create>[0]>(give<keyof C.ChatCompletionRequest>());
take<keyof O.ChatMessage>(give<keyof C.ChatCompletionRequestMessage>());
take<keyof NonNullable<Params<typeof OL.preload>[1]>>(give<keyof NonNullable<Params<typeof TL.preload>[1]>>());
// What it reads back.
take<T.BatchResult>(give<O.BatchResult>());
take<T.InferenceMetrics>(give<O.InferenceMetrics>());
take<T.BenchmarkResult>(give<O.BenchmarkResult>());
take<T.DeviceCapabilities>(give<O.DeviceCapabilities>());
take<C.ChatCompletionResponse>(await o.chat.completions.create({ messages: [] }));
for await (const chunk of await o.chat.completions.create({ messages: [], stream: true })) take<C.ChatCompletionChunk>(chunk);
take<C.EmbeddingResponse>(await o.embeddings.create({ input: 'x' }));
take<Record<keyof typeof TE, string>>(OE);
// Static members.
take<Params<typeof OL.create>>(give<Params<typeof TL.create>>());
take<Params<typeof OL.preload>>(give<Params<typeof TL.preload>>());
take<ReturnType<typeof TL.preload>>(OL.preload(''));
take<typeof TL.setLogCallback>(OL.setLogCallback);
take<keyof typeof OL.pool>(give<keyof typeof TL.pool>());
// Instance members.
take<typeof t.init>(o.init);
take<typeof t.switchModel>(o.switchModel);
take<typeof t.benchmark>(o.benchmark);
take<typeof t.dispose>(o.dispose);
take<Params<typeof o.languageModel>>(give<Params<typeof t.languageModel>>());
take<CreateParams>(give<CreateParams>());
export {};
`;

const OURS = { 'react-native-local-llm-rs': [OUR_ENTRY] };
let anchorExamples: Example[] = [];
let theirs = new Map<string, string[]>();
let anchorPaths: Record<string, string[]> = {};

before(() => {
  fetchAnchors();
  const rn = join(ANCHORS, RN, 'package');
  anchorExamples = markdownBlocks(readFileSync(join(rn, 'README.md'), 'utf8'), 'README.md');
  for (const f of readdirSync(join(rn, 'src')).filter((f) => f.endsWith('.ts'))) {
    anchorExamples.push(...docCommentBlocks(readFileSync(join(rn, 'src', f), 'utf8'), `src/${f}`));
  }
  const core = join(ANCHORS, CORE, 'package/dist');
  anchorPaths = {
    'local-llm-rn': [join(rn, 'src/index.ts')],
    'local-llm-js-core': [join(core, 'index.d.ts')],
    'local-llm-js-core/native': [join(core, 'native.d.ts')],
  };
  theirs = compile(
    new Map(anchorExamples.map((e, i) => [`example${i}.tsx`, asModule(e.code, 'local-llm-rn')])),
    anchorPaths,
  );
});

test('every example of local-llm-rn that compiles against local-llm-rn compiles against us', (t) => {
  assert.ok(anchorExamples.length >= 15, `only ${anchorExamples.length} examples found in local-llm-rn`);
  const passing = anchorExamples.filter((_, i) => theirs.get(`example${i}.tsx`)?.length === 0);
  // The oracle must accept most of its own README, or the harness (not the package) is wrong.
  assert.ok(passing.length >= 12, `only ${passing.length} examples compile against local-llm-rn itself`);
  const rejected = anchorExamples.flatMap((e, i) => {
    const errs = theirs.get(`example${i}.tsx`) ?? [];
    return errs.length > 0 ? [`${e.origin} (${errs[0]})`] : [];
  });
  t.diagnostic(
    `${passing.length} of ${anchorExamples.length} compile against local-llm-rn; it rejects ${rejected.join('; ')}`,
  );
  const ours = compile(
    new Map(anchorExamples.map((e, i) => [`example${i}.tsx`, asModule(e.code, 'react-native-local-llm-rs')])),
    OURS,
  );
  const failures = anchorExamples
    .map((e, i) => ({
      e,
      errs: theirs.get(`example${i}.tsx`)?.length === 0 ? (ours.get(`example${i}.tsx`) ?? []) : [],
    }))
    .filter(({ errs }) => errs.length > 0)
    .map(({ e, errs }) => `${e.origin}\n  ${errs.join('\n  ')}\n${e.code}`);
  assert.deepEqual(
    failures,
    [],
    `examples that compile against local-llm-rn but not against us:\n${failures.join('\n')}`,
  );
});

test('the examples that need only a model file run on the real engine', async (t) => {
  const model = defaultModel();
  const runnable = anchorExamples.filter(
    (e, i) =>
      theirs.get(`example${i}.tsx`)?.length === 0 &&
      !/['"][^'"]*\.gguf['"]/.test(e.code) &&
      !/\bsetText\b|\bprocess\.stdout\b/.test(e.code) &&
      (/\bconst ai\b/.test(e.code) || !/\bai\b/.test(e.code)) &&
      (/\bconst response\b/.test(e.code) || !/\bresponse\b/.test(e.code)),
  );
  assert.ok(runnable.length >= 3, `only ${runnable.length} runnable examples`);
  t.diagnostic(`ran ${runnable.map((e) => e.origin).join(', ')}`);
  const dir = mkdtempSync(join(tmpdir(), 'anchor-run-'));
  const logged: unknown[][] = [];
  const log = console.log;
  const warn = console.warn;
  try {
    for (const [i, e] of runnable.entries()) {
      const file = join(dir, `run${i}.mts`);
      const src = asModule(e.code, OUR_API).replace(
        'declare const modelPath: string;',
        `const modelPath = ${JSON.stringify(model)};`,
      );
      writeFileSync(file, src);
      const mod = (await import(pathToFileURL(file).href)) as { __example: () => Promise<void> };
      console.log = (...args: unknown[]) => void logged.push(args);
      console.warn = console.log;
      try {
        await mod.__example();
      } catch (err) {
        assert.fail(`${e.origin} threw ${err}\n${e.code}`);
      } finally {
        console.log = log;
        console.warn = warn;
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  // The combo example prints the device, the reply and the speed: none of them may be missing.
  const text = logged.map((a) => a.join(' ')).join('\n');
  assert.doesNotMatch(text, /undefined|NaN|null/, text);
  assert.match(text, /Speed: \d+\.\d tok\/s/, text);
});

test('every TypeScript block of our README and docs compiles', () => {
  const docs = ['README.md', ...readdirSync(join(ROOT, 'docs')).map((f) => `docs/${f}`)].filter((f) =>
    f.endsWith('.md'),
  );
  const blocks = docs.flatMap((f) => markdownBlocks(readFileSync(join(ROOT, f), 'utf8'), f));
  assert.ok(blocks.length >= 1, 'no TypeScript block in the README or docs');
  const result = compile(new Map(blocks.map((b, i) => [`block${i}.tsx`, `${b.code}\nexport {};\n`])), OURS);
  const failures = blocks
    .map((b, i) => ({ b, errs: result.get(`block${i}.tsx`) ?? [] }))
    .filter(({ errs }) => errs.length > 0)
    .map(({ b, errs }) => `${b.origin}\n  ${errs.join('\n  ')}`);
  assert.deepEqual(failures, [], failures.join('\n'));
});

test("local-llm-rn's public types and members fit ours", () => {
  const result = compile(new Map([['surface.ts', SURFACE]]), { ...anchorPaths, ...OURS });
  const lines = SURFACE.split('\n');
  const failures = (result.get('surface.ts') ?? []).map((e) => {
    const line = Number(/^line (\d+)/.exec(e)?.[1] ?? 0);
    return `${lines[line - 1]}\n    ${e}`;
  });
  assert.deepEqual(failures, [], failures.join('\n'));
});
