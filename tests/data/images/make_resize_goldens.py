#!/usr/bin/python3
"""Writes resize_goldens.txt and mllama_goldens.txt: what PIL's Image.resize
and the PIL-kind image processors of Hugging Face give for small test
images, which tests/unit/image_preprocess_test.cpp compares runtime/image/
with, byte for byte and bit for bit. Needs python3-pil and python3-numpy
(Debian); the test itself needs neither. Run from anywhere:

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


# MllamaImageProcessor's steps (models/mllama/image_processing_mllama.py),
# restated: the functions keep its names and its numpy arithmetic.
def get_all_supported_aspect_ratios(max_image_tiles):
    # Every (a, b) with a · b <= max_image_tiles, a outer; its callers read a
    # as the canvas's tile rows.
    return [(a, b) for a in range(1, max_image_tiles + 1) for b in range(1, max_image_tiles + 1)
            if a * b <= max_image_tiles]


def get_optimal_tiled_canvas(image_height, image_width, max_image_tiles, tile_size):
    possible_canvas_sizes = np.array(get_all_supported_aspect_ratios(max_image_tiles)) * tile_size
    target_heights, target_widths = possible_canvas_sizes.T
    scale_h = target_heights / image_height
    scale_w = target_widths / image_width
    scales = np.where(scale_w > scale_h, scale_h, scale_w)
    upscaling_options = scales[scales >= 1]
    if len(upscaling_options) > 0:
        selected_scale = np.min(upscaling_options)
    else:
        selected_scale = np.max(scales[scales < 1])
    chosen_canvas = possible_canvas_sizes[scales == selected_scale]
    if len(chosen_canvas) > 1:
        return chosen_canvas[np.argmin(chosen_canvas[:, 0] * chosen_canvas[:, 1])]
    return chosen_canvas[0]


def get_image_size_fit_to_canvas(image_height, image_width, canvas_height, canvas_width, tile_size):
    target_width = np.clip(image_width, tile_size, canvas_width)
    target_height = np.clip(image_height, tile_size, canvas_height)
    scale_h = target_height / image_height
    scale_w = target_width / image_width
    if scale_w < scale_h:
        new_width = target_width
        new_height = min(math.floor(image_height * scale_w), target_height)
    else:
        new_height = target_height
        new_width = min(math.floor(image_width * scale_h), target_width)
    return new_height, new_width


def mllama(a, tile, max_tiles, resample, factor, mean, std):
    """One image through resize, pad, rescale, normalize and split_to_tiles:
    (tiles [n][3][tile][tile] f32, (rows, cols), aspect ratio id, mask, (new_height, new_width))."""
    h, w = a.shape[:2]
    canvas_height, canvas_width = get_optimal_tiled_canvas(h, w, max_tiles, tile)
    rows, cols = canvas_height // tile, canvas_width // tile
    new_height, new_width = get_image_size_fit_to_canvas(h, w, canvas_height, canvas_width, tile)
    # resize (image_transforms.resize): PIL's, channels last, back to channels first.
    r = np.asarray(Image.fromarray(a).resize((int(new_width), int(new_height)), resample=resample)).transpose(2, 0, 1)
    # pad: zeros of the image's dtype (uint8) at the bottom and right, before rescale and normalize.
    x = np.pad(r, ((0, 0), (0, canvas_height - new_height), (0, canvas_width - new_width)), mode="constant",
               constant_values=0)
    x = (x.astype(np.float64) * factor).astype(np.float32)  # rescale
    x = ((x.T - np.array(mean, dtype=np.float32)) / np.array(std, dtype=np.float32)).T  # normalize, channels first
    tiles = np.ascontiguousarray(x.reshape(3, rows, tile, cols, tile).transpose(1, 3, 0, 2, 4).reshape(
        rows * cols, 3, tile, tile))
    aspect_ratio_id = get_all_supported_aspect_ratios(max_tiles).index((rows, cols)) + 1
    mask = np.zeros(max_tiles, dtype=np.int64)  # build_aspect_ratio_mask
    mask[0] = 1
    mask[:rows * cols] = 1
    return tiles.astype(np.float32), (int(rows), int(cols)), aspect_ratio_id, mask, (int(new_height), int(new_width))


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
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "resize_goldens.txt"), "w") as out:
        out.write("\n".join(lines) + "\n")
    with open(os.path.join(here, "mllama_goldens.txt"), "w") as out:
        out.write("\n".join(mllama_lines()) + "\n")


def mllama_lines():
    # MllamaImageProcessor's convert_to_rgb is Image.alpha_composite onto white, which gives what Pixtral's paste
    # onto white gives (the on_white lines) for every color and alpha: checked here, not written.
    c, a = np.meshgrid(np.arange(256, dtype=np.uint8), np.arange(256, dtype=np.uint8))
    rgba = Image.fromarray(np.dstack([c, c, c, a]), "RGBA")
    composite = Image.alpha_composite(Image.new("RGBA", rgba.size, (255, 255, 255)), rgba).convert("RGB")
    pasted = Image.new("RGBA", rgba.size, "WHITE")
    pasted.paste(rgba, (0, 0), rgba)
    assert np.array_equal(np.asarray(composite), np.asarray(pasted.convert("RGB")))
    lines = []
    # The canvas and the fitted size for sides around tiles of 16 and of Llama 3.2 Vision's 560: a line per
    # (max_image_tiles, tile), entries width,height:rows,cols,new_width,new_height.
    sides = [1, 7, 16, 17, 33, 50, 100, 561, 1121, 3000]
    for max_tiles in [1, 2, 4, 6]:
        for tile in [16, 560]:
            entries = []
            for w in sides:
                for h in sides:
                    ch, cw = get_optimal_tiled_canvas(h, w, max_tiles, tile)
                    nh, nw = get_image_size_fit_to_canvas(h, w, ch, cw, tile)
                    entries.append(f"{w},{h}:{ch // tile},{cw // tile},{nw},{nh}")
            lines.append(f"canvas {max_tiles} {tile} " + " ".join(entries))
    # Whole images, Llama 3.2 Vision's statistics: a small square (upscaled to one tile), wide and tall ones
    # (downscaled to a row or a column), one upscaled to fit a tile's height, one downscaled to 2 × 2 tiles, one
    # that fits its canvas unresized; bilinear as the checkpoints' config says, bicubic once.
    mean, std = [0.48145466, 0.4578275, 0.40821073], [0.26862954, 0.26130258, 0.27577711]
    for (wi, hi), tile, max_tiles, resample in [((10, 10), 16, 4, 2), ((90, 20), 16, 4, 2), ((20, 90), 16, 3, 3),
                                                ((6, 9), 16, 4, 2), ((100, 70), 16, 4, 2), ((30, 12), 16, 4, 2)]:
        tiles, (rows, cols), ratio_id, mask, (nh, nw) = mllama(pattern(wi, hi), tile, max_tiles, resample,
                                                               0.00392156862745098, mean, std)
        lines.append(f"mllama {wi} {hi} {tile} {max_tiles} {resample} {rows} {cols} {ratio_id} "
                     f"{''.join(str(m) for m in mask)} {nw} {nh} {tiles.tobytes().hex()}")
    return lines


if __name__ == "__main__":
    main()
