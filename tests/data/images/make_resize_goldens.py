#!/usr/bin/python3
"""Writes resize_goldens.txt: what PIL's Image.resize and the PIL-kind image
processors of Hugging Face give for small test images, which
tests/unit/image_preprocess_test.cpp compares runtime/image/ with, byte for
byte and bit for bit. Needs python3-pil and python3-numpy (Debian); the
test itself needs neither. Run from anywhere:

    /usr/bin/python3 tests/data/images/make_resize_goldens.py

Each input is the pattern image_preprocess_test.cpp builds too:
value(x, y, c) = (37x + 91y + 53c + 11 · (xy mod 17)) mod 256.
"""
import math
import os

import numpy as np
from PIL import Image

FILTERS = {"nearest": Image.NEAREST, "lanczos": Image.LANCZOS, "bilinear": Image.BILINEAR,
           "bicubic": Image.BICUBIC, "box": Image.BOX, "hamming": Image.HAMMING}


def pattern(w, h):
    a = np.zeros((h, w, 3), dtype=np.uint8)
    for y in range(h):
        for x in range(w):
            for c in range(3):
                a[y, x, c] = (37 * x + 91 * y + 53 * c + 11 * ((x * y) % 17)) % 256
    return a


def center_crop(a, ch, cw):
    # Hugging Face's center_crop (image_transforms.py), restated.
    h, w = a.shape[:2]
    top, left = (h - ch) // 2, (w - cw) // 2
    if top >= 0 and left >= 0 and top + ch <= h and left + cw <= w:
        return a[top:top + ch, left:left + cw]
    nh, nw = max(ch, h), max(cw, w)
    padded = np.zeros((nh, nw, 3), dtype=a.dtype)
    tp, lp = math.ceil((nh - h) / 2), math.ceil((nw - w) / 2)
    padded[tp:tp + h, lp:lp + w] = a
    top, left = top + tp, left + lp
    return padded[max(0, top):min(nh, top + ch), max(0, left):min(nw, left + cw)]


def floats(a, factor, mean, std):
    x = (a.astype(np.float64) * factor).astype(np.float32)
    x = (x - np.array(mean, dtype=np.float32)) / np.array(std, dtype=np.float32)
    return x.transpose(2, 0, 1).astype(np.float32)


def main():
    lines = []
    for name, f in FILTERS.items():
        for (wi, hi), (wo, ho) in [((13, 7), (5, 9)), ((13, 7), (29, 3)), ((40, 31), (7, 6)), ((6, 5), (6, 12)),
                                   ((50, 3), (3, 50))]:
            out = np.asarray(Image.fromarray(pattern(wi, hi)).resize((wo, ho), resample=f))
            lines.append(f"resize {name} {wi} {hi} {wo} {ho} {out.tobytes().hex()}")
    # CLIP's steps: shortest edge 12 (bicubic), center crop 12×12 (and a crop larger than the image), rescale, normalize.
    clip_mean, clip_std = [0.48145466, 0.4578275, 0.40821073], [0.26862954, 0.26130258, 0.27577711]
    for (wi, hi), edge, crop in [((30, 17), 12, 12), ((9, 21), 12, 14)]:
        a = pattern(wi, hi)
        short, long_ = min(wi, hi), max(wi, hi)
        other = int(edge * long_ / short)
        wo, ho = (edge, other) if wi <= hi else (other, edge)
        r = np.asarray(Image.fromarray(a).resize((wo, ho), resample=Image.BICUBIC))
        c = center_crop(r, crop, crop)
        x = floats(c, 0.00392156862745098, clip_mean, clip_std)
        lines.append(f"clip {wi} {hi} {edge} {crop} {x.tobytes().hex()}")
    # Pixtral's: RGBA on white, longest edge 16 in patches of 4, bicubic.
    for (wi, hi) in [(30, 17), (7, 5)]:
        a = pattern(wi, hi)
        alpha = ((np.arange(wi * hi).reshape(hi, wi) * 29) % 256).astype(np.uint8)
        rgba = Image.fromarray(np.dstack([a, alpha]), "RGBA")
        white = Image.new("RGBA", rgba.size, "WHITE")
        white.paste(rgba, (0, 0), rgba)
        rgb = white.convert("RGB")
        lines.append(f"on_white {wi} {hi} {np.asarray(rgb).tobytes().hex()}")
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "resize_goldens.txt")
    with open(path, "w") as out:
        out.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
