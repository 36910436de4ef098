#!/usr/bin/env python3
"""Writes t5-unigram.json: a T5 / XLM-RoBERTa-style Unigram tokenizer.json
over a vocabulary of a few pieces, with a precompiled_charsmap built here.

The charsmap is SentencePiece's layout (the one tokenizers' spm_precompiled
reads): u32 trie size in bytes, the Darts double-array units, then the
NUL-terminated replacements. Its few keys stand for what nmt_nfkc does:
a ligature, a decomposed accent, a no-break space, a circled digit.

Run from this folder: python3 make_t5_unigram.py
"""
import base64
import json
import struct

# key -> replacement
RULES = {
    "\ufb01": "fi",          # LATIN SMALL LIGATURE FI
    "e\u0301": "\u00e9",     # e + COMBINING ACUTE -> é
    "\u00a0": " ",           # NO-BREAK SPACE
    "\u2460": "1",           # CIRCLED DIGIT ONE
    "\u3000": " ",           # IDEOGRAPHIC SPACE
}


def build_charsmap(rules):
    blob = b""
    values = {}
    for key, rep in rules.items():
        values[key.encode()] = len(blob)
        blob += rep.encode() + b"\0"

    # The trie: node -> {byte: child}; a node that ends a key has a value.
    trie = [{}]
    ends = {}
    for key, value in values.items():
        node = 0
        for b in key:
            if b not in trie[node]:
                trie.append({})
                trie[node][b] = len(trie) - 1
            node = trie[node][b]
        ends[node] = value

    units = {}
    used_bases = set()
    position = {0: 0}
    labels = {0: 0}

    def place(node):
        p = position[node]
        wanted = sorted(trie[node])
        o = 1
        while True:
            base = p ^ o
            slots = [base ^ c for c in wanted] + ([base] if node in ends else [])
            if base not in used_bases and all(s != 0 and s not in units for s in slots) and o < (1 << 21):
                break
            o += 1
        used_bases.add(base)
        unit = (o << 10) | labels[node] | ((1 << 8) if node in ends else 0)
        units[p] = unit
        if node in ends:
            units[base] = ends[node] | (1 << 31)
        for c in wanted:
            child = trie[node][c]
            position[child] = base ^ c
            labels[child] = c
            units[base ^ c] = c  # reserved until the child is placed
        for c in wanted:
            place(trie[node][c])

    place(0)
    size = max(units) + 1
    array = [units.get(i, 0) for i in range(size)]
    return struct.pack("<I", 4 * size) + b"".join(struct.pack("<I", u) for u in array) + blob


def added(i, content):
    return {"id": i, "content": content, "single_word": False, "lstrip": False, "rstrip": False,
            "normalized": False, "special": True}


PIECES = [
    ("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0),
    ("\u2581", -2.0), ("\u2581the", -3.0), ("\u2581a", -4.0), ("b", -5.0), ("c", -5.0),
    ("ab", -6.0), ("bc", -5.5), ("\u2581ab", -9.0), ("a", -4.5), ("fi", -7.0), ("\u00e9", -6.0),
    ("\u2581fi", -6.5), ("1", -6.0), ("\u2581b", -7.0),
    ("<0xE2>", 0.0), ("<0x98>", 0.0), ("<0x83>", 0.0),
]

tokenizer = {
    "version": "1.0",
    "truncation": None,
    "padding": None,
    "added_tokens": [added(0, "<pad>"), added(1, "</s>"), added(2, "<unk>")],
    "normalizer": {"type": "Sequence", "normalizers": [
        {"type": "Precompiled",
         "precompiled_charsmap": base64.b64encode(build_charsmap(RULES)).decode()},
        {"type": "Strip", "strip_left": False, "strip_right": True},
        {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "},
    ]},
    "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True},
    "post_processor": {
        "type": "TemplateProcessing",
        "single": [{"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "</s>", "type_id": 0}}],
        "pair": [],
        "special_tokens": {"</s>": {"id": "</s>", "ids": [1], "tokens": ["</s>"]}},
    },
    "decoder": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True},
    "model": {"type": "Unigram", "unk_id": 2, "vocab": [list(p) for p in PIECES], "byte_fallback": False},
}

with open("t5-unigram.json", "w", encoding="utf-8") as f:
    json.dump(tokenizer, f, ensure_ascii=False, indent=1)
    f.write("\n")
