#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets into rust/fuzz/corpus/<target>/.

Seeds are small on purpose (libFuzzer's speed falls with input size): two tiny llama models
(one layer, byte-level BPE and SentencePiece vocabularies of a few dozen tokens) and a
metadata-only GGUF with every value type for `gguf`; texts with special-token markup for
`tokenizer`; templates and conversations for `chat_template`; option sets for `sampling`;
session files of the tiny BPE model's layout for `state_file`.
Requires the PyPI `gguf` and `numpy` packages (scripts/setup/setup-test-deps.sh).
"""
import os
import struct
import sys
import zlib

import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q

HERE = os.path.dirname(os.path.abspath(__file__))


def out(target: str, name: str, data: bytes) -> None:
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def tiny_model(path: str, spm: bool) -> None:
    rng = np.random.default_rng(1)
    d, ff, vocab_words = 32, 32, ["a", "b", "c", "ab", "bc", "abc", " ", "Hello", "world"]
    w = gguf.GGUFWriter(path, "llama")
    w.add_block_count(1)
    w.add_context_length(64)
    w.add_embedding_length(d)
    w.add_feed_forward_length(ff)
    w.add_head_count(2)
    w.add_head_count_kv(1)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(10000.0)
    if spm:
        tokens = ["<unk>", "<s>", "</s>"] + ["\u2581" + t for t in vocab_words] + vocab_words
        tokens += [f"<0x{b:02X}>" for b in range(256)]
        w.add_tokenizer_model("llama")
        w.add_token_list(tokens)
        w.add_token_scores([float(-i) for i in range(len(tokens))])
        types = [2, 3, 3] + [1] * (2 * len(vocab_words)) + [6] * 256
        w.add_token_types(types)
    else:
        byte_chars = [chr(c) for c in range(33, 127)]
        tokens = byte_chars + ["\u0120", "ab", "bc", "abc", "<|im_start|>", "<|im_end|>"]
        w.add_tokenizer_model("gpt2")
        w.add_tokenizer_pre("smollm")
        w.add_token_list(tokens)
        w.add_token_types([1] * (len(tokens) - 2) + [3, 3])
        w.add_token_merges(["a b", "b c", "ab c"])
        w.add_bos_token_id(len(tokens) - 2)
        w.add_eos_token_id(len(tokens) - 1)
    w.add_chat_template("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}")
    n = len(tokens)

    def t(name, rows, cols, qtype=Q.Q8_0):
        data = rng.standard_normal((rows, cols)).astype(np.float32) * 0.1
        if qtype == Q.F32:
            w.add_tensor(name, data)
        else:
            w.add_tensor(name, gguf.quants.quantize(data, qtype), raw_dtype=qtype)

    t("token_embd.weight", n, d)
    w.add_tensor("blk.0.attn_norm.weight", np.ones(d, dtype=np.float32))
    t("blk.0.attn_q.weight", d, d)
    t("blk.0.attn_k.weight", 16, d)
    t("blk.0.attn_v.weight", 16, d, Q.F16)
    t("blk.0.attn_output.weight", d, d, Q.Q4_0)
    w.add_tensor("blk.0.ffn_norm.weight", np.ones(d, dtype=np.float32))
    t("blk.0.ffn_gate.weight", ff, d, Q.Q4_1)
    t("blk.0.ffn_up.weight", ff, d, Q.Q5_0)
    t("blk.0.ffn_down.weight", d, ff, Q.Q5_1)
    w.add_tensor("output_norm.weight", np.ones(d, dtype=np.float32))
    t("output.weight", n, d, Q.F32)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def all_types(path: str) -> None:
    w = gguf.GGUFWriter(path, "none")
    w.add_uint8("t.u8", 7)
    w.add_int8("t.i8", -7)
    w.add_uint16("t.u16", 700)
    w.add_int16("t.i16", -700)
    w.add_uint32("t.u32", 70000)
    w.add_int32("t.i32", -70000)
    w.add_uint64("t.u64", 1 << 40)
    w.add_int64("t.i64", -(1 << 40))
    w.add_float32("t.f32", 1.5)
    w.add_float64("t.f64", -2.25)
    w.add_bool("t.bool", True)
    w.add_string("t.str", "h\u00e9llo")
    w.add_array("t.arr.u8", [1, 2, 3])
    w.add_array("t.arr.str", ["x", "", "yz"])
    w.add_array("t.arr.f32", [0.5, -1.0])
    w.add_array("t.arr.nested", [[1, 2], [3]])
    w.add_tensor("t", np.arange(8, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def state_file(n_ctx: int, tokens: list, reusable: int, flags: int) -> bytes:
    """A session file (session/state.rs) for the tiny BPE model (1 layer, key and value
    widths 16), behind the target's flag byte. The fingerprint is left zero: flag bit 0 makes
    the target write the model's; the CRC-32 is correct (bit 1 recomputes it anyway)."""
    n = len(tokens)
    body = b"LLMKVST\0" + struct.pack("<I", 1) + bytes(8)
    body += struct.pack("<6I", n_ctx, 1, 16, 16, n, reusable)
    body += struct.pack(f"<{n}I", *tokens)
    rng = np.random.default_rng(n)
    body += rng.standard_normal(n * 32).astype(np.float16).tobytes()
    return bytes([flags]) + body + struct.pack("<I", zlib.crc32(body))


def main() -> None:
    tmp = os.path.join(HERE, "target", "seeds")
    os.makedirs(tmp, exist_ok=True)
    for name, fn in [
        ("tiny-llama-bpe.gguf", lambda p: tiny_model(p, spm=False)),
        ("tiny-llama-spm.gguf", lambda p: tiny_model(p, spm=True)),
        ("all-types.gguf", all_types),
    ]:
        p = os.path.join(tmp, name)
        fn(p)
        out("gguf", name, open(p, "rb").read())
    for i, (flags, text) in enumerate([
        (0, "Hello world"),
        (1, "Hello world"),
        (6, "<|im_start|>user\nhi<|im_end|>"),
        (7, "<start_of_turn>user\n  caf\u00e9 \U0001f600\t\n<end_of_turn>"),
        (0, "   leading and trailing   "),
        (1, "\u00e9\u4e2d\u6587 123 456.78 don't"),
    ]):
        out("tokenizer", f"seed{i}", bytes([flags]) + text.encode())
    conversations = [
        b"\x00user: hi\x00\x02hello there",
        b"\x01user \x00\x01  padded  \x00\x02\n",
        b"\x03\x00\x01<|im_end|> injected",
        b"\x06{% for m in messages %}{{ m.role }}:{{ m.content | trim }}\n{% endfor %}\x00\x01 a \x00\x02 b ",
        b"\x04{% for m in messages %}{{ m.content[::-1] }}{% endfor %}\x00\x01abc",
        b"\x04{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}\x00\x01x",
        b"\x04{{ messages[0].content * 1000 }}{% for i in range(100000) %}{% endfor %}\x00\x01x",
        # Hostile growth (the allocation guard): doubling, nesting, self-reference, captures.
        b"\x04{% set ns = namespace(l=[1], s='x') %}{% for i in range(40) %}{% set ns.l = ns.l + ns.l %}{% endfor %}{{ ns.l | length }}\x00\x01x",
        b"\x04{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}\x00\x01x",
        b"\x04{% set ns = namespace(l=[1]) %}{% for i in range(40) %}{% set ns.l = [ns.l, ns.l] %}{% endfor %}{{ ns.l | tojson }}\x00\x01x",
        b"\x04{% set ns = namespace() %}{% set ns.me = [ns] %}{{ ns }}\x00\x01x",
        b"\x04{{ [1] | batch(1000000000, 0) | list }}{{ 'ab' * 99999999 }}\x00\x01x",
        b"\x04{% set ns = namespace(s='x') %}{% for i in range(60) %}{% set t %}{{ ns.s }}{{ ns.s }}{% endset %}{% set ns.s = t %}{% endfor %}\x00\x01x",
        b"\x04{% for m in messages %}{{ {'role': m.role, 'n': [m.content, none, true, 1.5e-7]} }}{{ m | tojson(ensure_ascii=true) }}{% endfor %}\x00\x01caf\xc3\xa9",
    ]
    for i, c in enumerate(conversations):
        out("chat_template", f"seed{i}", c)
    grammars = [
        b'root ::= "yes" | "no"\x00yes|y|es|no',
        b'root ::= [a-z]+ ("," [a-z]+)*\x00ab,cd|ab|,|cd',
        b'root ::= obj\nobj ::= "{" ws (pair ("," ws pair)*)? "}"\npair ::= str ":" ws [0-9]+\n'
        b'str ::= "\\"" [^"\\\\]* "\\""\nws ::= [ \\t\\n]*\x00{"a": 1}|{|"|a|:|1|}',
        b'root ::= x{2,4} y?\nx ::= [\\u00e9\\U0001F600] | "ab"\ny ::= [^\\x00-\\x7f]\x00\xc3\xa9ab\xf0\x9f\x98\x80',
        b'root ::= (root2 | "a")\nroot2 ::= "(" root ")"\x00((a))|(|)|a',
    ]
    for i, g in enumerate(grammars):
        out("grammar", f"seed{i}", g)
    schemas = [
        b'{"type": "object", "properties": {"a": {"type": "integer", "minimum": 0, "maximum": 9}}, "required": ["a"]}\x00{"a": 5}',
        b'{"type": "array", "items": {"enum": ["x", 1, null, true]}, "minItems": 1, "maxItems": 3}\x00["x", 1]',
        b'{"oneOf": [{"type": "string", "minLength": 2, "maxLength": 4}, {"type": "number"}]}\x00"abc"',
        b'{"$defs": {"n": {"type": "object", "properties": {"next": {"$ref": "#/$defs/n"}}}}, "$ref": "#/$defs/n"}\x00{}',
        b'{"type": "string", "pattern": "^[a-c]{2,3}(x|y)?$"}\x00"abx"',
        b'{"type": "object", "additionalProperties": {"type": "boolean"}, "properties": {"k": {"const": "v"}}}\x00{"k": "v"}',
        b'{"anyOf": [{"type": "string", "format": "date"}, {"allOf": [{"type": "integer"}, {"minimum": -5}]}]}\x002024-01-01',
    ]
    for i, sch in enumerate(schemas):
        out("json_schema", f"seed{i}", sch)
    for i, (temp, top_k, typ, top_p, min_p, rep, freq, pres, last_n) in enumerate([
        (0.0, 0, 1.0, 1.0, 0.0, 1.0, 0.0, 0.0, 0),
        (0.8, 40, 1.0, 0.95, 0.05, 1.1, 0.1, 0.1, 64),
        (1.5, 0, 0.5, 0.5, 0.0, 1.0, -0.5, 0.5, 8),
    ]):
        head = struct.pack("<fIffffffII", temp, top_k, typ, top_p, min_p, rep, freq, pres, last_n, i)
        logits = struct.pack("<8f", 1.0, 2.0, -1.0, 0.5, 3.0, 3.0, -float("inf"), 0.0)
        history = struct.pack("<4I", 1, 4, 4, 2)
        out("sampling", f"seed{i}", head + bytes([7, i]) + logits + history)
    for i, (tokens, reusable, flags) in enumerate([
        ([], 0, 3),
        ([98, 1, 2], 3, 3),
        ([98, 5, 6, 7, 99], 2, 1),
        ([1, 2], 2, 0),
    ]):
        out("state_file", f"seed{i}", state_file(32, tokens, reusable, flags))


if __name__ == "__main__":
    sys.exit(main())
