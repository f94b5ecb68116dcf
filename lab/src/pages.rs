//! The command lines of the page-reading examples (`read_load`, `read_steer`): flags
//! that each take a value, and the page files, read once.

use anyhow::Context;
use bytes::Bytes;

/// The value of flag `name` (`--callers 8`), if given.
pub fn flag(args: &[String], name: &str) -> Option<String> {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned()
}

/// The files named by the arguments that are neither a flag nor a flag's value, read.
pub fn page_files(args: &[String]) -> anyhow::Result<Vec<Bytes>> {
    let mut pages = Vec::new();
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        if arg.starts_with("--") {
            rest.next();
        } else {
            pages.push(Bytes::from(std::fs::read(arg).with_context(|| format!("reading {arg}"))?));
        }
    }
    anyhow::ensure!(!pages.is_empty(), "no pages given");
    Ok(pages)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_take_their_value_and_the_rest_are_pages() {
        let dir = tempfile::tempdir().unwrap();
        let page = dir.path().join("p.png");
        std::fs::write(&page, b"page").unwrap();
        let args: Vec<String> = ["--callers", "8", page.to_str().unwrap()].map(String::from).to_vec();
        assert_eq!(flag(&args, "--callers").as_deref(), Some("8"));
        assert_eq!(flag(&args, "--seconds"), None);
        assert_eq!(page_files(&args).unwrap(), [Bytes::from_static(b"page")]);
        assert!(page_files(&args[..2]).is_err(), "no pages");
    }
}
