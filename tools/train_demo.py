#!/usr/bin/python3
"""Trains lathe's shipped demo model: a small Llama-family transformer on the
King James Bible, on the CPU, in about 25 minutes on two cores.

Not needed to build or test lathe; it only remakes models/demo/ and
models/demo.toml:

    apt-get install python3-torch python3-sentencepiece python3-numpy \
                    libopenblas0-pthread bible-kjv bible-kjv-text
    /usr/bin/python3 tools/train_demo.py

(/usr/bin/python3: Debian's torch lives in Debian's Python, which a pyenv or
venv python3 on PATH may not see. libopenblas0-pthread: Debian's torch calls
the system BLAS, which without it is the reference BLAS, about 12 times
slower.)

Steps: the text (the `bible` program of bible-kjv decompresses the text of
bible-kjv-text) → a SentencePiece BPE tokenizer → a model whose forward is
exactly lathe's CPU reference (runtime/reference/reference.cpp) for the spec
this script writes → f16 safetensors in Hugging Face Llama names → a golden
greedy continuation, computed from the saved f16 weights, for lathe's
end-to-end checks.
"""

import argparse
import json
import math
import os
import re
import shutil
import struct
import subprocess
import sys
import time

import numpy as np
import sentencepiece as spm
import torch
import torch.nn.functional as F
from torch import nn

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The architecture. Every width is a multiple of 8 (head_dim = 256 / 8 = 32),
# so each kernel's vector loads divide every row.
CONFIG = {
    "hidden": 256,
    "layers": 6,
    "heads": 8,
    "kv_heads": 4,
    "intermediate": 768,
    "vocab": 3072,
    "max_context": 256,
    "eps": 1e-5,
    "theta": 10000.0,
}

# SentencePiece's special ids, as Llama/SmolLM tokenizers have them.
UNK, BOS, EOS = 0, 1, 2

PROMPT = "In the beginning"
GOLDEN_TOKENS = 48
NEAR_TIE = 0.02  # a top-1 minus top-2 logit gap below this may flip between f32 implementations


def log(*args):
    print(*args, flush=True)


# ---------------------------------------------------------------- the corpus


def extract_kjv(path):
    """Writes the KJV as plain text, one verse per line, and returns its
    chapters as lists of verses.

    bible-kjv-text ships the text compressed (/usr/lib/bible.data); its reader
    is the `bible` program of bible-kjv. With a huge line width it prints a
    heading line per chapter ("Genesis 1") and one line per verse, each
    starting with its verse number ("  1 In the beginning God created ...")."""
    if shutil.which("bible") is None:
        sys.exit("train_demo: no `bible` program: apt-get install bible-kjv bible-kjv-text")
    out = subprocess.run(["bible", "-l100000", "gen1:1-rev22:21"], check=True, capture_output=True, text=True,
                         cwd="/").stdout
    chapters = []
    for line in out.splitlines():
        if not line.strip():
            continue
        if line.startswith(" "):  # "  <n> <verse text>"
            number, _, text = line.strip().partition(" ")
            if not number.isdigit() or not chapters:
                sys.exit(f"train_demo: unexpected line from bible: {line!r}")
            chapters[-1].append(" ".join(text.split()))
        else:  # "<Book> <chapter>"
            chapters.append([])
    verses = sum(len(c) for c in chapters)
    if len(chapters) != 1189 or verses != 31102:  # the KJV's counts
        sys.exit(f"train_demo: expected 1189 chapters and 31102 verses, got {len(chapters)} and {verses}")
    with open(path, "w") as f:
        for chapter in chapters:
            for verse in chapter:
                f.write(verse + "\n")
    return chapters


def train_tokenizer(corpus, prefix, vocab):
    # BPE with byte fallback: every string encodes, no <unk> in practice.
    # Identity normalization: the text is plain ASCII and a C++ tokenizer
    # then has nothing to reproduce. add_dummy_prefix (the default) puts "▁"
    # before the first word, so "In the beginning" is "▁In ▁the ▁beginning".
    spm.SentencePieceTrainer.train(
        input=corpus, model_prefix=prefix, model_type="bpe", vocab_size=vocab, byte_fallback=True,
        character_coverage=1.0, normalization_rule_name="identity", unk_id=UNK, bos_id=BOS, eos_id=EOS,
        pad_id=-1, num_threads=2, minloglevel=2)
    return spm.SentencePieceProcessor(model_file=prefix + ".model")


def encode_chapters(sp, chapters):
    """One document per chapter: <s> verse verse ... </s>. Each verse is
    encoded on its own, so each starts with "▁" and decodes with a space
    before it."""
    docs = []
    for chapter in chapters:
        ids = [BOS]
        for piece in sp.encode(chapter):
            ids.extend(piece)
        ids.append(EOS)
        docs.append(np.array(ids, dtype=np.int16))
    return docs


# ----------------------------------------------------------------- the model


class RMSNorm(nn.Module):
    def __init__(self, d, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))  # [d]

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.heads, self.kv_heads = c["heads"], c["kv_heads"]
        self.head_dim = c["hidden"] // c["heads"]
        d, hd = c["hidden"], self.head_dim
        self.q_proj = nn.Linear(d, self.heads * hd, bias=False)     # [heads * head_dim][hidden]
        self.k_proj = nn.Linear(d, self.kv_heads * hd, bias=False)  # [kv_heads * head_dim][hidden]
        self.v_proj = nn.Linear(d, self.kv_heads * hd, bias=False)  # [kv_heads * head_dim][hidden]
        self.o_proj = nn.Linear(self.heads * hd, d, bias=False)     # [hidden][heads * head_dim]

    def forward(self, x, cos, sin, mask):
        b, t, _ = x.shape
        hd, group = self.head_dim, self.heads // self.kv_heads
        q = self.q_proj(x).view(b, t, self.heads, hd).transpose(1, 2)     # [b][heads][t][hd]
        k = self.k_proj(x).view(b, t, self.kv_heads, hd).transpose(1, 2)  # [b][kv_heads][t][hd]
        v = self.v_proj(x).view(b, t, self.kv_heads, hd).transpose(1, 2)
        q, k = rope(q, cos, sin), rope(k, cos, sin)
        # GQA: query head h reads KV head h / group. The group's query heads
        # are stacked along the rows, [b][kv_heads][group * t][hd], so each
        # KV head is multiplied once and never copied. The score scale is
        # applied to q, the smaller tensor.
        q = q.reshape(b, self.kv_heads, group * t, hd) * (1.0 / math.sqrt(hd))
        scores = q @ k.transpose(-2, -1)                                   # [b][kv_heads][group * t][t]
        scores = scores.masked_fill(mask.repeat(group, 1), float("-inf"))
        y = (torch.softmax(scores, dim=-1) @ v).view(b, self.heads, t, hd)
        return self.o_proj(y.transpose(1, 2).reshape(b, t, self.heads * hd))


def rope(x, cos, sin):
    """Rotate-half ("neox") RoPE over the whole head: dimension i pairs with
    i + hd/2, angle = position · theta^(-2i/hd)."""
    half = x.shape[-1] // 2
    x0, x1 = x[..., :half], x[..., half:]
    return torch.cat((x0 * cos - x1 * sin, x0 * sin + x1 * cos), dim=-1)


class MLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        d, i = c["hidden"], c["intermediate"]
        self.gate_proj = nn.Linear(d, i, bias=False)  # [intermediate][hidden]
        self.up_proj = nn.Linear(d, i, bias=False)    # [intermediate][hidden]
        self.down_proj = nn.Linear(i, d, bias=False)  # [hidden][intermediate]

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Layer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.input_layernorm = RMSNorm(c["hidden"], c["eps"])
        self.self_attn = Attention(c)
        self.post_attention_layernorm = RMSNorm(c["hidden"], c["eps"])
        self.mlp = MLP(c)

    def forward(self, x, cos, sin, mask):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, mask)
        return x + self.mlp(self.post_attention_layernorm(x))


class Demo(nn.Module):
    """Module names follow Hugging Face's LlamaForCausalLM, so state_dict()
    keys are the checkpoint's tensor names (the spec's hf-llama preset)."""

    def __init__(self, c):
        super().__init__()
        self.c = c
        self.model = nn.Module()
        self.model.embed_tokens = nn.Embedding(c["vocab"], c["hidden"])  # [vocab][hidden], also the LM head
        self.model.layers = nn.ModuleList(Layer(c) for _ in range(c["layers"]))
        self.model.norm = RMSNorm(c["hidden"], c["eps"])
        # cos/sin: [max_context][head_dim / 2] in float64, as the reference
        # computes them; forward() rounds them once to the weights' dtype.
        hd = c["hidden"] // c["heads"]
        inv_freq = c["theta"] ** (-2.0 * torch.arange(hd // 2, dtype=torch.float64) / hd)
        angles = torch.arange(c["max_context"], dtype=torch.float64)[:, None] * inv_freq[None, :]
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    @torch.no_grad()
    def init_weights(self, seed):
        g = torch.Generator().manual_seed(seed)
        residual_std = 0.02 / math.sqrt(2 * self.c["layers"])  # the two writes per layer into the residual stream
        for name, p in self.named_parameters():
            if name.endswith("layernorm.weight") or name == "model.norm.weight":
                p.fill_(1.0)
            elif name.endswith("o_proj.weight") or name.endswith("down_proj.weight"):
                p.normal_(0.0, residual_std, generator=g)
            else:
                p.normal_(0.0, 0.02, generator=g)

    def forward(self, ids):  # ids: [b][t] → logits [b][t][vocab]
        t = ids.shape[1]
        mask = torch.ones(t, t, dtype=torch.bool, device=ids.device).triu(1)  # True above the diagonal: the future
        cos, sin = self.cos[:t].to(self.model.norm.weight.dtype), self.sin[:t].to(self.model.norm.weight.dtype)
        x = self.model.embed_tokens(ids)
        for layer in self.model.layers:
            x = layer(x, cos, sin, mask)
        return self.model.norm(x) @ self.model.embed_tokens.weight.t()  # tied LM head


def param_count(c):
    d, hd = c["hidden"], c["hidden"] // c["heads"]
    per_layer = 2 * d + d * c["heads"] * hd * 2 + d * c["kv_heads"] * hd * 2 + 3 * d * c["intermediate"]
    return c["vocab"] * d + c["layers"] * per_layer + d


# -------------------------------------------------------------- the training


class Batches:
    """Windows of seq + 1 tokens from the concatenated chapters. One window in
    8 starts at a chapter's <s>, so the model also sees <s> at position 0
    with nothing before it, as a prompt puts it."""

    def __init__(self, docs, seq, batch, seed):
        self.stream = torch.from_numpy(np.concatenate(docs).astype(np.int64))
        starts = np.cumsum([0] + [len(d) for d in docs[:-1]])
        self.starts = torch.from_numpy(starts[starts + seq + 1 <= len(self.stream)].astype(np.int64))
        self.seq, self.batch = seq, batch
        self.g = torch.Generator().manual_seed(seed)

    def next(self):
        n = len(self.stream) - self.seq - 1
        begin = torch.randint(0, n + 1, (self.batch,), generator=self.g)
        aligned = torch.rand(self.batch, generator=self.g) < 0.125
        pick = self.starts[torch.randint(0, len(self.starts), (self.batch,), generator=self.g)]
        begin = torch.where(aligned, pick, begin)
        rows = torch.stack([self.stream[b:b + self.seq + 1] for b in begin.tolist()])
        return rows[:, :-1], rows[:, 1:]


def evaluate(model, docs, seq):
    """Mean loss over the held-out chapters, cut into consecutive windows."""
    stream = torch.from_numpy(np.concatenate(docs).astype(np.int64))
    n = (len(stream) - 1) // seq
    x = stream[:n * seq].view(n, seq)
    y = stream[1:n * seq + 1].view(n, seq)
    model.eval()
    total = 0.0
    with torch.no_grad():
        for i in range(0, n, 16):
            logits = model(x[i:i + 16])
            total += F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y[i:i + 16].reshape(-1),
                                     reduction="sum").item()
    model.train()
    return total / (n * seq)


def train(model, train_docs, val_docs, args):
    decay = [p for n, p in model.named_parameters() if p.dim() == 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8)
    batches = Batches(train_docs, args.seq, args.batch, args.seed + 1)
    warmup = min(200, args.steps // 10)

    def lr_at(step):  # linear warmup, then cosine down to a tenth
        if step < warmup:
            return args.lr * (step + 1) / warmup
        progress = (step - warmup) / max(1, args.steps - warmup)
        return args.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))

    start = time.time()
    running, seen, history = 0.0, 0, []
    for step in range(args.steps):
        for group in opt.param_groups:
            group["lr"] = lr_at(step)
        x, y = batches.next()
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        running += loss.item()
        seen += 1
        done = step + 1
        if done % args.log_every == 0 or done == args.steps or done == 5:
            elapsed = time.time() - start
            rate = done / elapsed
            log(f"step {done:5d}/{args.steps}  loss {running / seen:.4f}  lr {lr_at(step):.2e}  "
                f"{rate:.2f} steps/s  {rate * args.batch * args.seq:.0f} tok/s  "
                f"elapsed {elapsed / 60:.1f} min  eta {(args.steps - done) / rate / 60:.1f} min")
            history.append((done, running / seen))
            running, seen = 0.0, 0
        if args.eval_every and (done % args.eval_every == 0 or done == args.steps):
            log(f"step {done:5d}  held-out loss {evaluate(model, val_docs, args.seq):.4f}")
    return time.time() - start, history


# ------------------------------------------------------------------ the files


def write_safetensors(path, tensors, metadata):
    """safetensors: an 8-byte little-endian header length, a JSON header
    {name: {dtype, shape, data_offsets}} padded with spaces to a multiple of
    8, then the tensors' little-endian bytes back to back."""
    header, offset, blobs = {"__metadata__": metadata}, 0, []
    for name, array in tensors.items():
        data = np.ascontiguousarray(array, dtype="<f2").tobytes()
        header[name] = {"dtype": "F16", "shape": list(array.shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for data in blobs:
            f.write(data)


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    body = raw[8 + n:]
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        assert entry["dtype"] == "F16", name
        begin, end = entry["data_offsets"]
        out[name] = np.frombuffer(body[begin:end], dtype="<f2").reshape(entry["shape"])
    return out


SPEC = """\
# lathe's demo model: a small Llama-family transformer trained from scratch
# on the King James Bible by tools/train_demo.py (weights, tokenizer and a
# golden greedy continuation in models/demo/).
# Llama architecture: GQA {heads}:{kv_heads}, SwiGLU, RMSNorm, rotate-half RoPE, tied embeddings.
# {params:,} parameters, {megabytes:.1f} MB in f16.

[model]
name = "demo"
source = "tools/train_demo.py on the King James Bible (bible-kjv-text)"

[dims]
hidden = {hidden}
layers = {layers}
heads = {heads}
kv_heads = {kv_heads}
intermediate = {intermediate}
vocab = {vocab}          # SentencePiece BPE, byte fallback: <unk> 0, <s> 1, </s> 2
max_context = {max_context}     # the training window

[norm]
kind = "rmsnorm"
eps = {eps_text}
placement = "pre"

[position]
kind = "rope"
pairing = "neox"      # rotate-half, as the training script's rope()
theta = {theta:.1f}

[mlp]
activation = "silu"
gated = true

[embedding]
tied = true           # the checkpoint has no lm_head

[weights]
dtype = "f16"
preset = "hf-llama"

[cache]
dtype = "f32"         # so decoding follows the f32 reference closely
"""


def eps_text(eps):  # 1e-5, as the other specs write it, not Python's 1e-05
    return f"{eps:g}".replace("e-0", "e-")


# ------------------------------------------------------------- the generation


@torch.no_grad()
def greedy(model, ids, n):
    """n greedy tokens after ids, recomputing the whole sequence each step
    (no cache, nothing to get wrong); returns them with each step's top-1
    minus top-2 logit margin."""
    ids, out, margins = list(ids), [], []
    for _ in range(n):
        logits = model(torch.tensor([ids]))[0, -1]
        top = torch.topk(logits, 2)
        margins.append(float(top.values[0] - top.values[1]))
        ids.append(int(top.indices[0]))
        out.append(ids[-1])
    return out, margins


@torch.no_grad()
def sample(model, ids, n, temperature, g):
    ids = list(ids)
    for _ in range(n):
        logits = model(torch.tensor([ids[-model.c["max_context"]:]]))[0, -1].double()
        probs = torch.softmax(logits / temperature, dim=-1)
        ids.append(int(torch.multinomial(probs, 1, generator=g)))
    return ids


# ------------------------------------------------------------------ perplexity


@torch.no_grad()
def perplexity(path, n_ctx, out):
    """Perplexity of the shipped model on a text file, as llama.cpp's
    llama-perplexity computes it (and `demo perplexity` does): <s> + the
    file's SentencePiece encoding, cut into whole chunks of n_ctx tokens,
    each chunk's first token replaced by <s>, and the negative
    log-likelihood of every token of a chunk's second half (positions
    n_ctx/2 + 1 … n_ctx - 1, each predicted from all before it in the chunk).
    Prints PPL = exp(mean NLL) and its standard error."""
    sp = spm.SentencePieceProcessor(model_file=os.path.join(out, "tokenizer.model"))
    c = dict(CONFIG)
    model = Demo(c)
    weights = read_safetensors(os.path.join(out, "model.safetensors"))
    model.load_state_dict({n: torch.from_numpy(a.astype(np.float32)) for n, a in weights.items()})
    model.eval()
    with open(path, encoding="utf-8") as f:
        tokens = [BOS] + sp.encode(f.read())
    first = n_ctx // 2
    nll = nll2 = 0.0
    count = 0
    for i in range(len(tokens) // n_ctx):
        ids = tokens[i * n_ctx:(i + 1) * n_ctx]
        ids[0] = BOS
        logp = torch.log_softmax(model(torch.tensor([ids]))[0].double(), dim=-1)
        for j in range(first, n_ctx - 1):
            v = -float(logp[j, ids[j + 1]])
            nll, nll2, count = nll + v, nll2 + v * v, count + 1
    mean = nll / count
    ppl = math.exp(mean)
    err = math.sqrt(max(nll2 / count - mean * mean, 0.0) / (count - 1)) * ppl
    print(f"{len(tokens)} tokens, {len(tokens) // n_ctx} chunks of {n_ctx}, {count} scored: PPL = {ppl:.6f} +/- {err:.6f}")


# ------------------------------------------------------------------------ main


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=720,
                    help="optimizer steps (about 19 min on 2 idle cores, at 0.65 steps/s)")
    ap.add_argument("--batch", type=int, default=8, help="windows per step")
    ap.add_argument("--seq", type=int, default=256, help="tokens per window (= max_context)")
    ap.add_argument("--lr", type=float, default=2e-3, help="peak learning rate")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--log-every", type=int, default=25)
    ap.add_argument("--eval-every", type=int, default=250)
    ap.add_argument("--out", default=os.path.join(REPO, "models", "demo"),
                    help="folder of the weights, tokenizer and golden")
    ap.add_argument("--spec", default=os.path.join(REPO, "models", "demo.toml"))
    ap.add_argument("--work", default="/tmp/lathe-train-demo", help="scratch folder (corpus, tokenizer training)")
    ap.add_argument("--perplexity", metavar="FILE",
                    help="only print the perplexity of the shipped model (--out) on FILE, as llama-perplexity computes it")
    args = ap.parse_args()
    if args.perplexity:
        torch.set_num_threads(args.threads)
        return perplexity(args.perplexity, args.seq, args.out)

    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    torch.set_num_threads(args.threads)
    os.makedirs(args.out, exist_ok=True)
    os.makedirs(args.work, exist_ok=True)
    c = dict(CONFIG, max_context=args.seq)
    command = "/usr/bin/python3 tools/train_demo.py" + "".join(f" {a}" for a in sys.argv[1:])

    corpus = os.path.join(args.work, "kjv.txt")
    chapters = extract_kjv(corpus)
    log(f"corpus: {len(chapters)} chapters, {sum(len(ch) for ch in chapters)} verses, "
        f"{os.path.getsize(corpus):,} bytes → {corpus}")

    sp = train_tokenizer(corpus, os.path.join(args.work, "tokenizer"), c["vocab"])
    assert sp.get_piece_size() == c["vocab"] and sp.bos_id() == BOS and sp.eos_id() == EOS and sp.unk_id() == UNK
    shutil.copyfile(os.path.join(args.work, "tokenizer.model"), os.path.join(args.out, "tokenizer.model"))

    docs = encode_chapters(sp, chapters)
    # Every 50th chapter (from the 26th) is held out; Genesis 1, the golden
    # prompt's chapter, is trained on.
    val_docs = [d for i, d in enumerate(docs) if i % 50 == 25]
    train_docs = [d for i, d in enumerate(docs) if i % 50 != 25]
    n_train = sum(len(d) for d in train_docs)
    log(f"tokens: {n_train:,} train, {sum(len(d) for d in val_docs):,} held out; "
        f"{args.steps} steps × {args.batch} × {args.seq} = {args.steps * args.batch * args.seq / n_train:.2f} epochs")

    model = Demo(c)
    model.init_weights(args.seed)
    n_params = sum(p.numel() for p in model.parameters())
    assert n_params == param_count(c), (n_params, param_count(c))
    log(f"model: {n_params:,} parameters ({json.dumps(c)})")

    seconds, history = train(model, train_docs, val_docs, args)
    final_loss = history[-1][1]
    log(f"trained in {seconds / 60:.1f} min; last train loss {final_loss:.4f}")

    # The checkpoint, in the manifest's order: embed, each layer, final norm.
    state = {name: p.detach().float().numpy() for name, p in model.state_dict().items()}
    halves = {name: a.astype(np.float16) for name, a in state.items()}
    for name, a in halves.items():
        assert np.isfinite(a).all(), f"{name} overflows f16"
    weights = os.path.join(args.out, "model.safetensors")
    write_safetensors(weights, halves, {"format": "pt", "source": "tools/train_demo.py"})
    log(f"wrote {weights} ({os.path.getsize(weights):,} bytes)")

    # Golden: the saved f16 weights, read back from the file and widened to
    # f32, so lathe and this model compute with the same values.
    loaded = Demo(c)
    loaded.load_state_dict({n: torch.from_numpy(a.astype(np.float32)) for n, a in read_safetensors(weights).items()})
    loaded.eval()
    val_loss = evaluate(loaded, val_docs, args.seq)
    log(f"held-out loss of the saved f16 weights: {val_loss:.4f}")

    prompt_ids = [BOS] + sp.encode(PROMPT)
    generated, margins = greedy(loaded, prompt_ids, GOLDEN_TOKENS)
    # The same in float64: a generation that differs there is too close to a tie.
    wide = Demo(c).double()
    wide.load_state_dict(loaded.state_dict())
    wide.eval()
    generated64, _ = greedy(wide, prompt_ids, GOLDEN_TOKENS)
    low = min(range(len(margins)), key=lambda i: margins[i])
    golden = {
        "spec": "models/demo.toml",
        "weights": "models/demo/model.safetensors (f16, read back and widened to f32)",
        "prompt": PROMPT,
        "prompt_encoding": "[<s>=1] + SentencePiece encode(prompt) with models/demo/tokenizer.model "
                           "(add_dummy_prefix: the first piece is '▁In'), no </s>",
        "prompt_ids": prompt_ids,
        "prompt_pieces": [sp.id_to_piece(i) for i in prompt_ids],
        "decoding": f"greedy (argmax of the last position's logits), {GOLDEN_TOKENS} tokens, no stop at </s>",
        "generated_ids": generated,
        "generated_text": sp.decode(generated),
        "text": sp.decode(prompt_ids + generated),
        "min_margin": round(margins[low], 6),
        "min_margin_step": low,
        "margins": [round(m, 4) for m in margins],
        "float64_agrees": generated64 == generated,
    }
    text = json.dumps(golden, indent=2, ensure_ascii=False)
    text = re.sub(r"\[\n[^\[\]{}]*\]", lambda m: " ".join(m.group(0).split()), text)  # one line per list
    with open(os.path.join(args.out, "golden.json"), "w") as f:
        f.write(text + "\n")
    log(f"golden: prompt {prompt_ids} → {generated}")
    log(f"golden text: {golden['text']!r}")
    log(f"golden min margin {margins[low]:.4f} at step {low}; float64 agrees: {generated64 == generated}")
    if margins[low] < NEAR_TIE:
        log(f"WARNING: the min margin is below {NEAR_TIE}: another f32 implementation could flip that step")

    samples = []
    g = torch.Generator().manual_seed(args.seed)
    for prompt in ("In the beginning", "And Jesus said", "The LORD is my shepherd", "And it came to pass"):
        ids = sample(loaded, [BOS] + sp.encode(prompt), 60, 0.8, g)
        samples.append(sp.decode(ids))
        log(f"sample (T=0.8): {samples[-1]}")

    megabytes = os.path.getsize(weights) / 1e6
    with open(args.spec, "w") as f:
        f.write(SPEC.format(params=n_params, megabytes=megabytes, eps_text=eps_text(c["eps"]), **c))
    log(f"wrote {args.spec}")

    write_readme(os.path.join(args.out, "README.md"), c, n_params, megabytes, command, args, seconds, history,
                 val_loss, n_train, golden, samples)


def write_readme(path, c, n_params, megabytes, command, args, seconds, history, val_loss, n_train, golden, samples):
    tail = history[-4:]
    text = f"""# demo: lathe's shipped model

A {n_params / 1e6:.1f}M-parameter Llama-family transformer trained from scratch on
the King James Bible, small enough to ship ({megabytes:.1f} MB of f16 weights) and
to run anywhere lathe runs, lavapipe included. Its spec is `models/demo.toml`.

| file | what |
|---|---|
| `model.safetensors` | the weights, f16, Hugging Face Llama tensor names, tied embeddings (no `lm_head`) |
| `tokenizer.model` | SentencePiece BPE, {c["vocab"]} pieces, byte fallback; `<unk>` 0, `<s>` 1, `</s>` 2 |
| `golden.json` | the greedy continuation of "{golden["prompt"]}" computed from the saved weights |

## Architecture

hidden {c["hidden"]}, {c["layers"]} layers, {c["heads"]} query heads over {c["kv_heads"]} KV heads (head_dim
{c["hidden"] // c["heads"]}), SiLU-gated MLP of width {c["intermediate"]}, RMSNorm (eps {eps_text(c["eps"])}, pre-norm),
rotate-half RoPE (theta {c["theta"]:g}) over the whole head, tied LM head, vocabulary
{c["vocab"]}, context {c["max_context"]}. {n_params:,} parameters.

## How it was made

```sh
apt-get install python3-torch python3-sentencepiece python3-numpy libopenblas0-pthread bible-kjv bible-kjv-text
{command}
```

`tools/train_demo.py` takes the text from bible-kjv-text (decompressed by the
`bible` program of bible-kjv), one verse per line with the verse numbers and
chapter headings dropped; trains the tokenizer on it; and trains on
{n_train:,} tokens (every 50th chapter held out), one document per
chapter: `<s>` verse verse … `</s>`. {args.steps} AdamW steps of {args.batch} windows of
{args.seq} tokens ({args.steps * args.batch * args.seq / n_train:.1f} epochs), peak learning rate {args.lr:g} with
warmup and a cosine decay, seed {args.seed}, PyTorch {torch.__version__} on {args.threads} CPU threads:
{seconds / 60:.1f} minutes.

Training loss at the end: {", ".join(f"step {s}: {l:.3f}" for s, l in tail)}.
Held-out loss of the saved f16 weights: {val_loss:.3f} nats/token.

## Golden output

Prompt ids {golden["prompt_ids"]} (`<s>` + the SentencePiece encoding of
"{golden["prompt"]}"), {len(golden["generated_ids"])} greedy tokens:

> {golden["text"]}

The smallest top-1 minus top-2 logit margin over the steps is
{golden["min_margin"]:.3f} (step {golden["min_margin_step"]}); the same greedy run in float64
{"gives the same tokens" if golden["float64_agrees"] else "gives DIFFERENT tokens"}.

## Samples (temperature 0.8)

{chr(10).join("> " + s + chr(10) for s in samples)}
## License

The training text, the King James Version (1611), is in the public domain
(bible-kjv-text's copyright file: "The copyright for the King James Version
text of the Bible is expired"). The weights and the tokenizer are derived
from that text alone, by `tools/train_demo.py`.
"""
    with open(path, "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
