"""Labelled documents for the OCR pipeline: pages of known text rendered with the
DejaVu fonts, each line's text and box (four corners, clockwise from the top left, in
the page's pixels) written beside them.

Pages hold 1 to 25 lines (the first 40 cycle through 1, 5, 10 and 25, the counts the
benchmark compares) of words, numbers, dates and amounts at several sizes and fonts;
about one line in ten is upside down, and about a third of the pages are
"photographed": seen in perspective, blurred, noisy and saved as JPEG at quality 60 to
95. Everything follows the seed, so the same command makes the same pages.

    python3 scripts/data/gen_documents.py OUT [--pages 200] [--seed 1]

Writes OUT/page-NNN.png (or .jpg) and OUT/labels.jsonl, one page a line:
{"file", "width", "height", "photographed", "lines": [{"text", "box", "upside_down"}]}.
"""

import argparse
import json
import random
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFilter, ImageFont

FONT_DIR = Path("/usr/share/fonts/truetype/dejavu")
# Those of Debian's fonts-dejavu-core.
FONTS = ["DejaVuSans.ttf", "DejaVuSerif.ttf", "DejaVuSansMono.ttf", "DejaVuSans-Bold.ttf", "DejaVuSerif-Bold.ttf", "DejaVuSansMono-Bold.ttf"]
WORDS = (
    "account address amount annual balance bank between board budget building business "
    "capital central change city client company contract cost country credit customer "
    "data delivery department design development director document east energy equipment "
    "estate export field final financial first free general goods green group health "
    "house income industry insurance interest invoice item labour land legal level "
    "limited local machine manager market material meeting member method model monthly "
    "national network north number office order paper payment period person plan policy "
    "price private product project property public quality rate receipt record region "
    "report research river road sales school service share south station stock street "
    "supply system table total trade training transport travel unit value water west "
    "window work world year"
).split()
MONTHS = "January February March April May June July August September October November December".split()
BACKGROUND = (236, 232, 224)


def line_text(rng: random.Random) -> str:
    """Words, a number, a date or an amount, sometimes with a word or two before it."""
    kind = rng.choice(["words", "words", "number", "date", "amount"])
    if kind == "words":
        words = [rng.choice(WORDS) for _ in range(rng.randint(1, 6))]
        if rng.random() < 0.4:
            words[0] = words[0].capitalize()
        return " ".join(words)
    lead = rng.choice(WORDS).capitalize() + " " if rng.random() < 0.6 else ""
    if kind == "number":
        return lead + rng.choice([str(rng.randint(0, 99999)), f"No. {rng.randint(100, 9999)}", f"{rng.randint(1, 999)}-{rng.randint(1000, 9999)}"])
    if kind == "date":
        y, m, d = rng.randint(1990, 2030), rng.randint(1, 12), rng.randint(1, 28)
        return lead + rng.choice([f"{y}-{m:02}-{d:02}", f"{d:02}/{m:02}/{y}", f"{MONTHS[m - 1]} {d}, {y}"])
    value = rng.randint(1, 999999) / 100
    return lead + rng.choice([f"${value:,.2f}", f"EUR {value:.2f}", f"{value:,.2f} USD", f"Total: {value:.2f}"])


def render_page(rng: random.Random, lines: int) -> tuple[Image.Image, list[dict]]:
    width = rng.randint(700, 1000)
    height = int(width * rng.uniform(1.2, 1.45))
    margin = rng.randint(30, 60)
    page = Image.new("RGB", (width, height), "white")
    draw = ImageDraw.Draw(page)
    pitch = (height - 2 * margin) / lines
    size_max = max(14, min(40, int(pitch / 1.5)))
    labels = []
    y = margin
    for _ in range(lines):
        size = rng.randint(max(12, size_max // 2), size_max)
        font = ImageFont.truetype(str(FONT_DIR / rng.choice(FONTS)), size)
        text = line_text(rng)
        while draw.textlength(text, font=font) > width - 2 * margin and " " in text:
            text = text.rsplit(" ", 1)[0]
        left, top, right, bottom = draw.textbbox((0, 0), text, font=font)
        w, h = right - left, bottom - top
        x = rng.randint(margin, max(margin, width - margin - w))
        shade = rng.randint(0, 60)
        upside_down = rng.random() < 0.1
        line = Image.new("L", (w + 4, h + 4), 0)
        ImageDraw.Draw(line).text((2 - left, 2 - top), text, font=font, fill=255)
        if upside_down:
            line = line.rotate(180)
        page.paste((shade, shade, shade), (x - 2, int(y) - 2), line)
        top_y = int(y)
        labels.append({"text": text, "box": [[x, top_y], [x + w, top_y], [x + w, top_y + h], [x, top_y + h]], "upside_down": upside_down})
        y += max(h * 1.4, pitch)
    return page, labels


def homography(src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """The 3×3 matrix taking each of four points of `src` to its point in `dst`."""
    rows = []
    for (x, y), (u, v) in zip(src, dst):
        rows.append([x, y, 1, 0, 0, 0, -u * x, -u * y, -u])
        rows.append([0, 0, 0, x, y, 1, -v * x, -v * y, -v])
    _, _, vt = np.linalg.svd(np.array(rows, dtype=np.float64))
    return (vt[-1] / vt[-1][-1]).reshape(3, 3)


def photograph(rng: random.Random, page: Image.Image, labels: list[dict]) -> Image.Image:
    """The page seen in perspective on a table, blurred and noisy."""
    w, h = page.size
    corners = np.array([[0, 0], [w, 0], [w, h], [0, h]], dtype=np.float64)
    pad = 0.06
    seen = corners + np.array([[rng.uniform(0, pad) * w, rng.uniform(0, pad) * h],
                               [-rng.uniform(0, pad) * w, rng.uniform(0, pad) * h],
                               [-rng.uniform(0, pad) * w, -rng.uniform(0, pad) * h],
                               [rng.uniform(0, pad) * w, -rng.uniform(0, pad) * h]])
    seen += np.array([pad * w / 2, pad * h / 2])
    size = (int(w * (1 + pad)), int(h * (1 + pad)))
    to_page = homography(seen, corners)
    warped = page.transform(size, Image.PERSPECTIVE, tuple(to_page.flatten()[:8]), Image.BICUBIC, fillcolor=BACKGROUND)
    to_photo = homography(corners, seen)
    for label in labels:
        points = np.array([[x, y, 1.0] for x, y in label["box"]]) @ to_photo.T
        label["box"] = [[round(px / pw, 1), round(py / pw, 1)] for px, py, pw in points]
    warped = warped.filter(ImageFilter.GaussianBlur(rng.uniform(0.3, 1.2)))
    pixels = np.asarray(warped, dtype=np.float32)
    noise = np.random.default_rng(rng.randint(0, 2**31)).normal(0, rng.uniform(2, 8), pixels.shape)
    return Image.fromarray(np.clip(pixels + noise, 0, 255).astype(np.uint8))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--pages", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(args.seed)
    with open(args.out / "labels.jsonl", "w") as index:
        for i in range(args.pages):
            lines = (1, 5, 10, 25)[i % 4] if i < 40 else rng.randint(1, 25)
            page, labels = render_page(rng, lines)
            photographed = i >= 40 and rng.random() < 0.35
            if photographed:
                page = photograph(rng, page, labels)
                name = f"page-{i:03}.jpg"
                page.save(args.out / name, quality=rng.randint(60, 95))
            else:
                name = f"page-{i:03}.png"
                page.save(args.out / name, optimize=True)
            record = {"file": name, "width": page.width, "height": page.height, "photographed": photographed, "lines": labels}
            index.write(json.dumps(record) + "\n")
    print(f"gen_documents: {args.pages} pages in {args.out}")


if __name__ == "__main__":
    main()
