#!/usr/bin/env python3
"""Converts a sentence-transformers BERT model (Hugging Face layout: config.json,
model.safetensors, tokenizer.json, 1_Pooling/config.json) into a GGUF file of llama.cpp's
`bert` architecture, as llama.cpp's convert_hf_to_gguf.py lays it out (which needs torch;
this needs only numpy and the PyPI `gguf` package).

    python3 tools/convert/bert_to_gguf.py MODEL_DIR OUT.gguf [--outtype f16|f32]

What it writes:
- metadata: bert.{context_length, embedding_length, feed_forward_length, block_count,
  attention.head_count, attention.layer_norm_epsilon}, attention.causal = false, the pooling
  of 1_Pooling/config.json (mean or CLS), token_type_count;
- the WordPiece vocabulary (tokenizer.ggml.model "bert") with llama.cpp's spelling: a word's
  continuation pieces lose their "##", every other non-special token gains the word-start mark
  "▁"; [PAD]/[UNK]/[CLS]/[SEP]/[MASK] ids; the normaliser's lowercase/strip-accents flags;
- tensors under llama.cpp's names; matrices in --outtype (F16 by default, as the converter's
  default), norms, biases and the token type table F32.

The safetensors file is read directly (an 8-byte header length, a JSON header, raw data).
"""

from __future__ import annotations

import argparse
import json
import os
import struct

import numpy as np

import gguf

DTYPES = {"F32": np.float32, "F16": np.float16, "BF16": None, "I64": np.int64}


def read_safetensors(path: str) -> dict[str, np.ndarray]:
    """Every tensor of a safetensors file as a float32 (or int64) array."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        base = 8 + n
    data = np.memmap(path, dtype=np.uint8, mode="r")
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        raw = data[base + start : base + end]
        if info["dtype"] == "BF16":
            bits = raw.view(np.uint16).astype(np.uint32) << 16
            array = bits.view(np.float32)
        else:
            array = raw.view(DTYPES[info["dtype"]])
        out[name] = np.asarray(array).reshape(info["shape"])
    return out


# Hugging Face BERT names (after the "encoder.layer.N." prefix) and llama.cpp's.
LAYER_NAMES = {
    "attention.self.query": "attn_q",
    "attention.self.key": "attn_k",
    "attention.self.value": "attn_v",
    "attention.output.dense": "attn_output",
    "attention.output.LayerNorm": "attn_output_norm",
    "intermediate.dense": "ffn_up",
    "output.dense": "ffn_down",
    "output.LayerNorm": "layer_output_norm",
}
TOP_NAMES = {
    "embeddings.word_embeddings": "token_embd",
    "embeddings.token_type_embeddings": "token_types",
    "embeddings.position_embeddings": "position_embd",
    "embeddings.LayerNorm": "token_embd_norm",
}


def gguf_name(hf: str) -> str | None:
    """llama.cpp's name of a Hugging Face tensor (None: not used, e.g. position_ids, pooler)."""
    hf = hf.removeprefix("bert.")
    stem, _, suffix = hf.rpartition(".")
    if suffix == "gamma":
        suffix = "weight"
    if suffix == "beta":
        suffix = "bias"
    if stem in TOP_NAMES:
        return f"{TOP_NAMES[stem]}.{suffix}"
    if stem.startswith("encoder.layer."):
        rest = stem[len("encoder.layer.") :]
        index, _, part = rest.partition(".")
        if part in LAYER_NAMES:
            return f"blk.{int(index)}.{LAYER_NAMES[part]}.{suffix}"
    return None


def vocab(tokenizer: dict) -> tuple[list[str], list[int], dict[str, int]]:
    """Tokens in id order with llama.cpp's spelling, their types, and the special ids."""
    model = tokenizer["model"]
    if model.get("type") != "WordPiece":
        raise SystemExit(f"expected a WordPiece tokenizer, found {model.get('type')}")
    prefix = model.get("continuing_subword_prefix", "##")
    by_id = sorted(model["vocab"].items(), key=lambda kv: kv[1])
    if [i for _, i in by_id] != list(range(len(by_id))):
        raise SystemExit("the vocabulary's ids are not 0..n-1")
    special = {t["content"] for t in tokenizer.get("added_tokens", []) if t.get("special")}
    tokens, types = [], []
    for text, _ in by_id:
        if text in special:
            tokens.append(text)
            types.append(gguf.TokenType.CONTROL)
        elif text.startswith(prefix):
            tokens.append(text[len(prefix) :])
            types.append(gguf.TokenType.NORMAL)
        else:
            tokens.append("\u2581" + text)
            types.append(gguf.TokenType.NORMAL)
    ids = {name: model["vocab"][name] for name in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]") if name in model["vocab"]}
    return tokens, types, ids


def convert(model_dir: str, out: str, outtype: str) -> None:
    config = json.load(open(os.path.join(model_dir, "config.json")))
    tokenizer = json.load(open(os.path.join(model_dir, "tokenizer.json")))
    pooling = gguf.PoolingType.MEAN
    pooling_path = os.path.join(model_dir, "1_Pooling", "config.json")
    if os.path.exists(pooling_path):
        pc = json.load(open(pooling_path))
        if pc.get("pooling_mode_cls_token"):
            pooling = gguf.PoolingType.CLS
        elif not pc.get("pooling_mode_mean_tokens"):
            raise SystemExit(f"unsupported pooling in {pooling_path}: {pc}")
    w = gguf.GGUFWriter(out, "bert")
    w.add_name(os.path.basename(os.path.normpath(model_dir)))
    w.add_context_length(config["max_position_embeddings"])
    w.add_embedding_length(config["hidden_size"])
    w.add_feed_forward_length(config["intermediate_size"])
    w.add_block_count(config["num_hidden_layers"])
    w.add_head_count(config["num_attention_heads"])
    w.add_layer_norm_eps(config["layer_norm_eps"])
    w.add_causal_attention(False)
    w.add_pooling_type(pooling)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16 if outtype == "f16" else gguf.LlamaFileType.ALL_F32)
    tokens, types, ids = vocab(tokenizer)
    w.add_tokenizer_model("bert")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_type_count(config.get("type_vocab_size", 1))
    w.add_bos_token_id(ids["[CLS]"])
    w.add_sep_token_id(ids["[SEP]"])
    w.add_unk_token_id(ids["[UNK]"])
    w.add_pad_token_id(ids["[PAD]"])
    w.add_mask_token_id(ids["[MASK]"])
    w.add_add_bos_token(True)
    w.add_add_sep_token(True)
    normalizer = tokenizer.get("normalizer") or {}
    if normalizer.get("type") == "BertNormalizer":
        lowercase = bool(normalizer.get("lowercase", True))
        strip = normalizer.get("strip_accents")
        w.add_bool("tokenizer.ggml.normalizer.lowercase", lowercase)
        w.add_bool("tokenizer.ggml.normalizer.strip_accents", lowercase if strip is None else bool(strip))
    tensors = read_safetensors(os.path.join(model_dir, "model.safetensors"))
    for hf, array in tensors.items():
        name = gguf_name(hf)
        if name is None:
            continue
        array = np.ascontiguousarray(array, dtype=np.float32)
        # llama.cpp adds token type 0's row to F32 activations: that table stays F32.
        if outtype == "f16" and array.ndim == 2 and name != "token_types.weight":
            array = array.astype(np.float16)
        w.add_tensor(name, array)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model_dir")
    ap.add_argument("out")
    ap.add_argument("--outtype", choices=["f16", "f32"], default="f16")
    args = ap.parse_args()
    convert(args.model_dir, args.out, args.outtype)


if __name__ == "__main__":
    main()
