#!/usr/bin/env python3
"""Lists the public API of a crate from rustdoc's `all.html`: one line per item,
`kind path`, sorted. With `--unnameable`, lists instead the types its pages link to
that it does not export (a trait's implementors aside): a type of a dependency built
without docs (`--no-deps`) is linked to that crate's pages, which an app cannot name.

    public_api.py DOC_DIR/modelless/all.html
    public_api.py --unnameable DOC_DIR/modelless CRATE...   (the crates not to link to)
"""
import html
import pathlib
import re
import sys

KINDS = {
    "structs": "struct", "enums": "enum", "traits": "trait", "functions": "fn", "types": "type",
    "constants": "const", "statics": "static", "macros": "macro", "unions": "union",
    "attributes": "attr", "derives": "derive", "trait-aliases": "trait-alias",
}


def items(page: str) -> list[tuple[str, str]]:
    main = page[page.index('<section id="main-content"'):]
    found = []
    for section in re.finditer(r'<h3 id="([\w-]+)"[^>]*>.*?</h3><ul class="all-items">(.*?)</ul>', main, re.S):
        kind = KINDS.get(section.group(1), section.group(1))
        for name in re.findall(r'<li><a href="[^"]*">([^<]*)</a></li>', section.group(2)):
            found.append((kind, html.unescape(name)))
    return sorted(found, key=lambda k: (k[1], k[0]))


def unnameable(doc_dir: pathlib.Path, crates: list[str]) -> dict[str, set[str]]:
    """The items of `crates` the pages under `doc_dir` link to, with the pages."""
    alternatives = "|".join(map(re.escape, crates))
    link = re.compile(rf'href="(?:\.\./)*({alternatives})/((?:\w+/)*)(\w+)\.(\w+)\.html')
    found: dict[str, set[str]] = {}
    for page in doc_dir.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        # A trait's implementors are listed, not met in a signature.
        text = text.split('<h2 id="implementors"', 1)[0]
        for crate, modules, kind, name in link.findall(text):
            path = "::".join([crate, *filter(None, modules.split("/")), name])
            found.setdefault(f"{kind} {path}", set()).add(str(page.relative_to(doc_dir)))
    return found


def main() -> None:
    if sys.argv[1] == "--unnameable":
        for item, pages in sorted(unnameable(pathlib.Path(sys.argv[2]), sys.argv[3:]).items()):
            print(f"{item}  (linked from {', '.join(sorted(pages))})")
        return
    listed = items(open(sys.argv[1], encoding="utf-8").read())
    for kind, path in listed:
        print(f"{kind} {path}")


if __name__ == "__main__":
    main()
