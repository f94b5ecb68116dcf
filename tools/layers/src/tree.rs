//! A crate's module tree, read from `src/lib.rs` by following its `mod` declarations
//! (with their `#[path]`s) as the compiler does. Every declaration outside tests is
//! followed, whatever its `cfg`: the check covers every feature.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

use crate::parse::{self, FileSyntax};

/// A module's path from the crate root; the root's is empty.
pub type ModPath = Vec<String>;

/// One source file of the crate.
#[derive(Debug)]
pub struct SourceFile {
    /// Its path under the crate's `src/`.
    pub name: String,
    /// The module whose body it is.
    pub module: ModPath,
    /// What it holds.
    pub syntax: FileSyntax,
}

/// A crate's modules and files.
#[derive(Debug)]
pub struct Crate {
    /// Every module, file or inline, the root included.
    pub modules: BTreeSet<ModPath>,
    /// Its files, sorted by name.
    pub files: Vec<SourceFile>,
}

impl Crate {
    /// Reads the crate whose `lib.rs` is in `src`.
    pub fn load(src: &Path) -> anyhow::Result<Crate> {
        let mut krate = Crate { modules: BTreeSet::from([Vec::new()]), files: Vec::new() };
        krate.read(src, &src.join("lib.rs"), Vec::new(), src.to_path_buf())?;
        krate.files.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(krate)
    }

    /// The root file, `lib.rs`.
    pub fn root(&self) -> Option<&SourceFile> {
        self.files.iter().find(|f| f.module.is_empty())
    }

    /// Reads one file, the body of `module`, whose child modules' files are in
    /// `children`, and then the files it declares.
    fn read(&mut self, src: &Path, file: &Path, module: ModPath, children: PathBuf) -> anyhow::Result<()> {
        let text = std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
        let syntax = parse::parse(&text).with_context(|| format!("parsing {}", file.display()))?;
        let here = file.parent().unwrap_or(src);
        for inline in &syntax.inline_mods {
            self.modules.insert([module.as_slice(), inline].concat());
        }
        let mut next = Vec::new();
        for decl in &syntax.mod_decls {
            let dir = decl.within.iter().fold(children.clone(), |dir, m| dir.join(m));
            let (path, grandchildren) = match &decl.path_attr {
                // A `#[path]` outside inline modules is relative to the file's own
                // folder; a file read through one owns its folder, as a `mod.rs` does.
                Some(p) => {
                    let path = if decl.within.is_empty() { here.join(p) } else { dir.join(p) };
                    let owned = path.parent().unwrap_or(src).to_path_buf();
                    (path, owned)
                }
                None => {
                    let flat = dir.join(format!("{}.rs", decl.name));
                    let nested = dir.join(&decl.name).join("mod.rs");
                    match (flat.is_file(), nested.is_file()) {
                        (true, false) => (flat, dir.join(&decl.name)),
                        (false, true) => (nested, dir.join(&decl.name)),
                        (true, true) => {
                            bail!("module {} has two files: {}, {}", decl.name, flat.display(), nested.display())
                        }
                        (false, false) => bail!("module {} declared in {} has no file", decl.name, file.display()),
                    }
                }
            };
            let child = [module.as_slice(), &decl.within, std::slice::from_ref(&decl.name)].concat();
            self.modules.insert(child.clone());
            next.push((path, child, grandchildren));
        }
        let name = file.strip_prefix(src).unwrap_or(file).display().to_string();
        self.files.push(SourceFile { name, module, syntax });
        for (path, child, grandchildren) in next {
            self.read(src, &path, child, grandchildren)?;
        }
        Ok(())
    }
}
