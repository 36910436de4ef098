#!/usr/bin/python3
"""Writes feature_goldens.txt: the rows three tiny vision towers and their
projectors give one image, computed here with numpy in float64 as
transformers' modeling code computes them (CLIPVisionModel under
LlavaForConditionalGeneration, SiglipVisionModel under Gemma 3's
projector, PixtralVisionModel under Mistral 3's). The specs are
tests/specs/vision/tiny-llava.toml, tiny-gemma3.toml and tiny-pixtral.toml;
tests/unit/reference_vision_test.cpp gives the reference the same weights
and pixels and compares. Needs python3-numpy (Debian); the test does not.

    /usr/bin/python3 tests/data/vision/make_feature_goldens.py

Every tensor's values are a formula of its checkpoint name n and element
index j (row-major as stored), rounded to float32:
    w(n, j) = 0.3 · sin(0.37 · j + 0.013 · s(n)),  s(n) = Σ_i (i + 1) · ord(n[i]) mod 1000
and the image's: p(c, y, x) = sin(0.1 · (c + 1) · y + 0.07 · x + 0.2 · c).
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
    x = rms_norm(x, tensor(P + "norm.weight", (hidden,)), 1e-6)
    m = 2
    grid = x.reshape(rows, cols, hidden).transpose(2, 0, 1)  # [d, h, w]
    blocks = []
    for br in range(rows // m):
        for bc in range(cols // m):
            blocks.append(grid[:, br * m:(br + 1) * m, bc * m:(bc + 1) * m].reshape(-1))  # unfold: channel, then row, column
    merged = linear(np.array(blocks), P + "patch_merger.merging_layer", hidden, hidden * m * m, False)
    return linear(gelu(linear(merged, P + "linear_1", 64, hidden, False)), P + "linear_2", 64, 64, False), (height, width)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "feature_goldens.txt"), "w") as out:
        out.write("# family height width rows cols, then the rows (tests/data/vision/make_feature_goldens.py)\n")
        for name, make in (("llava", llava), ("gemma3", gemma3), ("pixtral", pixtral)):
            rows, (height, width) = make()
            out.write("%s %d %d %d %d\n" % (name, height, width, rows.shape[0], rows.shape[1]))
            for row in rows:
                out.write(" ".join("%.17g" % v for v in row) + "\n")


if __name__ == "__main__":
    main()
