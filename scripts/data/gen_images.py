#!/usr/bin/env python3
"""Images for preprocessing tests and benchmarks, made from the sample photos.

bad/:     what a server must refuse: an empty file, a truncated and a corrupt JPEG, a
          GIF, and PNG and JPEG headers claiming 60000x60000 pixels (bombs).
bench/:   photo-like JPEGs of the sizes AbouElhamayed et al. measured on Triton:
          small 60x70 (~4 KB), medium 500x375 (~121 KB), large 3564x2880 (~9.5 MB).
formats/: one photo in each format and colour mode served (greyscale, alpha,
          palette, 16-bit PNG; greyscale, CMYK, progressive, EXIF-rotated JPEG), each
          with Pillow's decode of it (EXIF orientation applied, converted to 8-bit
          RGB) as the reference the decoder is held to, and Pillow's 64x64 centre
          crop of it (bicubic, 0..255, CHW float32) as the reference for the tensor.

Usage: gen_images.py --photos DIR --out DIR
"""
import argparse
import io
import json
import os

import numpy as np
from PIL import Image, ImageOps

VERSION = 3

# The tensor references: a 64x64 centre crop of 87.5 %, bicubic, values 0..255.
TENSOR_SIDE = 64
CROP_FRACTION = 0.875

# (name, width, height, target bytes); quality is searched to land near the size.
BENCH = [("small", 60, 70, 4_000), ("medium", 500, 375, 121_000), ("large", 3564, 2880, 9_500_000)]


def photo_like(source: Image.Image, width: int, height: int, grain: float, seed: int) -> Image.Image:
    """The photo scaled to cover width x height and cropped, with film grain: a real
    photo upscaled is too smooth to reach a real camera file's size."""
    scaled = ImageOps.fit(source, (width, height), Image.Resampling.BICUBIC)
    pixels = np.asarray(scaled, dtype=np.float32)
    rng = np.random.default_rng(seed)
    pixels = pixels + rng.normal(0.0, grain, size=pixels.shape)
    return Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8), "RGB")


def jpeg_near(img: Image.Image, target: int) -> bytes:
    """The JPEG encoding (4:2:0) whose size is closest to `target` bytes."""
    best = None
    for quality in range(30, 101, 2):
        out = io.BytesIO()
        img.save(out, "JPEG", quality=quality, subsampling=2)
        data = out.getvalue()
        if best is None or abs(len(data) - target) < abs(len(best) - target):
            best = data
    return best


def write_bench(photos: str, out: str) -> list:
    os.makedirs(out, exist_ok=True)
    source = Image.open(os.path.join(photos, "chelsea.png")).convert("RGB")
    made = []
    for i, (name, width, height, target) in enumerate(BENCH):
        grain = {"small": 6.0, "medium": 8.0, "large": 8.0}[name]
        data = jpeg_near(photo_like(source, width, height, grain, seed=i), target)
        path = os.path.join(out, f"{name}.jpg")
        with open(path, "wb") as f:
            f.write(data)
        made.append({"name": name, "file": f"{name}.jpg", "width": width, "height": height, "bytes": len(data)})
    return made


def exif_rotated(img: Image.Image, orientation: int) -> bytes:
    """A JPEG whose pixels are stored transposed so that EXIF `orientation` shows `img`."""
    undo = {3: Image.Transpose.ROTATE_180, 6: Image.Transpose.ROTATE_90, 8: Image.Transpose.ROTATE_270}
    stored = img.transpose(undo[orientation])
    exif = Image.Exif()
    exif[0x0112] = orientation
    out = io.BytesIO()
    stored.save(out, "JPEG", quality=92, exif=exif.tobytes())
    return out.getvalue()


def encoded(img: Image.Image, fmt: str, **options) -> bytes:
    out = io.BytesIO()
    img.save(out, fmt, **options)
    return out.getvalue()


def write_formats(photos: str, out: str) -> list:
    os.makedirs(out, exist_ok=True)
    rgb = ImageOps.fit(Image.open(os.path.join(photos, "chelsea.png")).convert("RGB"), (320, 240))
    alpha = rgb.copy()
    alpha.putalpha(Image.linear_gradient("L").resize(rgb.size))
    wide = np.asarray(rgb, dtype=np.uint16) * 257 + np.arange(320, dtype=np.uint16)[None, :, None] % 200
    grey16 = (np.asarray(rgb.convert("L"), dtype=np.uint16) * 257 + 100).astype(np.uint16)
    cases = {
        "rgb.png": encoded(rgb, "PNG"),
        "grey.png": encoded(rgb.convert("L"), "PNG"),
        "grey_alpha.png": encoded(alpha.convert("LA"), "PNG"),
        "rgba.png": encoded(alpha, "PNG"),
        "palette.png": encoded(rgb.quantize(64), "PNG"),
        "rgb16.png": rgb16_png(wide),
        "grey16.png": encoded(Image.fromarray(grey16), "PNG"),
        "rgb.jpg": encoded(rgb, "JPEG", quality=92),
        "grey.jpg": encoded(rgb.convert("L"), "JPEG", quality=92),
        "cmyk.jpg": encoded(rgb.convert("CMYK"), "JPEG", quality=92),
        "progressive.jpg": encoded(rgb, "JPEG", quality=92, progressive=True),
        "rgb444.jpg": encoded(rgb, "JPEG", quality=92, subsampling=0),
        "exif_rotate90.jpg": exif_rotated(rgb, 6),
        "exif_rotate180.jpg": exif_rotated(rgb, 3),
        "exif_rotate270.jpg": exif_rotated(rgb, 8),
    }
    made = []
    for name, data in cases.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
        reference = reference_rgb(data, wide if name == "rgb16.png" else grey16 if name == "grey16.png" else None)
        ref_name = name + ".rgb"
        reference.tofile(os.path.join(out, ref_name))
        tensor_name = name + ".chw"
        reference_tensor(reference).tofile(os.path.join(out, tensor_name))
        made.append({
            "file": name,
            "reference": ref_name,
            "tensor": tensor_name,
            "width": reference.shape[1],
            "height": reference.shape[0],
        })
    return made


def rgb16_png(wide: np.ndarray) -> bytes:
    """A 16-bit RGB PNG, written by hand: Pillow has no 16-bit RGB mode to save from."""
    import struct
    import zlib

    height, width, _ = wide.shape
    rows = b"".join(b"\x00" + wide[y].astype(">u2").tobytes() for y in range(height))

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    header = struct.pack(">IIBBBBB", width, height, 16, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


def reference_rgb(data: bytes, sixteen_bit) -> np.ndarray:
    """Pillow's 8-bit RGB of `data`, EXIF orientation applied. Pillow reads 16-bit RGB
    PNGs as 8-bit itself, but clips 16-bit greyscale when converting it; for that one
    the reference scales 16 bits to 8 as every other mode does (rounding v / 257)."""
    img = ImageOps.exif_transpose(Image.open(io.BytesIO(data)))
    if sixteen_bit is not None:
        wide = sixteen_bit.astype(np.float64)
        eight = np.clip(np.rint(wide / 257.0), 0, 255).astype(np.uint8)
        return eight if eight.ndim == 3 else np.repeat(eight[:, :, None], 3, axis=2)
    return np.asarray(img.convert("RGB"), dtype=np.uint8)


def write_bad(out: str, medium_jpeg: bytes) -> list:
    """Files that are not images a server can serve, each with what it is."""
    import struct
    import zlib

    os.makedirs(out, exist_ok=True)
    tiny = Image.new("RGB", (8, 8), (90, 60, 30))
    png = encoded(tiny, "PNG")
    # IHDR's width and height, then its CRC, rewritten.
    ihdr = png[12:16] + struct.pack(">II", 60000, 60000) + png[24:29]
    png_bomb = png[:12] + ihdr + struct.pack(">I", zlib.crc32(ihdr)) + png[33:]
    jpeg = bytearray(encoded(tiny, "JPEG"))
    sof = jpeg.index(b"\xff\xc0")
    jpeg[sof + 5:sof + 9] = struct.pack(">HH", 60000, 60000)
    corrupt = bytearray(medium_jpeg)
    start = len(corrupt) // 3
    corrupt[start:] = bytes((i * 37) % 256 for i in range(len(corrupt) - start))
    cases = {
        "empty.jpg": b"",
        "truncated.jpg": medium_jpeg[: len(medium_jpeg) // 2],
        "corrupt.jpg": bytes(corrupt[:200]) + b"\x00" * 64,
        "unsupported.gif": encoded(tiny, "GIF"),
        "bomb.png": png_bomb,
        "bomb.jpg": bytes(jpeg),
    }
    for name, data in cases.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
    return sorted(cases)


def reference_tensor(rgb: np.ndarray) -> np.ndarray:
    """Pillow's resize of the centre region an ImageNet crop keeps, as CHW float32."""
    height, width, _ = rgb.shape
    side = CROP_FRACTION * min(width, height)
    box = ((width - side) / 2, (height - side) / 2, (width + side) / 2, (height + side) / 2)
    img = Image.fromarray(rgb, "RGB").resize((TENSOR_SIDE, TENSOR_SIDE), Image.Resampling.BICUBIC, box=box)
    return np.ascontiguousarray(np.asarray(img, dtype=np.float32).transpose(2, 0, 1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--photos", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    manifest_path = os.path.join(args.out, "manifest.json")
    try:
        with open(manifest_path) as f:
            if json.load(f).get("version") == VERSION:
                return
    except (OSError, ValueError):
        pass
    bench = write_bench(args.photos, os.path.join(args.out, "bench"))
    formats = write_formats(args.photos, os.path.join(args.out, "formats"))
    with open(os.path.join(args.out, "bench", "medium.jpg"), "rb") as f:
        bad = write_bad(os.path.join(args.out, "bad"), f.read())
    with open(manifest_path, "w") as f:
        json.dump({"version": VERSION, "bench": bench, "formats": formats, "bad": bad}, f, indent=1)
    for b in bench:
        print(f"gen_images: {b['file']} {b['width']}x{b['height']} {b['bytes']} bytes")


if __name__ == "__main__":
    main()
