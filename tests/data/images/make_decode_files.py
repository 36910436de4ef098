#!/usr/bin/python3
"""Writes the files of README.md beside it (python3-pil): JPEGs and
their .rgb goldens, bad/*, ../../fuzz/corpus/image/*. Run from anywhere:
/usr/bin/python3 tests/data/images/make_decode_files.py"""
import io
import os
import struct
import zlib

from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))
SEEDS = os.path.join(HERE, "..", "..", "fuzz", "corpus", "image")
ADAM7 = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)]


def pattern(w, h, mode="RGB"):  # as image_preprocess_test.cpp's
    return Image.frombytes(mode, (w, h), bytes((37 * x + 91 * y + 53 * c + 11 * ((x * y) % 17)) % 256
                                               for y in range(h) for x in range(w) for c in range(len(mode))))


def jpeg(image, **options):
    out = io.BytesIO()
    image.save(out, "JPEG", **options)
    return out.getvalue()


def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png(w, h, depth, color, rows, extra=b"", interlace=0):
    """IHDR, `extra`, IDAT of `rows` (filter bytes in), IEND."""
    ihdr = struct.pack(">IIBBBBB", w, h, depth, color, 0, 0, interlace)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + extra + chunk(b"IDAT", zlib.compress(rows)) +
            chunk(b"IEND", b""))


def adam7(w, h, pixel_bytes):
    """Adam7 passes' rows of samples 37k mod 256."""
    rows, n = b"", 0
    for x0, y0, dx, dy in ADAM7:
        pw, ph = max(0, (w - x0 + dx - 1) // dx), max(0, (h - y0 + dy - 1) // dy)
        for _ in range(ph if pw else 0):
            rows += b"\0" + bytes((n + i) * 37 % 256 for i in range(pw * pixel_bytes))
            n += pw * pixel_bytes
    return rows


def write(path, data):
    assert len(data) < 4096, f"{path}: {len(data)} bytes, over 4 KB"
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as out:
        out.write(data)


def main():
    goldens = {
        "baseline.jpg": jpeg(pattern(16, 8), quality=90),  # 4:2:0
        "progressive.jpg": jpeg(pattern(13, 7), quality=80, progressive=True, subsampling=1),  # 4:2:2
        "gray.jpg": jpeg(pattern(16, 8, "L"), quality=90),
    }
    for name, data in goldens.items():
        write(os.path.join(HERE, name), data)
        write(os.path.join(HERE, name[:-4] + ".rgb"), Image.open(io.BytesIO(data)).convert("RGB").tobytes())

    base = goldens["baseline.jpg"]
    sof = base.index(b"\xff\xc0")
    small = png(4, 3, 8, 2, b"".join(b"\0" + pattern(4, 3).tobytes()[12 * y:12 * y + 12] for y in range(3)))
    bad = {
        "truncated.png": small[:-20],  # inside IDAT
        "truncated.jpg": base[:len(base) // 2],
        "huge.png": png(100000, 100000, 8, 2, b"\0" * 7),
        "huge.jpg": base[:sof + 5] + struct.pack(">HH", 65000, 65000) + base[sof + 9:],
        "zero-width.png": png(0, 3, 8, 2, b"\0"),
        "cmyk.jpg": jpeg(pattern(8, 8, "CMYK")),
        "garbage-after-signature.png": b"\x89PNG\r\n\x1a\n" + bytes((i * 89 + 7) % 256 for i in range(200)),
        "bad-crc.png": small[:-13] + bytes([small[-13] ^ 1]) + small[-12:],  # IDAT's CRC
        "not-an-image.gif": b"GIF89a\x01\x00\x01\x00\x00\x00\x00;",
    }
    for name, data in bad.items():
        write(os.path.join(HERE, "bad", name), data)

    # 2-bit indices 0 1 2 3: 3 is past PLTE (PIL's gray 3).
    plte = chunk(b"PLTE", bytes([255, 0, 0, 0, 255, 0, 0, 0, 255])) + chunk(b"tRNS", b"\x00\x80")
    write(os.path.join(SEEDS, "palette-trns.png"), png(5, 4, 2, 3, b"\0\x1b\x00" * 4, plte))
    out = io.BytesIO()
    pattern(6, 5, "RGBA").save(out, "PNG")
    write(os.path.join(SEEDS, "rgba.png"), out.getvalue())
    key = chunk(b"tRNS", b"\x00\x25")  # the first sample: transparent
    write(os.path.join(SEEDS, "gray16-interlaced-trns.png"), png(3, 3, 16, 0, adam7(3, 3, 2), key, interlace=1))
    write(os.path.join(SEEDS, "baseline.jpg"), base)
    write(os.path.join(SEEDS, "progressive.jpg"), goldens["progressive.jpg"])


if __name__ == "__main__":
    main()
