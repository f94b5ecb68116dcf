//! A crate's import graphs, one per module with child modules (the crate root's is
//! the top-level graph), built by resolving every path of every file to the module it
//! reaches; and their problems.
//!
//! A path from module `a::x` reaching `a::y::…` is an import of `y` by `x` in `a`'s
//! graph; reaching `a::Item` (an item of `a` itself, or one `a` re-exports) it is an
//! import of the parent, never a circle. At the root alone, a name `lib.rs` binds with
//! `use` is followed to its module, and an item `lib.rs` defines is the pseudo-module
//! [`LIB`].

use std::collections::BTreeMap;
use std::path::Path;

use crate::graph::{Graph, Witness};
use crate::layers::{self, Layers};
use crate::tree::{Crate, ModPath};

/// The top-level graph's name for the items `lib.rs` itself defines.
pub const LIB: &str = "lib";

/// One problem, with the imports behind it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// What is wrong.
    pub message: String,
    /// The imports that make it so: file and path.
    pub details: Vec<String>,
    /// Whether it is a circle between modules below the crate root.
    pub nested_circle: bool,
}

impl Problem {
    /// A problem with no details yet.
    pub fn new(message: String) -> Problem {
        Problem { message, details: Vec::new(), nested_circle: false }
    }

    /// With one more detail.
    pub fn with_detail(mut self, detail: String) -> Problem {
        self.details.push(detail);
        self
    }
}

/// One crate's graphs and problems.
#[derive(Debug)]
pub struct Report {
    /// Its top-level modules and their imports.
    pub top: Graph,
    /// The problems found.
    pub problems: Vec<Problem>,
}

/// Checks the crate whose `lib.rs` is in `src`, its top-level modules against
/// `layers` when given.
pub fn check(crate_name: &str, src: &Path, layers: Option<Layers>) -> anyhow::Result<Report> {
    let krate = Crate::load(src)?;
    let graphs = graphs(&krate);
    let mut problems = Vec::new();
    let top = graphs.get(&Vec::new()).cloned().unwrap_or_default();
    if let Some(layers) = layers {
        problems.extend(layers::check(crate_name, &top, layers));
    }
    for (dir, graph) in &graphs {
        let at = if dir.is_empty() { "crate".to_string() } else { format!("crate::{}", dir.join("::")) };
        for circle in graph.circles() {
            let mut problem = Problem::new(format!("{crate_name}: import circle in {at}: {}", circle.join(" <-> ")));
            problem.nested_circle = !dir.is_empty();
            for from in &circle {
                for (to, witness) in &graph.edges[from] {
                    if circle.contains(to) {
                        problem.details.push(format!("{from} -> {to}: {}: {}", witness.file, witness.path));
                    }
                }
            }
            problems.push(problem);
        }
    }
    Ok(Report { top, problems })
}

/// The graph of each module's children, keyed by the module.
fn graphs(krate: &Crate) -> BTreeMap<ModPath, Graph> {
    let mut graphs: BTreeMap<ModPath, Graph> = BTreeMap::new();
    for module in &krate.modules {
        if let Some((name, parent)) = module.split_last() {
            graphs.entry(parent.to_vec()).or_default().add_node(name);
        }
    }
    for file in &krate.files {
        for used in &file.syntax.paths {
            let from = [file.module.as_slice(), &used.within].concat();
            let Some(to) = resolve(krate, &from, &used.segments, 0) else { continue };
            let witness = Witness { file: file.name.clone(), path: used.segments.join("::") };
            for (d, (a, b)) in from.iter().zip(&to).enumerate() {
                if a == b {
                    continue;
                }
                let to_lib = d == 0 && b == LIB && !krate.modules.contains(&to[..1]);
                if to_lib || krate.modules.contains(&to[..=d]) {
                    graphs.entry(from[..d].to_vec()).or_default().add_edge(a, b, witness);
                }
                break;
            }
        }
    }
    graphs
}

/// The absolute path `segments` names, written in module `from`: `crate`, `self` and
/// `super` resolved; at the root, a name bound by `lib.rs`'s `use` followed, and an
/// item `lib.rs` defines made [`LIB`]. `None` for an extern crate's path, an unknown
/// name, or the root itself.
fn resolve(krate: &Crate, from: &[String], segments: &[String], depth: usize) -> Option<ModPath> {
    let mut rest = segments.iter().peekable();
    let mut at: Vec<String> = match rest.peek().map(|s| s.as_str()) {
        Some("crate") => Vec::new(),
        Some("self" | "super") => from.to_vec(),
        // Unanchored: from `lib.rs`'s bindings, a top-level module or an extern crate.
        Some(first) if krate.modules.contains(&vec![first.to_string()]) => return Some(segments.to_vec()),
        _ => return None,
    };
    if rest.peek().is_some_and(|s| *s == "crate" || *s == "self") {
        rest.next();
    }
    while rest.peek().is_some_and(|s| *s == "super") {
        rest.next();
        at.pop()?;
    }
    at.extend(rest.cloned());
    let first = at.first()?;
    if krate.modules.contains(&at[..1]) {
        return Some(at);
    }
    let root = krate.root()?;
    if let Some(bound) = root.syntax.bindings.get(first)
        && depth < 8
    {
        let mut target = resolve(krate, &[], bound, depth + 1)?;
        target.extend(at[1..].iter().cloned());
        return Some(target);
    }
    root.syntax.items.contains(first).then(|| vec![LIB.to_string()])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes the files (`path`, `text`) under a new folder, returning it.
    fn fixture(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (path, text) in files {
            let path = dir.path().join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        dir
    }

    fn messages(report: &Report) -> Vec<&str> {
        report.problems.iter().map(|p| p.message.as_str()).collect()
    }

    #[test]
    fn an_upward_import_in_a_nested_use_group_is_caught() {
        let dir = fixture(&[
            ("lib.rs", "mod tensor; mod metrics; mod kserve;"),
            ("tensor.rs", "pub struct X;"),
            ("kserve.rs", "pub struct Y;"),
            ("metrics.rs", "use crate::{tensor::{X}, kserve::Y};"),
        ]);
        let report = check("runtime", dir.path(), Some(layers::RUNTIME)).unwrap();
        assert_eq!(report.top.imports("metrics").collect::<Vec<_>>(), ["kserve", "tensor"]);
        assert_eq!(messages(&report), ["runtime: metrics (layer 1) imports kserve (layer 7): upward"]);
        assert_eq!(report.problems[0].details, ["metrics.rs: crate::kserve::Y"]);
    }

    #[test]
    fn a_circle_between_sibling_files_is_reported() {
        let dir = fixture(&[
            ("lib.rs", "pub mod m;"),
            ("m/mod.rs", "mod a; mod b; mod c;"),
            ("m/a.rs", "use super::b::B; pub struct A;"),
            ("m/b.rs", "pub struct B; pub fn f() -> crate::m::a::A { todo!() }"),
            ("m/c.rs", "pub fn g() { super::a::A; }"),
        ]);
        let report = check("lab", dir.path(), None).unwrap();
        assert_eq!(messages(&report), ["lab: import circle in crate::m: a <-> b"]);
        assert!(report.problems[0].nested_circle);
        assert_eq!(report.problems[0].details, ["a -> b: m/a.rs: super::b::B", "b -> a: m/b.rs: crate::m::a::A"]);
    }

    #[test]
    fn imports_in_tests_are_ignored() {
        let dir = fixture(&[
            ("lib.rs", "pub mod m;"),
            ("m/mod.rs", "mod a; mod b;"),
            (
                "m/a.rs",
                "pub struct A;\n#[cfg(test)] mod tests { use super::super::b::B; }\n\
                 #[cfg(test)] fn t() { crate::m::b::f(); }\n#[cfg(test)] mod a_tests;",
            ),
            ("m/a/a_tests.rs", "use crate::m::b::B;"),
            ("m/b.rs", "pub struct B; pub fn f() {} use super::a::A;"),
        ]);
        let report = check("lab", dir.path(), None).unwrap();
        assert_eq!(messages(&report), Vec::<&str>::new());
    }

    #[test]
    fn an_import_of_the_parent_is_not_a_sibling_circle() {
        let dir = fixture(&[
            ("lib.rs", "pub mod m;"),
            ("m/mod.rs", "mod a; mod b; pub struct P; pub use b::B;"),
            ("m/a.rs", "use super::{P, B}; pub struct A; fn f() -> crate::m::P { todo!() }"),
            ("m/b.rs", "pub struct B; use super::a::A; use self::super::P;"),
        ]);
        let report = check("lab", dir.path(), None).unwrap();
        assert_eq!(messages(&report), Vec::<&str>::new());
        let graphs = graphs(&Crate::load(dir.path()).unwrap());
        let m = &graphs[&vec!["m".to_string()]];
        assert_eq!(m.imports("a").count(), 0);
        assert_eq!(m.imports("b").collect::<Vec<_>>(), ["a"]);
    }

    #[test]
    fn an_import_of_an_item_of_lib_rs_is_reported() {
        let dir = fixture(&[
            ("lib.rs", "mod tensor; mod error; pub use tensor::X; pub(crate) fn helper() {}"),
            ("tensor.rs", "pub struct X;"),
            ("error.rs", "fn f() { let _ = crate::X; crate::helper(); }"),
        ]);
        let report = check("runtime", dir.path(), Some(layers::RUNTIME)).unwrap();
        assert_eq!(report.top.imports("error").collect::<Vec<_>>(), ["lib", "tensor"]);
        assert_eq!(messages(&report), ["runtime: error imports an item of lib.rs, which no module may"]);
        assert_eq!(report.problems[0].details, ["error.rs: crate::helper"]);
    }

    #[test]
    fn a_circle_between_top_level_modules_is_reported() {
        let dir = fixture(&[
            ("lib.rs", "mod tensor; mod trace;"),
            ("tensor.rs", "pub fn f() { crate::trace::g() }"),
            ("trace/mod.rs", "mod inner;"),
            ("trace/inner.rs", "pub fn h() { format!(\"{}\", crate::tensor::f()); }"),
        ]);
        let report = check("runtime", dir.path(), Some(layers::RUNTIME)).unwrap();
        assert_eq!(messages(&report), ["runtime: import circle in crate: tensor <-> trace"]);
        assert!(!report.problems[0].nested_circle);
    }
}
