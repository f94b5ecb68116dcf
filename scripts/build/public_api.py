#!/usr/bin/env python3
"""Lists the public API of a crate from rustdoc's `all.html`: one line per item,
`kind path`, sorted; and the crate root's items apart.

    public_api.py DOC_DIR/modelless/all.html
"""
import html
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


def main() -> None:
    listed = items(open(sys.argv[1], encoding="utf-8").read())
    for kind, path in listed:
        print(f"{kind} {path}")


if __name__ == "__main__":
    main()
