// Our additions to the turbo-module build files that uniffi-bindgen-react-native generates
// (android/CMakeLists.txt, LocalLlm.podspec): stop the app's build with the command that makes
// the prebuilt Rust libraries when they are missing (a git checkout instead of the npm package).
// Run after every `ubrn generate` (scripts/bindings/ubrn-generate.sh, scripts/checks/js-test.sh), so that the
// committed files are exactly "ubrn's output + these edits" and the drift check stays meaningful.
// Each edit is anchored on a line of ubrn's template: if the template changes, this fails
// instead of silently leaving the check out.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const root = join(import.meta.dirname, '..', '..');
const command = 'npm run build:mobile';

const edits = [
  {
    file: 'android/CMakeLists.txt',
    anchor: 'add_library(my_rust_lib STATIC IMPORTED)\n',
    text: `if(NOT EXISTS \${MY_RUST_LIB})
  message(FATAL_ERROR "react-native-local-llm-rs: the prebuilt Rust library \${MY_RUST_LIB} is missing "
    "(a git checkout has none). Make it in the react-native-local-llm-rs folder with "
    "\`${command} -- \${ANDROID_ABI}\` (scripts/mobile/build-mobile.sh), or \`${command}\` for every ABI.")
endif()
`,
  },
  {
    file: 'LocalLlm.podspec',
    anchor: 'Pod::Spec.new do |s|\n',
    text: `  unless File.exist?(File.join(__dir__, "LocalLlmFramework.xcframework", "Info.plist"))
    raise "react-native-local-llm-rs: the prebuilt Rust library LocalLlmFramework.xcframework is " \\
      "missing (a git checkout has none). Make it in #{__dir__} with \`${command} -- ios\` " \\
      "(scripts/mobile/build-mobile.sh), then run pod install again."
  end
`,
  },
  {
    file: 'LocalLlm.podspec',
    anchor: '  s.vendored_frameworks = "LocalLlmFramework.xcframework"\n',
    text: `  s.frameworks = "CoreFoundation" # the Rust library's time-zone lookup (chrono, iana-time-zone)
`,
  },
];

for (const { file, anchor, text } of edits) {
  const path = join(root, file);
  const source = readFileSync(path, 'utf8');
  if (source.includes(text)) continue;
  const at = source.indexOf(anchor);
  if (at < 0 || source.indexOf(anchor, at + 1) >= 0) {
    throw new Error(`${file}: expected exactly one line ${JSON.stringify(anchor)} from ubrn's template`);
  }
  const end = at + anchor.length;
  writeFileSync(path, source.slice(0, end) + text + source.slice(end));
  console.log(`ubrn-postgenerate: ${file}`);
}
