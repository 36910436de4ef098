#!/usr/bin/env python3
"""Random-weight GGUF files in llama.cpp's names for the GPU kit's shapes.

The shapes are those of bench/specs/bench-125m-*.toml and bench-8b-*.toml, so
llama.cpp runs the models lathe's bench builds run: llama-bench needs a file,
lathe's bench uploads random weights itself (speed does not depend on the
values). Writes an f16 file with llama.cpp's gguf-py (carried in the kit);
llama-quantize makes the q8_0 and q4_k_m files from it.

    make_gguf.py --gguf-py .gpu-kit/peer/gguf-py --shape 8b --out /tmp/bench-8b-f16.gguf
"""
import argparse
import sys

import numpy as np

SHAPES = {  # hidden, layers, heads, kv_heads, intermediate, vocab, rope theta
    "125m": (768, 12, 12, 4, 2048, 32000, 10000.0),
    "8b": (4096, 32, 32, 8, 14336, 128256, 500000.0),
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gguf-py", required=True, help="llama.cpp's gguf-py directory")
    parser.add_argument("--shape", choices=sorted(SHAPES), required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    sys.path.insert(0, args.gguf_py)
    import gguf  # noqa: E402 (from the kit)

    hidden, layers, heads, kv_heads, ff, vocab, theta = SHAPES[args.shape]
    head_dim = hidden // heads
    w = gguf.GGUFWriter(args.out, "llama")
    w.add_name(f"lathe-bench-{args.shape}")
    w.add_context_length(8192)
    w.add_embedding_length(hidden)
    w.add_block_count(layers)
    w.add_feed_forward_length(ff)
    w.add_head_count(heads)
    w.add_head_count_kv(kv_heads)
    w.add_rope_dimension_count(head_dim)
    w.add_rope_freq_base(theta)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    # A SentencePiece-style vocabulary of placeholder pieces: llama-bench draws
    # random token ids and never detokenizes.
    w.add_tokenizer_model("llama")
    w.add_token_list([f"<t{i}>".encode() for i in range(vocab)])
    w.add_token_scores([0.0] * vocab)
    w.add_token_types([gguf.TokenType.NORMAL] * vocab)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)

    # One pool of random f16 values (±0.02), each matrix a slice of it repeated.
    pool = (np.random.default_rng(7).uniform(-0.02, 0.02, 1 << 24)).astype(np.float16)

    def matrix(rows, cols):
        return np.resize(pool, (rows, cols))

    def norm():
        return np.ones(hidden, dtype=np.float32)

    w.add_tensor("token_embd.weight", matrix(vocab, hidden))
    for i in range(layers):
        b = f"blk.{i}."
        w.add_tensor(b + "attn_norm.weight", norm())
        w.add_tensor(b + "attn_q.weight", matrix(heads * head_dim, hidden))
        w.add_tensor(b + "attn_k.weight", matrix(kv_heads * head_dim, hidden))
        w.add_tensor(b + "attn_v.weight", matrix(kv_heads * head_dim, hidden))
        w.add_tensor(b + "attn_output.weight", matrix(hidden, heads * head_dim))
        w.add_tensor(b + "ffn_norm.weight", norm())
        w.add_tensor(b + "ffn_gate.weight", matrix(ff, hidden))
        w.add_tensor(b + "ffn_up.weight", matrix(ff, hidden))
        w.add_tensor(b + "ffn_down.weight", matrix(hidden, ff))
    w.add_tensor("output_norm.weight", norm())
    w.add_tensor("output.weight", matrix(vocab, hidden))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main()
