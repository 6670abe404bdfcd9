"""Token ids of a tiny byte-level BPE under Qwen2's and Llama 3's pre-tokenizers, from the
Hugging Face `tokenizers` package (pip install tokenizers; printed with 0.23.3), for
`tests/tokenizer.rs` (`qwen2_and_llama_bpe_splits_match_the_tokenizers_package`).

The vocabulary is GPT-2's 256 byte-level symbols sorted by code point, then the merged pieces of
MERGES in order; the pipelines are those of the models' tokenizer.json files (Qwen2.5: NFC, then
the Split below with `\\p{N}`; Llama 3: no normalizer, `\\p{N}{1,3}`), given here as JSON exactly
as those files spell them.
"""

import json

from tokenizers import Tokenizer, pre_tokenizers

MERGES = ["1 2", "12 3", "Ġ w", "l l", "ll o", "i t"]
TEXTS = ["Hello wo\u0308rld 12345 it's  ok\n\n\tx 7z!", "IT'S 1234567 ÖR\r\n  end"]


def split(digits):
    return {
        "type": "Sequence",
        "pretokenizers": [
            {
                "type": "Split",
                "pattern": {
                    "Regex": "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}"
                    + digits
                    + "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
                },
                "behavior": "Isolated",
                "invert": False,
            },
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
        ],
    }


def tokenizer(normalizer, pre):
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    tokens = alphabet + ["".join(m.split(" ")) for m in MERGES]
    return Tokenizer.from_str(
        json.dumps(
            {
                "version": "1.0",
                "truncation": None,
                "padding": None,
                "added_tokens": [],
                "normalizer": normalizer,
                "pre_tokenizer": pre,
                "post_processor": None,
                "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
                "model": {
                    "type": "BPE",
                    "dropout": None,
                    "unk_token": None,
                    "continuing_subword_prefix": None,
                    "end_of_word_suffix": None,
                    "fuse_unk": False,
                    "byte_fallback": False,
                    "vocab": {t: i for i, t in enumerate(tokens)},
                    "merges": MERGES,
                },
            }
        )
    )


for name, t in [
    ("qwen2", tokenizer({"type": "NFC"}, split(""))),
    ("llama-bpe", tokenizer(None, split("{1,3}"))),
]:
    for text in TEXTS:
        print(name, json.dumps(text), t.encode(text, add_special_tokens=False).ids)
