//! Shared helpers for the tokenizer tests: real-model names, the llama.cpp oracle
//! (tools/oracle/tokenize.mjs through node-llama-cpp) and the test corpus.
#![allow(dead_code)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use local_llm_engine::gguf::GgufFile;
use local_llm_engine::tokenizer::Tokenizer;
use serde_json::{json, Value};

/// The real models, by the names `common::real_model` takes.
pub const SMOLLM: &str = "smollm2";
/// See [`SMOLLM`].
pub const GEMMA: &str = "gemma3";

/// Loads our tokenizer for a model file.
pub fn load(path: &Path) -> Tokenizer {
    let gguf = GgufFile::open(path).expect("open gguf");
    let t0 = std::time::Instant::now();
    let tok = Tokenizer::from_gguf(&gguf).expect("build tokenizer");
    eprintln!(
        "tokenizer built in {:?} ({} tokens)",
        t0.elapsed(),
        tok.n_vocab()
    );
    tok
}

/// Runs the llama.cpp oracle on a request (see tools/oracle/tokenize.mjs) and returns its JSON answer.
pub fn oracle(request: &Value) -> Value {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let script = root.join("tools/oracle/tokenize.mjs");
    let modules = root.join("tools/oracle/node_modules/node-llama-cpp");
    assert!(
        modules.exists(),
        "llama.cpp oracle not installed: run `npm ci` in {} (needs node-llama-cpp)",
        root.join("tools/oracle").display()
    );
    let mut child = Command::new("node")
        .arg(&script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cannot run `node` for the llama.cpp oracle");
    let body = serde_json::to_vec(request).expect("request json");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(&body)
        .expect("write oracle request");
    let out = child.wait_with_output().expect("oracle output");
    assert!(
        out.status.success(),
        "oracle failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("oracle json")
}

/// Oracle request for tokenizing `texts` with parse_special false and true.
pub fn request(path: &Path, texts: &[String], pieces: bool) -> Value {
    json!({
        "model": path.to_string_lossy(),
        "texts": texts,
        "special": [false, true],
        "pieces": pieces,
        "info": true,
    })
}

pub fn ids_of(v: &Value) -> Vec<u32> {
    v.as_array()
        .expect("id array")
        .iter()
        .map(|x| x.as_u64().expect("id") as u32)
        .collect()
}

/// The multilingual / code / whitespace / special-looking corpus.
pub fn corpus() -> Vec<String> {
    let mut c: Vec<String> = [
        "",
        " ",
        "  ",
        "   ",
        "\n",
        "\n\n",
        "\n\n\n\n",
        "\t",
        "\t\t  \t",
        "\r\n",
        " \r\n \r\n",
        "Hello world",
        " Hello world",
        "  Hello   world  ",
        "Hello world\n",
        "hello\n\nworld\n\n\n  indented\n\ttabbed",
        "abc   ",
        "   \n  \n",
        "I'm sure it's fine, we'll see; they've gone, you're right, he'd know, don't worry",
        "IT'S DON'T WE'LL THEY'VE YOU'RE HE'D I'M",
        "'s 't 're 've 'm 'll 'd",
        " 's 're x ' y 'll 'd 'm",
        "hello , world . what ? yes ! ok",
        "don 't can 't it 's",
        "1234567890",
        "3.14159265358979323846",
        "12,345,678.90 and 1000000 and 007",
        "٣٤٥٦ ١٢ (Arabic-Indic digits) ⅫⅣ ½ ²³",
        "你好，世界！这是一个测试。",
        "こんにちは世界、カタカナとひらがな。",
        "안녕하세요 세계",
        "مرحبا بالعالم، كيف حالك؟",
        "नमस्ते दुनिया, आप कैसे हैं?",
        "สวัสดีชาวโลก",
        "Привет, мир! Как дела?",
        "Γειά σου Κόσμε",
        "שלום עולם",
        "Ünïcödé àccénts: café naïve résumé Straße",
        "e\u{301} vs é, ﬁ ligature, Å",
        "😀",
        "👍🏽 thumbs",
        "👨‍👩‍👧‍👦 family",
        "🏳️‍🌈❤️🇫🇷🇯🇵",
        "🧠🦀🫠",
        "fn main() {\n    println!(\"Hello, {}!\", name);\n}\n",
        "def f(x):\n    if x > 0:\n        return x ** 2\n    return -x\n",
        "{\"key\": [1, 2, 3], \"nested\": {\"a\": null, \"b\": true}}",
        "<div class=\"a\">x &amp; y</div>",
        "$100 + 200 = <300> ^ ~ | `tick` @user #tag 50%",
        "!!!???...,,,;;;:::",
        "a--b__c...d",
        "<|im_start|>user\nhi there<|im_end|>\n<|im_start|>assistant\n",
        "<start_of_turn>user\nhello<end_of_turn>\n<start_of_turn>model\n",
        "<bos>text after bos",
        "<eos>",
        "<|endoftext|>",
        "</s> and <s>",
        "<unused0><pad><mask>",
        "<|im_start",
        "<<|im_end|>>",
        "<0x41><0xFF>",
        "[multimodal]",
        "x<end_of_turn>y",
        "𓀀𓀁𓀂",
        "\u{10FFFD}\u{E000}",
        "a\u{0}b\u{1}\u{7}c",
        "\u{FEFF}bom \u{200B}zero\u{200D}width",
        "nbsp\u{00A0}here\u{3000}ideo\u{2028}line\u{85}nel",
        "    leading spaces",
        "trailing spaces    ",
        "mixed \t \n \r tabs",
        "ALLCAPS lowercase MiXeD CamelCase snake_case kebab-case",
        "https://example.com/path?query=1&x=y#frag",
        "email@example.com",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let para = "The quick brown fox jumps over the lazy dog. 敏捷的棕色狐狸跳过了懒狗。 \
                Съешь же ещё этих мягких французских булок! 1234567 😀👍 it's done.\n";
    c.push(para.repeat(40));
    c.push(" ".repeat(100) + "x" + &"\n".repeat(50));
    c.push("9".repeat(200));
    c
}

/// Extracts llama.cpp's vocab-only test models (`models/ggml-vocab-<name>.gguf`) from the llama.cpp
/// source bundle that the node-llama-cpp package ships, into the test temp dir. Returns the path.
pub fn llama_cpp_vocab(name: &str) -> PathBuf {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let (base, repo) = llama_cpp_repo();
    let file = format!("ggml-vocab-{name}.gguf");
    let out = base.join(&file);
    if !out.exists() {
        std::fs::write(&out, llama_cpp_file_in(&repo, &format!("models/{file}")))
            .expect("write vocab");
    }
    out
}

/// The bytes of a file of the llama.cpp sources in node-llama-cpp's bundle (e.g.
/// `models/templates/<name>.jinja`).
pub fn llama_cpp_file(path: &str) -> Vec<u8> {
    llama_cpp_file_in(&llama_cpp_repo().1, path)
}

/// The paths of the files in a folder of the llama.cpp sources (e.g. `models/templates`).
pub fn llama_cpp_list(dir: &str) -> Vec<String> {
    let listing = Command::new("git")
        .arg("-C")
        .arg(llama_cpp_repo().1)
        .args(["ls-tree", "--name-only", &format!("HEAD:{dir}")])
        .output()
        .expect("run git ls-tree");
    assert!(listing.status.success(), "no {dir} in the llama.cpp bundle");
    String::from_utf8_lossy(&listing.stdout)
        .lines()
        .map(|name| format!("{dir}/{name}"))
        .collect()
}

/// Write the folders or files `paths` of the llama.cpp sources under `into` (as `git archive`
/// lays them out, e.g. `into/include/llama.h`).
pub fn llama_cpp_checkout(paths: &[&str], into: &Path) {
    std::fs::create_dir_all(into).expect("create the checkout folder");
    let archive = Command::new("git")
        .arg("-C")
        .arg(llama_cpp_repo().1)
        .args(["archive", "--format=tar", "HEAD"])
        .args(paths)
        .output()
        .expect("run git archive");
    assert!(archive.status.success(), "git archive of {paths:?} failed");
    let mut tar = Command::new("tar")
        .arg("-x")
        .arg("-C")
        .arg(into)
        .stdin(Stdio::piped())
        .spawn()
        .expect("run tar");
    tar.stdin
        .take()
        .expect("tar stdin")
        .write_all(&archive.stdout)
        .expect("write to tar");
    assert!(tar.wait().expect("tar").success(), "tar -x failed");
}

fn llama_cpp_file_in(repo: &Path, path: &str) -> Vec<u8> {
    let blob = Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(["show", &format!("HEAD:{path}")])
        .output()
        .expect("run git show");
    assert!(blob.status.success(), "no {path} in the llama.cpp bundle");
    blob.stdout
}

/// A clone (without checkout) of the llama.cpp bundle in the test temp dir: (its parent, the
/// clone).
fn llama_cpp_repo() -> (PathBuf, PathBuf) {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let bundle = root.join("tools/oracle/node_modules/node-llama-cpp/llama/gitRelease.bundle");
    assert!(
        bundle.exists(),
        "llama.cpp source bundle missing: run `npm ci` in tools/oracle ({})",
        bundle.display()
    );
    let base = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("llama-cpp-vocabs");
    let repo = base.join("repo");
    if !repo.join(".git").exists() {
        let tmp = base.join(format!("clone-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir_all(&base).expect("temp dir");
        let ok = Command::new("git")
            .args(["clone", "-q", "--no-checkout"])
            .arg(&bundle)
            .arg(&tmp)
            .status()
            .expect("run git");
        assert!(ok.success(), "git clone of the llama.cpp bundle failed");
        std::fs::rename(&tmp, &repo).expect("move clone");
    }
    (base, repo)
}

/// EOT check. Without `tokenizer.ggml.eot_token_id`, llama.cpp picks the EOT among candidate texts
/// in hash-map order, so when both sides found a candidate they may differ: then both must be
/// end-of-generation tokens.
pub fn check_eot(tok: &Tokenizer, oracle_eot: Option<u32>) {
    match (tok.eot(), oracle_eot) {
        (Some(a), Some(b)) if a != b => {
            assert!(
                tok.is_eog(a) && tok.is_eog(b),
                "eot {a} vs llama.cpp {b}: both must be EOG"
            );
            eprintln!(
                "eot: ours {a} ({:?}), llama.cpp {b} ({:?})",
                tok.token_text(a),
                tok.token_text(b)
            );
        }
        (a, b) => assert_eq!(a, b, "eot"),
    }
}

/// llama.cpp's own test texts of vocab `name` and the ids it expects for each
/// (`models/ggml-vocab-NAME.gguf.inp` and `.out`, tokenized without BOS/EOS and without parsing
/// special tokens, as its `test-tokenizer-0` runs them); `None` when the bundle has no `.inp`.
pub fn llama_cpp_expected(name: &str) -> Option<Vec<(String, Vec<u32>)>> {
    const SEPARATOR: &str = "\n__ggml_vocab_test__\n";
    let inp = format!("models/ggml-vocab-{name}.gguf.inp");
    if !llama_cpp_list("models").contains(&inp) {
        return None;
    }
    let text = |path: &str| String::from_utf8(llama_cpp_file(path)).expect("utf-8");
    let inputs = text(&inp);
    let outputs = text(&format!("models/ggml-vocab-{name}.gguf.out"));
    let texts: Vec<&str> = inputs
        .strip_suffix(SEPARATOR)
        .unwrap_or(&inputs)
        .split(SEPARATOR)
        .collect();
    let expected: Vec<&str> = outputs.lines().collect();
    assert_eq!(texts.len(), expected.len(), "{name}: .inp and .out differ");
    let ids = |line: &str| {
        line.split_whitespace()
            .map(|id| id.parse().unwrap())
            .collect()
    };
    Some(
        texts
            .iter()
            .zip(expected)
            .map(|(t, want)| (t.to_string(), ids(want)))
            .collect(),
    )
}
