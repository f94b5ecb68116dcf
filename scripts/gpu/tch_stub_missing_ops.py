#!/usr/bin/env python3
"""Fit a copy of torch-sys's C++ wrappers to an older PyTorch's headers.

  tch_stub_missing_ops.py TORCH_SYS_DIR TORCH_INCLUDE_DIR

tch generates one C++ wrapper per ATen operator of the PyTorch it was made for
(`libtch/torch_api_generated.cpp`). Built against an older PyTorch, the wrappers of
operators that are newer, or whose signature changed, do not compile. This compiles
the file for syntax against the given headers, and replaces the body of each wrapper
an error points into with one that raises "not in this PyTorch" through tch's own
error path; it repeats until the file compiles. The Rust side keeps every symbol, so
nothing else changes; a model that calls a stubbed operator fails with that error.
Prints the operators it stubbed.
"""
import re
import subprocess
import sys

WRAPPER = re.compile(r"^(?:void|tensor|int64_t|double|bool|int) (atg_\w+)\(.*\) \{$")


def errors(source, include):
    """Line numbers of the compile errors in `source`, empty when it compiles."""
    command = ["c++", "-fsyntax-only", "-std=c++17", "-w", "-D_GLIBCXX_USE_CXX11_ABI=1",
               "-I", include, "-I", f"{include}/torch/csrc/api/include", source]
    result = subprocess.run(command, capture_output=True, text=True)
    name = re.escape(source.rsplit("/", 1)[-1])
    lines = {int(m.group(1)) for m in re.finditer(rf"{name}:(\d+):\d+: error:", result.stderr)}
    if result.returncode != 0 and not lines:
        sys.exit(f"tch_stub_missing_ops: the file does not compile, and not in a wrapper:\n{result.stderr[-2000:]}")
    return lines


def stubbed(text, bad_lines):
    """The source with each wrapper that holds an error line given a raising body."""
    lines = text.split("\n")
    starts = set()
    for number in bad_lines:
        start = number - 1
        while start >= 0 and not WRAPPER.match(lines[start]):
            start -= 1
        if start < 0:
            sys.exit(f"tch_stub_missing_ops: error on line {number} outside any wrapper")
        starts.add(start)
    names = []
    # From the last wrapper up, so that each replacement leaves the lines above it.
    for start in sorted(starts, reverse=True):
        end = start + 1
        while lines[end] != "}":
            end += 1
        name = WRAPPER.match(lines[start]).group(1)
        names.append(name)
        raising = f'    throw std::runtime_error("{name[4:]}: not in this PyTorch");'
        returns = "" if lines[start].startswith("void") else "  return 0;\n"
        lines[start + 1:end] = [f"  PROTECT(\n{raising}\n  )\n{returns}".rstrip("\n")]
    return "\n".join(lines), names


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__.strip().splitlines()[2].strip())
    folder, include = sys.argv[1:]
    source = f"{folder}/libtch/torch_api_generated.cpp"
    all_names = []
    while bad := errors(source, include):
        with open(source) as f:
            text, names = stubbed(f.read(), bad)
        if not names:
            sys.exit("tch_stub_missing_ops: errors left that stubbing does not remove")
        with open(source, "w") as f:
            f.write(text)
        all_names += names
    print(f"stubbed {len(all_names)} operators: {', '.join(sorted(n[4:] for n in all_names)) or 'none'}")


if __name__ == "__main__":
    main()
