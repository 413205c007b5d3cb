#!/usr/bin/env python3
"""Converts a SentencePiece Unigram model (a `.model` protobuf: T5's spiece.model, XLM-R's
sentencepiece.bpe.model, ...) into a vocabulary-only GGUF file whose tokenizer llama.cpp
loads as UGM (tokenizer.ggml.model "t5"), the way llama.cpp's convert_hf_to_gguf.py writes
the vocabulary of T5 (conversion/t5.py, T5Model.set_vocab) -- without its torch,
transformers or sentencepiece dependencies: the protobuf is read directly (wire format), so
this needs only the PyPI `gguf` package.

    python3 tools/convert/spm_to_gguf.py MODEL.model OUT.gguf [--arch t5] [--name NAME]
        [--add-bos | --no-add-bos] [--add-eos | --no-add-eos]

What it writes (no tensors: llama.cpp opens it with vocab_only, e.g. llama-tokenize):
- general.architecture (--arch, "t5" by default: llama.cpp reads no hyperparameter of a
  vocab-only load), general.name;
- tokenizer.ggml.model "t5", tokenizer.ggml.pre "default";
- tokenizer.ggml.tokens: the pieces in id order (UTF-8, "\u2581" for a space, as stored);
- tokenizer.ggml.scores: the pieces' scores (float32);
- tokenizer.ggml.token_type: llama.cpp's types as its converter derives them from
  SentencePieceProcessor's IsUnknown / IsControl / IsUnused / IsByte, in that order:
  UNKNOWN 2, CONTROL 3, UNUSED 5, BYTE 6, anything else NORMAL 1 -- so a piece of
  sentencepiece's USER_DEFINED type is written NORMAL, as llama.cpp's T5 converter does;
- tokenizer.ggml.add_space_prefix = normalizer_spec.add_dummy_prefix,
  tokenizer.ggml.remove_extra_whitespaces = normalizer_spec.remove_extra_whitespaces
  (protobuf defaults: true, true);
- tokenizer.ggml.precompiled_charsmap: normalizer_spec.precompiled_charsmap, the raw bytes,
  as a UINT8 array (gguf's add_precompiled_charsmap); left out when the model has none;
- tokenizer.ggml.{unknown,bos,eos,padding}_token_id from trainer_spec's unk_id / bos_id /
  eos_id / pad_id (defaults 0, 1, 2, -1; an id < 0 is left out). llama.cpp's converter takes
  these from the Hugging Face files beside the model; a bare .model has only these, and
  llama.cpp's own defaults for "t5" (pad 0, eos 1, unk 2: T5's layout) would be wrong for
  most other models;
- tokenizer.ggml.add_bos_token / add_eos_token: false / true by default, T5's (its
  tokenizer appends "</s>") and llama.cpp's defaults for a UGM vocabulary.

It refuses a model whose trainer_spec.model_type is not UNIGRAM (1): BPE models go through
llama.cpp's "llama" (SPM) tokenizer instead. XLM-R's fairseq id shift (llama.cpp's
XLMRobertaModel realigns <s> <pad> </s> <unk> to ids 0..3) is not applied: ids are the
.model's own.
"""

from __future__ import annotations

import argparse
import os
import struct

import gguf

# sentencepiece_model.proto: ModelProto.SentencePiece.Type
SPM_NORMAL, SPM_UNKNOWN, SPM_CONTROL, SPM_USER_DEFINED, SPM_UNUSED, SPM_BYTE = 1, 2, 3, 4, 5, 6
UNIGRAM = 1


def read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7


def fields(buf: bytes) -> list[tuple[int, int, int | bytes]]:
    """The (field number, wire type, value) triples of one protobuf message, in order:
    a varint as an int, a 32-/64-bit field or a length-delimited one as its raw bytes."""
    out = []
    pos = 0
    while pos < len(buf):
        key, pos = read_varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = read_varint(buf, pos)
        elif wire == 1:
            value, pos = buf[pos : pos + 8], pos + 8
        elif wire == 2:
            n, pos = read_varint(buf, pos)
            value, pos = buf[pos : pos + n], pos + n
        elif wire == 5:
            value, pos = buf[pos : pos + 4], pos + 4
        else:
            raise SystemExit(f"unsupported protobuf wire type {wire} (field {number})")
        out.append((number, wire, value))
    if pos != len(buf):
        raise SystemExit("truncated protobuf message")
    return out


def int32(v: int) -> int:
    """A varint-encoded int32 (negative values are sign-extended to 64 bits)."""
    v &= (1 << 64) - 1
    return v - (1 << 64) if v >= 1 << 63 else v


def parse_model(data: bytes) -> dict:
    """The parts of a ModelProto that the vocabulary needs, with the .proto's defaults."""
    pieces: list[tuple[bytes, float, int]] = []
    trainer = {"model_type": UNIGRAM, "unk_id": 0, "bos_id": 1, "eos_id": 2, "pad_id": -1}
    normalizer = {"name": "", "precompiled_charsmap": b"", "add_dummy_prefix": True,
                  "remove_extra_whitespaces": True, "escape_whitespaces": True}
    trainer_fields = {3: "model_type", 40: "unk_id", 41: "bos_id", 42: "eos_id", 43: "pad_id"}
    normalizer_fields = {1: "name", 2: "precompiled_charsmap", 3: "add_dummy_prefix",
                         4: "remove_extra_whitespaces", 5: "escape_whitespaces"}
    for number, wire, value in fields(data):
        if number == 1 and wire == 2:  # repeated SentencePiece pieces
            piece, score, kind = b"", 0.0, SPM_NORMAL
            for n, w, v in fields(value):
                if n == 1 and w == 2:
                    piece = v
                elif n == 2 and w == 5:
                    (score,) = struct.unpack("<f", v)
                elif n == 3 and w == 0:
                    kind = v
            pieces.append((piece, score, kind))
        elif number == 2 and wire == 2:  # TrainerSpec
            for n, w, v in fields(value):
                if n in trainer_fields and w == 0:
                    trainer[trainer_fields[n]] = int32(v)
        elif number == 3 and wire == 2:  # NormalizerSpec
            for n, w, v in fields(value):
                key = normalizer_fields.get(n)
                if key is None:
                    continue
                if key == "name" and w == 2:
                    normalizer[key] = v.decode("utf-8")
                elif key == "precompiled_charsmap" and w == 2:
                    normalizer[key] = bytes(v)
                elif w == 0:
                    normalizer[key] = bool(v)
    return {"pieces": pieces, "trainer": trainer, "normalizer": normalizer}


def token_type(kind: int) -> gguf.TokenType:
    """llama.cpp's type of a piece (convert_hf_to_gguf's IsUnknown/IsControl/IsUnused/IsByte
    order; USER_DEFINED and NORMAL pieces both come out NORMAL)."""
    if kind == SPM_UNKNOWN:
        return gguf.TokenType.UNKNOWN
    if kind == SPM_CONTROL:
        return gguf.TokenType.CONTROL
    if kind == SPM_UNUSED:
        return gguf.TokenType.UNUSED
    if kind == SPM_BYTE:
        return gguf.TokenType.BYTE
    return gguf.TokenType.NORMAL


def convert(model_path: str, out: str, arch: str, name: str | None, add_bos: bool, add_eos: bool) -> dict:
    with open(model_path, "rb") as f:
        model = parse_model(f.read())
    trainer, normalizer, pieces = model["trainer"], model["normalizer"], model["pieces"]
    if trainer["model_type"] != UNIGRAM:
        raise SystemExit(f"{model_path}: trainer_spec.model_type is {trainer['model_type']}, not UNIGRAM (1)")
    if not pieces:
        raise SystemExit(f"{model_path}: no pieces")
    w = gguf.GGUFWriter(out, arch)
    w.add_name(name or os.path.splitext(os.path.basename(model_path))[0])
    w.add_tokenizer_model("t5")
    w.add_tokenizer_pre("default")
    w.add_token_list([piece for piece, _, _ in pieces])
    w.add_token_scores([score for _, score, _ in pieces])
    w.add_token_types([token_type(kind) for _, _, kind in pieces])
    w.add_add_space_prefix(normalizer["add_dummy_prefix"])
    w.add_remove_extra_whitespaces(normalizer["remove_extra_whitespaces"])
    if normalizer["precompiled_charsmap"]:
        w.add_precompiled_charsmap(normalizer["precompiled_charsmap"])
    for key, add in (("unk_id", w.add_unk_token_id), ("bos_id", w.add_bos_token_id),
                     ("eos_id", w.add_eos_token_id), ("pad_id", w.add_pad_token_id)):
        if 0 <= trainer[key] < len(pieces):
            add(trainer[key])
    w.add_add_bos_token(add_bos)
    w.add_add_eos_token(add_eos)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return model


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", help="SentencePiece .model file (Unigram)")
    ap.add_argument("out", help="GGUF file to write")
    ap.add_argument("--arch", default="t5", help="general.architecture (default: t5)")
    ap.add_argument("--name", help="general.name (default: the model file's stem)")
    ap.add_argument("--add-bos", action=argparse.BooleanOptionalAction, default=False,
                    help="tokenizer.ggml.add_bos_token (default: false)")
    ap.add_argument("--add-eos", action=argparse.BooleanOptionalAction, default=True,
                    help="tokenizer.ggml.add_eos_token (default: true)")
    args = ap.parse_args()
    model = convert(args.model, args.out, args.arch, args.name, args.add_bos, args.add_eos)
    n = model["normalizer"]
    print(f"{args.out}: {len(model['pieces'])} pieces, normalizer {n['name'] or '(unnamed)'}, "
          f"precompiled_charsmap {len(n['precompiled_charsmap'])} bytes")


if __name__ == "__main__":
    main()
