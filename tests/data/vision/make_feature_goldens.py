#!/usr/bin/python3
"""Writes feature_goldens.txt: the rows three tiny vision towers and their
projectors give one image, computed here with numpy in float64 as
transformers' modeling code computes them (CLIPVisionModel under
LlavaForConditionalGeneration, SiglipVisionModel under Gemma 3's
projector, PixtralVisionModel under Mistral 3's); and Llama 3.2 Vision's
(MllamaForConditionalGeneration): one image's tiled features, and the
logits of a prompt with three images whose cross-attention layers follow
MllamaProcessor's mask, then two decoded tokens. The specs are
tests/specs/vision/tiny-llava.toml, tiny-gemma3.toml, tiny-pixtral.toml and
tiny-mllama.toml; tests/unit/reference_vision_test.cpp gives the reference
the same weights and pixels and compares. Needs python3-numpy (Debian); the
test does not.

    /usr/bin/python3 tests/data/vision/make_feature_goldens.py

Every tensor's values are a formula of its checkpoint name n and element
index j (row-major as stored), rounded to float32:
    w(n, j) = 0.3 · sin(0.37 · j + 0.013 · s(n)),  s(n) = Σ_i (i + 1) · ord(n[i]) mod 1000
and the image's: p(c, y, x) = sin(0.1 · (c + 1) · y + 0.07 · x + 0.2 · c).
Mllama's (all its tensors, the decoder's too, follow w): image i's tile t,
for t below its real tiles, p(c, y, x) + 0.5 · t + 0.9 · i inside the sine;
its tiles past them zeros, as the processor pads them.
"""
import math
import os

import numpy as np


def seed(name):
    return sum((i + 1) * ord(ch) for i, ch in enumerate(name)) % 1000


def tensor(name, shape):
    n = int(np.prod(shape))
    j = np.arange(n, dtype=np.float64)
    v = (0.3 * np.sin(0.37 * j + 0.013 * seed(name))).astype(np.float32).astype(np.float64)
    return v.reshape(shape)


def pixels(channels, height, width):
    c, y, x = np.meshgrid(np.arange(channels), np.arange(height), np.arange(width), indexing="ij")
    return np.sin(0.1 * (c + 1) * y + 0.07 * x + 0.2 * c).astype(np.float32).astype(np.float64)


def layer_norm(x, w, b, eps):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def rms_norm(x, w, eps, unit_offset=False):
    y = x / np.sqrt((x * x).mean(-1, keepdims=True) + eps)
    return y * ((1.0 + w) if unit_offset else w)


def linear(x, prefix, out_features, in_features, bias=True):
    y = x @ tensor(prefix + ".weight", (out_features, in_features)).T
    return y + tensor(prefix + ".bias", (out_features,)) if bias else y


def gelu(x):
    return 0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def quick_gelu(x):
    return x / (1.0 + np.exp(-1.702 * x))


def silu(x):
    return x / (1.0 + np.exp(-x))


def patch_embed(img, name, hidden, patch, bias):
    """nn.Conv2d(channels, hidden, patch, stride=patch) → [patches, hidden], row-major."""
    c, h, w = img.shape
    weight = tensor(name + ".weight", (hidden, c, patch, patch)).reshape(hidden, -1)
    rows = []
    for r in range(h // patch):
        for col in range(w // patch):
            rows.append(img[:, r * patch:(r + 1) * patch, col * patch:(col + 1) * patch].reshape(-1))
    out = np.array(rows) @ weight.T
    return out + tensor(name + ".bias", (hidden,)) if bias else out


def attention(x, L, heads, names, bias, rope=None):
    n, d = x.shape
    hd = d // heads
    q = linear(x, L + names[0], d, d, bias).reshape(n, heads, hd).transpose(1, 0, 2)
    k = linear(x, L + names[1], d, d, bias).reshape(n, heads, hd).transpose(1, 0, 2)
    v = linear(x, L + names[2], d, d, bias).reshape(n, heads, hd).transpose(1, 0, 2)
    if rope is not None:
        cos, sin = rope
        def rotate_half(t):
            return np.concatenate([-t[..., hd // 2:], t[..., :hd // 2]], -1)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
    s = q @ k.transpose(0, 2, 1) * hd ** -0.5
    s = np.exp(s - s.max(-1, keepdims=True))
    p = s / s.sum(-1, keepdims=True)
    o = (p @ v).transpose(1, 0, 2).reshape(n, d)
    return linear(o, L + names[3], d, d, bias)


def clip_like(img, T, hidden, layers, heads, inter, patch, eps, act, class_token, pre_norm, post_norm, feature_layer):
    """CLIPVisionTransformer / SiglipVisionTransformer: hidden_states[feature_layer]
    (post_layernorm applied to the last layer's output when post_norm)."""
    x = patch_embed(img, T + "embeddings.patch_embedding", hidden, patch, bias=not class_token)
    if class_token:
        x = np.concatenate([tensor(T + "embeddings.class_embedding", (hidden,))[None, :], x])
    x = x + tensor(T + "embeddings.position_embedding.weight", (x.shape[0], hidden))
    if pre_norm:
        x = layer_norm(x, tensor(T + "pre_layrnorm.weight", (hidden,)), tensor(T + "pre_layrnorm.bias", (hidden,)), eps)
    states = [x]
    for l in range(layers):
        L = T + "encoder.layers.%d." % l
        h = layer_norm(x, tensor(L + "layer_norm1.weight", (hidden,)), tensor(L + "layer_norm1.bias", (hidden,)), eps)
        x = x + attention(h, L, heads, ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.out_proj"], True)
        h = layer_norm(x, tensor(L + "layer_norm2.weight", (hidden,)), tensor(L + "layer_norm2.bias", (hidden,)), eps)
        x = x + linear(act(linear(h, L + "mlp.fc1", inter, hidden)), L + "mlp.fc2", hidden, inter)
        states.append(x)
    out = states[feature_layer]
    if post_norm:
        out = layer_norm(out, tensor(T + "post_layernorm.weight", (hidden,)), tensor(T + "post_layernorm.bias", (hidden,)), eps)
    return out


def llava():
    """tiny-llava: CLIP, 4 × 4 patches of 4, hidden state −2, the class row dropped, linear–GELU–linear."""
    img = pixels(3, 16, 16)
    feat = clip_like(img, "vision_tower.vision_model.", 32, 2, 2, 48, 4, 1e-5, quick_gelu, True, True, False, -2)[1:]
    P = "multi_modal_projector."
    return linear(gelu(linear(feat, P + "linear_1", 64, 32)), P + "linear_2", 64, 64), (16, 16)


def gemma3():
    """tiny-gemma3: SigLIP, 8 × 8 patches of 4, post_layernorm, pooled to 4 × 4, a Gemma norm, one projection."""
    img = pixels(3, 32, 32)
    feat = clip_like(img, "vision_tower.vision_model.", 32, 2, 2, 48, 4, 1e-6, gelu_tanh, False, False, True, -1)
    g, side, d = 8, 4, 32
    k = g // side
    grid = feat.T.reshape(d, g, g)
    pooled = grid.reshape(d, side, k, side, k).mean(axis=(2, 4)).reshape(d, side * side).T
    P = "multi_modal_projector."
    normed = rms_norm(pooled, tensor(P + "mm_soft_emb_norm.weight", (d,)), 1e-6, unit_offset=True)
    return normed @ tensor(P + "mm_input_projection_weight", (d, 64)), (32, 32)


def pixtral():
    """tiny-pixtral: Pixtral, a 24 × 32 image (6 × 8 patches of 4) of a 32-pixel tower, 2D RoPE,
    then Mistral 3's norm, 2 × 2 patch merger and linear–GELU–linear without biases."""
    height, width, patch, hidden, heads, inter, layers, theta = 24, 32, 4, 32, 2, 48, 2, 10000.0
    img = pixels(3, height, width)
    T = "vision_tower."
    x = patch_embed(img, T + "patch_conv", hidden, patch, bias=False)
    x = rms_norm(x, tensor(T + "ln_pre.weight", (hidden,)), 1e-5)
    # PixtralRotaryEmbedding: each patch's frequencies from its row and column.
    dim, side = hidden // heads, 32 // patch
    freqs = 1.0 / (theta ** (np.arange(0, dim, 2, dtype=np.float64) / dim))
    fh = np.outer(np.arange(side), freqs[::2])
    fw = np.outer(np.arange(side), freqs[1::2])
    table = np.concatenate([np.repeat(fh[:, None, :], side, 1), np.repeat(fw[None, :, :], side, 0)], -1).reshape(-1, dim // 2)
    table = np.concatenate([table, table], -1)
    rows, cols = height // patch, width // patch
    ids = (np.arange(rows)[:, None] * side + np.arange(cols)[None, :]).reshape(-1)
    rope = (np.cos(table[ids])[None], np.sin(table[ids])[None])
    for l in range(layers):
        L = T + "transformer.layers.%d." % l
        h = rms_norm(x, tensor(L + "attention_norm.weight", (hidden,)), 1e-5)
        x = x + attention(h, L, heads, ["attention.q_proj", "attention.k_proj", "attention.v_proj", "attention.o_proj"],
                          False, rope)
        h = rms_norm(x, tensor(L + "ffn_norm.weight", (hidden,)), 1e-5)
        F = L + "feed_forward."
        x = x + linear(silu(linear(h, F + "gate_proj", inter, hidden, False)) * linear(h, F + "up_proj", inter, hidden, False),
                       F + "down_proj", hidden, inter, False)
    P = "multi_modal_projector."
    x = rms_norm(x, tensor(P + "norm.weight", (hidden,)), 1e-5)  # text_config.rms_norm_eps
    m = 2
    grid = x.reshape(rows, cols, hidden).transpose(2, 0, 1)  # [d, h, w]
    blocks = []
    for br in range(rows // m):
        for bc in range(cols // m):
            blocks.append(grid[:, br * m:(br + 1) * m, bc * m:(bc + 1) * m].reshape(-1))  # unfold: channel, then row, column
    merged = linear(np.array(blocks), P + "patch_merger.merging_layer", hidden, hidden * m * m, False)
    return linear(gelu(linear(merged, P + "linear_1", 64, hidden, False)), P + "linear_2", 64, 64, False), (height, width)


# Llama 3.2 Vision (tests/specs/vision/tiny-mllama.toml).
MLLAMA_TILES = 4          # max_num_tiles
MLLAMA_RATIOS = 9         # max_aspect_ratio_id + 1: the 8 arrangements of at most 4 tiles, and 0
MLLAMA_IMAGES = ((3, 3), (4, 6), (1, 1))  # each image's (real tiles, aspect_ratio_id)
MLLAMA_PROMPT = [5, 17, 211, 7, 211, 211, 11, 13]
MLLAMA_DECODED = [3, 4]
MLLAMA_MARKER = 211      # the first of the token table's 8 rows past the vocabulary


def mllama_tiles(image, real):
    out = np.zeros((MLLAMA_TILES, 3, 16, 16))
    c, y, x = np.meshgrid(np.arange(3), np.arange(16), np.arange(16), indexing="ij")
    for t in range(real):
        out[t] = np.sin(0.1 * (c + 1) * y + 0.07 * x + 0.2 * c + 0.5 * t + 0.9 * image).astype(np.float32)
    return out


def mllama_layer(x, L, hidden, heads, inter, masked, gated):
    """MllamaVisionEncoderLayer: LayerNorm, attention without biases under the
    additive mask, fc1–GELU–fc2; a global layer's branches tanh-gated."""
    n = x.shape[0]
    hd = hidden // heads
    h = layer_norm(x, tensor(L + "input_layernorm.weight", (hidden,)), tensor(L + "input_layernorm.bias", (hidden,)), 1e-5)
    q = linear(h, L + "self_attn.q_proj", hidden, hidden, False).reshape(n, heads, hd).transpose(1, 0, 2)
    k = linear(h, L + "self_attn.k_proj", hidden, hidden, False).reshape(n, heads, hd).transpose(1, 0, 2)
    v = linear(h, L + "self_attn.v_proj", hidden, hidden, False).reshape(n, heads, hd).transpose(1, 0, 2)
    s = q @ k.transpose(0, 2, 1) / math.sqrt(hd) + np.where(masked, -np.inf, 0.0)[None]
    p = np.exp(s - s.max(-1, keepdims=True))
    p = p / p.sum(-1, keepdims=True)
    a = linear((p @ v).transpose(1, 0, 2).reshape(n, hidden), L + "self_attn.o_proj", hidden, hidden, False)
    x = x + (np.tanh(tensor(L + "gate_attn", (1,))[0]) if gated else 1.0) * a
    h = layer_norm(x, tensor(L + "post_attention_layernorm.weight", (hidden,)),
                   tensor(L + "post_attention_layernorm.bias", (hidden,)), 1e-5)
    m = linear(gelu(linear(h, L + "mlp.fc1", inter, hidden)), L + "mlp.fc2", hidden, inter)
    return x + (np.tanh(tensor(L + "gate_ffn", (1,))[0]) if gated else 1.0) * m


def mllama_features(image):
    """MllamaVisionModel then multi_modal_projector: [tiles · (patches + 1)] rows of the decoder's width."""
    real, ratio = MLLAMA_IMAGES[image]
    px = mllama_tiles(image, real)
    V = "vision_model."
    T, hidden, patch, heads, inter, layers, global_layers, extra = MLLAMA_TILES, 32, 4, 2, 48, 2, 1, [1]
    P = (16 // patch) ** 2
    N = P + 1
    pad = (8 - N % 8) % 8
    x = np.stack([patch_embed(px[t], V + "patch_embedding", hidden, patch, bias=False) for t in range(T)])
    pre = tensor(V + "pre_tile_positional_embedding.embedding.weight", (MLLAMA_RATIOS, T * hidden))[ratio]
    x = x + np.tanh(tensor(V + "pre_tile_positional_embedding.gate", (1,))[0]) * pre.reshape(T, 1, hidden)
    cls = tensor(V + "class_embedding", (hidden,))
    x = np.concatenate([np.broadcast_to(cls, (T, 1, hidden)), x], 1)
    g = np.tanh(tensor(V + "gated_positional_embedding.gate", (1,))[0])
    x = x + (1 - g) * tensor(V + "gated_positional_embedding.embedding", (N, hidden))[None]
    tile_pos = tensor(V + "gated_positional_embedding.tile_embedding.weight", (MLLAMA_RATIOS, T * N * hidden))[ratio]
    x = x + g * tile_pos.reshape(T, N, hidden)
    x = layer_norm(x, tensor(V + "layernorm_pre.weight", (hidden,)), tensor(V + "layernorm_pre.bias", (hidden,)), 1e-5)
    x = np.concatenate([x, np.zeros((T, pad, hidden))], 1).reshape(-1, hidden)
    # _prepare_aspect_ratio_attention_mask: a pair is masked only when both
    # rows are padding (a pad row, or a tile past the real ones).
    invalid = np.ones((T, N + pad))
    invalid[:real, :N] = 0
    invalid = invalid.reshape(-1)
    masked = np.outer(invalid, invalid) > 0
    states = [x]
    for l in range(layers):
        x = mllama_layer(x, V + "transformer.layers.%d." % l, hidden, heads, inter, masked, False)
        states.append(x)
    x = layer_norm(x, tensor(V + "layernorm_post.weight", (hidden,)), tensor(V + "layernorm_post.bias", (hidden,)), 1e-5)
    post = tensor(V + "post_tile_positional_embedding.embedding.weight", (MLLAMA_RATIOS, T * hidden))[ratio]
    x = (x.reshape(T, N + pad, hidden) +
         np.tanh(tensor(V + "post_tile_positional_embedding.gate", (1,))[0]) * post.reshape(T, 1, hidden)).reshape(-1, hidden)
    for l in range(global_layers):
        x = mllama_layer(x, V + "global_transformer.layers.%d." % l, hidden, heads, inter, masked, True)
    x = x.reshape(T, N + pad, hidden)[:, :N]
    inter_states = np.stack([states[i] for i in extra], -1).reshape(T, N + pad, -1)[:, :N]
    feats = np.concatenate([x, inter_states], -1).reshape(T * N, -1)
    return linear(feats, "multi_modal_projector", 64, feats.shape[1])


def mllama_cross_mask(tokens, length):
    """MllamaProcessor: get_cross_attention_token_mask, then
    convert_sparse_cross_attention_mask_to_dense, [length][images][tiles]."""
    locs = [i for i, t in enumerate(tokens) if t == MLLAMA_MARKER]
    if len(locs) == 1:
        spans = [[locs[0], -1]]
    else:
        spans = [[a, b] for a, b in zip(locs[:-1], locs[1:])] + [[locs[-1], len(tokens)]]
        last = spans[-1][1]
        for span in spans[::-1]:
            if span[0] == span[1] - 1:
                span[1] = last
            last = span[1]
    dense = np.zeros((length, len(locs), MLLAMA_TILES))
    for i, (start, end) in enumerate(spans):
        end = min(end, length)
        if end == -1:
            end = length
        dense[start:end, i, :MLLAMA_IMAGES[i][0]] = 1
    return dense


def mllama_logits():
    """MllamaForConditionalGeneration over the prompt and the decoded tokens
    (generate() repeats the prompt's last mask row for each)."""
    tokens = MLLAMA_PROMPT + MLLAMA_DECODED
    S, D, heads, kv_heads, inter, vocab, eps = len(tokens), 64, 4, 2, 96, 211, 1e-5
    hd, group, N = D // heads, heads // kv_heads, (16 // 4) ** 2 + 1
    features = np.concatenate([mllama_features(i) for i in range(len(MLLAMA_IMAGES))])
    dense = mllama_cross_mask(MLLAMA_PROMPT, len(MLLAMA_PROMPT))
    dense = np.concatenate([dense, np.repeat(dense[-1:], len(MLLAMA_DECODED), 0)])
    allowed = np.repeat(dense.reshape(S, -1), N, axis=1) > 0  # [S][keys]: repeat_interleave(num_vision_tokens)
    row_open = allowed.any(-1)  # full_text_row_masked_out_mask
    bias = np.where(allowed, 0.0, -np.inf)
    bias[~row_open] = 0.0  # a row with no image attends to every key, its MLP zeroed
    inv_freq = 1.0 / (10000.0 ** (np.arange(0, hd, 2, dtype=np.float64) / hd))
    ang = np.outer(np.arange(S), inv_freq)
    cos, sin = np.cos(np.concatenate([ang, ang], -1)), np.sin(np.concatenate([ang, ang], -1))

    def rope(t):  # [S, h, hd]
        return t * cos[:, None] + np.concatenate([-t[..., hd // 2:], t[..., :hd // 2]], -1) * sin[:, None]

    def attend(q, k, v, add):  # q [S, heads, hd], k/v [M, kv_heads, hd]
        out = np.zeros((q.shape[0], heads, hd))
        for h in range(heads):
            s = q[:, h] @ k[:, h // group].T / math.sqrt(hd) + add
            p = np.exp(s - s.max(-1, keepdims=True))
            out[:, h] = (p / p.sum(-1, keepdims=True)) @ v[:, h // group]
        return out.reshape(q.shape[0], D)

    def mlp(h, L):
        return linear(silu(linear(h, L + "mlp.gate_proj", inter, D, False)) * linear(h, L + "mlp.up_proj", inter, D, False),
                      L + "mlp.down_proj", D, inter, False)

    x = tensor("model.embed_tokens.weight", (vocab + 8, D))[tokens]
    causal = np.where(np.tril(np.ones((S, S))) > 0, 0.0, -np.inf)
    for l in range(2):
        L = "model.layers.%d." % l
        h = rms_norm(x, tensor(L + "input_layernorm.weight", (D,)), eps)
        if l == 1:  # MllamaCrossAttentionDecoderLayer
            C = L + "cross_attn."
            q = rms_norm(linear(h, C + "q_proj", D, D, False).reshape(S, heads, hd), tensor(C + "q_norm.weight", (hd,)), eps)
            M = features.shape[0]
            k = rms_norm(linear(features, C + "k_proj", kv_heads * hd, D, False).reshape(M, kv_heads, hd),
                         tensor(C + "k_norm.weight", (hd,)), eps)
            v = linear(features, C + "v_proj", kv_heads * hd, D, False).reshape(M, kv_heads, hd)
            a = linear(attend(q, k, v, bias), C + "o_proj", D, D, False)
            x = x + np.tanh(tensor(L + "cross_attn_attn_gate", (1,))[0]) * a
            m = mlp(rms_norm(x, tensor(L + "post_attention_layernorm.weight", (D,)), eps), L) * row_open[:, None]
            x = x + np.tanh(tensor(L + "cross_attn_mlp_gate", (1,))[0]) * m
        else:  # MllamaSelfAttentionDecoderLayer
            A = L + "self_attn."
            q = rope(linear(h, A + "q_proj", D, D, False).reshape(S, heads, hd))
            k = rope(linear(h, A + "k_proj", kv_heads * hd, D, False).reshape(S, kv_heads, hd))
            v = linear(h, A + "v_proj", kv_heads * hd, D, False).reshape(S, kv_heads, hd)
            x = x + linear(attend(q, k, v, causal), A + "o_proj", D, D, False)
            x = x + mlp(rms_norm(x, tensor(L + "post_attention_layernorm.weight", (D,)), eps), L)
    x = rms_norm(x, tensor("model.norm.weight", (D,)), eps)
    return x @ tensor("lm_head.weight", (vocab, D)).T


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "feature_goldens.txt"), "w") as out:
        out.write("# family height width rows cols, then the rows (tests/data/vision/make_feature_goldens.py)\n")
        for name, make in (("llava", llava), ("gemma3", gemma3), ("pixtral", pixtral)):
            rows, (height, width) = make()
            out.write("%s %d %d %d %d\n" % (name, height, width, rows.shape[0], rows.shape[1]))
            for row in rows:
                out.write(" ".join("%.17g" % v for v in row) + "\n")
        for name, rows in (("mllama-features", mllama_features(0)), ("mllama-logits", mllama_logits())):
            out.write("%s 16 16 %d %d\n" % (name, rows.shape[0], rows.shape[1]))
            for row in rows:
                out.write(" ".join("%.17g" % v for v in row) + "\n")


if __name__ == "__main__":
    main()
