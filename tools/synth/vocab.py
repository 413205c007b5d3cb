"""Small but real tokenizer vocabularies for the synthetic GGUF models.

Two kinds, both learned from the little corpus below with a tiny BPE trainer:

* ``byte_level_bpe`` -- GPT-2 style: 256 byte tokens written in GPT-2's
  byte-to-unicode mapping, merged tokens in merge order, a merge list, and
  special tokens (llama.cpp ``tokenizer.ggml.model = "gpt2"``).
* ``sentencepiece`` -- SentencePiece-"llama" style: ``<unk> <s> </s>``, byte
  fallback tokens ``<0x00>..<0xFF>``, then ``▁``-prefixed pieces with scores
  (llama.cpp ``tokenizer.ggml.model = "llama"``), plus special tokens.

Everything is deterministic: ties in the trainer are broken by the pair text.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

# Token types as llama.cpp reads them from tokenizer.ggml.token_type.
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6

SPACE = "\u2581"  # ▁, SentencePiece's visible space

CORPUS = """\
The sea was calm this morning, and the small boats went out before the sun rose.
A fisherman counted his nets: one, two, three, four, five. He had 12 nets in all.
Waves move slowly over the sand; the wind carries salt and the sound of birds.
When the tide turns, the water climbs the rocks and the children run back home.
Questions? Answers! Lists, numbers (3.14, 2048, 1999) and quotes "like this".
In the evening the lighthouse shines over the harbour and the ships find their way.
Some words repeat: the the the, sea sea, water water, light light, boat boat.
Unicode matters too: café, naïve, crème brûlée, 日本語のテキスト, Ελληνικά, 🙂 and ✓.
def add(a, b):\n    return a + b  # code has indentation, tabs\tand symbols {}[]<>=!
Write a haiku about the sea. Tell me a story about a boat that learned to sing.
User: what is the capital of France? Assistant: The capital of France is Paris.
"""

# GPT-2 style pre-tokenizer (contractions, letters, numbers, other, spaces).
_PRETOKENIZE = re.compile(
    r"""'s|'t|'re|'ve|'m|'ll|'d| ?[^\W\d_]+| ?\d+| ?[^\s\w]+|\s+(?!\S)|\s+"""
)


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible mapping from the 256 byte values to printable characters."""
    printable = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("\u00a1"), ord("\u00ac") + 1))
        + list(range(ord("\u00ae"), ord("\u00ff") + 1))
    )
    mapping = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in mapping:
            mapping[b] = chr(256 + extra)
            extra += 1
    return mapping


def train_bpe(words: Counter, n_merges: int) -> list[tuple[str, str]]:
    """Learns up to ``n_merges`` merges over words given as tuples of symbols."""
    words = {tuple(w): c for w, c in words.items()}
    merges: list[tuple[str, str]] = []
    for _ in range(n_merges):
        pairs: Counter = Counter()
        for word, count in words.items():
            for a, b in zip(word, word[1:]):
                pairs[(a, b)] += count
        if not pairs:
            break
        best = max(pairs.items(), key=lambda kv: (kv[1], "".join(kv[0]), kv[0]))
        if best[1] < 2:
            break
        a, b = best[0]
        merges.append((a, b))
        merged = {}
        for word, count in words.items():
            out = []
            i = 0
            while i < len(word):
                if i + 1 < len(word) and word[i] == a and word[i + 1] == b:
                    out.append(a + b)
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            merged[tuple(out)] = merged.get(tuple(out), 0) + count
        words = merged
    return merges


@dataclass
class Vocab:
    """A tokenizer vocabulary ready to be written as tokenizer.ggml.* metadata."""

    model: str
    tokens: list[str] = field(default_factory=list)
    types: list[int] = field(default_factory=list)
    scores: list[float] = field(default_factory=list)
    merges: list[str] = field(default_factory=list)

    def add(self, text: str, kind: int = NORMAL, score: float = 0.0) -> int:
        """Appends a token and returns its id."""
        self.tokens.append(text)
        self.types.append(kind)
        self.scores.append(score)
        return len(self.tokens) - 1

    def id(self, text: str) -> int:
        """The id of a token text."""
        return self.tokens.index(text)


def byte_level_bpe(specials: list[str], n_merges: int = 300) -> Vocab:
    """GPT-2 style byte-level BPE vocabulary learned from CORPUS."""
    b2u = bytes_to_unicode()
    words: Counter = Counter()
    for piece in _PRETOKENIZE.findall(CORPUS):
        words[tuple(b2u[b] for b in piece.encode("utf-8"))] += 1
    merges = train_bpe(words, n_merges)
    vocab = Vocab(model="gpt2")
    for b in range(256):
        vocab.add(b2u[b])
    seen = set(vocab.tokens)
    for a, b in merges:
        vocab.merges.append(f"{a} {b}")
        if a + b not in seen:
            seen.add(a + b)
            vocab.add(a + b)
    for s in specials:
        vocab.add(s, CONTROL)
    return vocab


def sentencepiece(specials: list[str], n_merges: int = 300) -> Vocab:
    """SentencePiece-"llama" style vocabulary with byte fallback, learned from CORPUS."""
    words: Counter = Counter()
    chars: Counter = Counter()
    for line in CORPUS.splitlines():
        for word in line.split(" "):
            if word:
                piece = SPACE + word
                words[tuple(piece)] += 1
                chars.update(piece)
    merges = train_bpe(words, n_merges)
    vocab = Vocab(model="llama")
    vocab.add("<unk>", UNKNOWN)
    vocab.add("<s>", CONTROL)
    vocab.add("</s>", CONTROL)
    for b in range(256):
        vocab.add(f"<0x{b:02X}>", BYTE)
    seen = set()
    # Merged pieces score by merge rank (earlier = higher), single characters below all of them.
    for rank, (a, b) in enumerate(merges):
        if a + b not in seen:
            seen.add(a + b)
            vocab.add(a + b, NORMAL, -float(rank))
    # Characters seen at least twice get a piece; rarer ones go through byte fallback.
    singles = sorted(c for c, n in chars.items() if n >= 2 and c not in seen)
    for i, c in enumerate(singles):
        seen.add(c)
        vocab.add(c, NORMAL, -1000.0 - i)
    for s in specials:
        vocab.add(s, CONTROL)
    return vocab
