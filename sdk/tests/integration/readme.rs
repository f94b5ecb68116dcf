//! The README's first example is what an app outside this repository builds: its
//! manifest lines are `examples/embedding/`'s, and its Rust is that app's `readme`
//! binary, which CI builds from that manifest.

use std::path::PathBuf;

fn repository() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(path: &str) -> String {
    std::fs::read_to_string(repository().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The fenced blocks of `lang` in `markdown`, in order.
fn blocks<'a>(markdown: &'a str, lang: &str) -> Vec<&'a str> {
    let fence = format!("```{lang}\n");
    markdown.split(fence.as_str()).skip(1).filter_map(|rest| rest.split_once("```").map(|(block, _)| block)).collect()
}

/// The `[dependencies]` table of a manifest, from its header to the next table.
fn dependencies(manifest: &str) -> String {
    let start = manifest.find("\n[dependencies]\n").expect("a [dependencies] table") + 1;
    let rest = &manifest[start..];
    let end = rest[1..].find("\n[").map_or(rest.len(), |i| i + 2);
    rest[..end].trim_end().to_string() + "\n"
}

#[test]
fn the_readme_manifest_is_the_embedding_apps() {
    let readme = read("README.md");
    let manifest = dependencies(&read("examples/embedding/Cargo.toml"));
    let shown = blocks(&readme, "toml").into_iter().find(|b| b.starts_with("[dependencies]"));
    assert_eq!(shown, Some(manifest.as_str()), "README's [dependencies] block against examples/embedding/Cargo.toml");
}

#[test]
fn the_readme_first_example_is_the_embedding_apps_readme_binary() {
    let readme = read("README.md");
    let first = blocks(&readme, "rust").first().copied().expect("a Rust example in the README");
    assert_eq!(first, read("examples/embedding/src/bin/readme.rs"));
}
