//! The import graphs of the runtime, the sdk and the lab, checked. For the runtime
//! and the sdk, each top-level module's imports against its layers (those of docs/architecture.md): no
//! import from a higher layer, none of an item `lib.rs` defines. For both crates, no
//! import circle between sibling modules, at the top level or within any module.
//! Tests (`#[cfg(test)]` items and files) may import anything.
//!
//! Imports are read from the files' syntax trees: every path that starts at `crate`,
//! `self` or `super`, in `use` items and in code. `make test` runs it from the
//! repository root:
//!
//! ```text
//! cargo run --locked -q -p modelless-layers -- [--quiet] [--root DIR]
//! ```
//!
//! It lists each top-level module's imports (unless `--quiet`), then the problems, and
//! exits with 1 if there is one.

mod check;
mod graph;
mod layers;
mod parse;
mod tree;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::bail;

use crate::layers::Layers;

/// The crates checked: their folder under the repository root, and their layers.
const CRATES: &[(&str, Option<Layers>)] =
    &[("runtime", Some(layers::RUNTIME)), ("sdk", Some(layers::SDK)), ("lab", None)];

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("layers: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// Checks the crates, printing what it finds; whether there is no problem.
fn run() -> anyhow::Result<bool> {
    let mut quiet = false;
    let mut root = PathBuf::from(".");
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--quiet" => quiet = true,
            "--root" => match args.next() {
                Some(dir) => root = dir.into(),
                None => bail!("--root needs a folder"),
            },
            _ => bail!("usage: modelless-layers [--quiet] [--root DIR]"),
        }
    }
    let (mut modules, mut problems) = (0, Vec::new());
    for (name, layers) in CRATES {
        let report = check::check(name, &root.join(name).join("src"), *layers)?;
        if !quiet {
            print_imports(name, &report.top, *layers);
        }
        modules += report.top.edges.keys().filter(|m| *m != check::LIB).count();
        problems.extend(report.problems);
    }
    for problem in &problems {
        eprintln!("layers: {}", problem.message);
        for detail in &problem.details {
            eprintln!("layers:     {detail}");
        }
    }
    let nested = problems.iter().filter(|p| p.nested_circle).count();
    eprintln!("layers: {modules} modules, {} problems ({nested} of them circles within a module)", problems.len());
    Ok(problems.is_empty())
}

/// Prints each top-level module with what it imports: by layer where the crate has
/// layers (`?` for a module in none), else by name.
fn print_imports(crate_name: &str, top: &graph::Graph, layers: Option<Layers>) {
    println!("{crate_name}:");
    let mut modules: Vec<(String, &str)> = top
        .edges
        .keys()
        .filter(|m| *m != check::LIB)
        .map(|m| {
            let layer = layers.map(|l| layers::layer_of(l, m).map_or("?".to_string(), |i| i.to_string()));
            (layer.unwrap_or_default(), m.as_str())
        })
        .collect();
    if let Some(layers) = layers {
        let position = |m: &str| layers::layer_of(layers, m).map(|i| (i, layers[i].iter().position(|n| *n == m)));
        modules.sort_by_key(|(_, m)| position(m).unwrap_or((usize::MAX, None)));
    }
    for (layer, module) in modules {
        let imports: Vec<&str> = top.imports(module).collect();
        let imports = if imports.is_empty() { "(nothing)".to_string() } else { imports.join(", ") };
        println!("{layer:>2} {module:<11} <- {imports}");
    }
}
