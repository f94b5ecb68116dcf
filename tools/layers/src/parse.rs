//! One source file's syntax tree, read for what the checker needs: the `mod`
//! declarations that name further files, the paths that reach other modules, and, at
//! the file's top level, the items it defines and the names its `use` items bind.
//!
//! Items under `#[cfg(test)]` (or any `cfg` that holds only in tests) are skipped
//! whole: tests may reach anywhere, and a `#[cfg(test)] mod x;` declaration's file is
//! never read.
//!
//! Limitation: a macro's body is a token stream, not a syntax tree. It is read only
//! where it parses as comma-separated expressions (`format!`, `vec![a, b]`,
//! `assert_eq!`, …); paths in any other macro body (`tokio::select!`, `macro_rules!`)
//! are not seen.

use std::collections::{BTreeMap, BTreeSet};

use syn::punctuated::Punctuated;
use syn::visit::{self, Visit};
use syn::{Expr, Meta, Token, UseTree};

/// A `mod NAME;` declaration: a module whose body is another file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModDecl {
    /// The inline modules (`mod a { … }`) the declaration stands in, outermost first.
    pub within: Vec<String>,
    /// The declared module's name.
    pub name: String,
    /// Its `#[path = "…"]`, if it has one.
    pub path_attr: Option<String>,
}

/// A path that starts at `crate`, `self` or `super`, as written.
///
/// Paths that start with any other name reach an extern crate, the prelude, a child
/// module (never a circle) or a name bound by a `use`, whose own path is collected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsedPath {
    /// The inline modules the path stands in, outermost first.
    pub within: Vec<String>,
    /// The path's segments, `crate`, `self` and `super` included.
    pub segments: Vec<String>,
}

/// What the checker reads from one file.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct FileSyntax {
    /// `mod NAME;` declarations, outside tests.
    pub mod_decls: Vec<ModDecl>,
    /// Inline modules (`mod a { … }`), each as its path inside the file.
    pub inline_mods: Vec<Vec<String>>,
    /// Paths to this crate's modules and items, outside tests.
    pub paths: Vec<UsedPath>,
    /// Names of the items the file defines at its top level (functions, types,
    /// statics, macros, …), modules excepted.
    pub items: BTreeSet<String>,
    /// Names bound by the file's top-level `use` items, each with the path it names.
    pub bindings: BTreeMap<String, Vec<String>>,
}

/// Reads a file's source text.
pub fn parse(text: &str) -> syn::Result<FileSyntax> {
    let file = syn::parse_file(text)?;
    let mut collector = Collector::default();
    collector.visit_file(&file);
    Ok(collector.syntax)
}

/// Whether a `cfg` predicate holds only in tests: `test`, or `all(…)` with one that
/// does, or `any(…)` whose every alternative does.
fn requires_test(meta: &Meta) -> bool {
    match meta {
        Meta::Path(path) => path.is_ident("test"),
        Meta::List(list) => {
            let Ok(nested) = list.parse_args_with(Punctuated::<Meta, Token![,]>::parse_terminated) else {
                return false;
            };
            if list.path.is_ident("all") {
                nested.iter().any(requires_test)
            } else if list.path.is_ident("any") {
                !nested.is_empty() && nested.iter().all(requires_test)
            } else {
                false
            }
        }
        Meta::NameValue(_) => false,
    }
}

/// Whether the attributes hold a `cfg` that keeps their item to tests.
fn test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|attr| attr.path().is_ident("cfg") && attr.parse_args::<Meta>().is_ok_and(|m| requires_test(&m)))
}

/// The value of a `#[path = "…"]` attribute.
fn path_attr(attrs: &[syn::Attribute]) -> Option<String> {
    attrs.iter().find_map(|attr| match &attr.meta {
        Meta::NameValue(nv) if nv.path.is_ident("path") => match &nv.value {
            Expr::Lit(syn::ExprLit { lit: syn::Lit::Str(s), .. }) => Some(s.value()),
            _ => None,
        },
        _ => None,
    })
}

/// Whether a path's first segment anchors it in this crate.
fn anchored(first: &str) -> bool {
    matches!(first, "crate" | "self" | "super")
}

/// A `use` tree flattened: each name it binds (`None` for globs and `self`-less
/// prefixes of groups) with the full path it names.
fn flatten(tree: &UseTree, prefix: &mut Vec<String>, out: &mut Vec<(Option<String>, Vec<String>)>) {
    match tree {
        UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            flatten(&p.tree, prefix, out);
            prefix.pop();
        }
        UseTree::Name(n) if n.ident == "self" => {
            out.push((prefix.last().cloned(), prefix.clone()));
        }
        UseTree::Name(n) => {
            let mut full = prefix.clone();
            full.push(n.ident.to_string());
            out.push((Some(n.ident.to_string()), full));
        }
        UseTree::Rename(r) => {
            let mut full = prefix.clone();
            if r.ident != "self" {
                full.push(r.ident.to_string());
            }
            out.push((Some(r.rename.to_string()), full));
        }
        UseTree::Glob(_) => out.push((None, prefix.clone())),
        UseTree::Group(g) => {
            for item in &g.items {
                flatten(item, prefix, out);
            }
        }
    }
}

/// The syntax-tree walk behind [`parse`].
#[derive(Debug, Default)]
struct Collector {
    /// The inline modules the walk is in.
    within: Vec<String>,
    /// What it found.
    syntax: FileSyntax,
}

impl Collector {
    /// Keeps a path if it starts at `crate`, `self` or `super`.
    fn keep(&mut self, segments: Vec<String>) {
        if segments.first().is_some_and(|s| anchored(s)) {
            self.syntax.paths.push(UsedPath { within: self.within.clone(), segments });
        }
    }

    /// Records a top-level item's name.
    fn define(&mut self, ident: &syn::Ident) {
        if self.within.is_empty() {
            self.syntax.items.insert(ident.to_string());
        }
    }
}

impl<'ast> Visit<'ast> for Collector {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        use syn::Item;
        match item {
            Item::Mod(m) if test_only(&m.attrs) => {}
            Item::Mod(m) => match &m.content {
                None => self.syntax.mod_decls.push(ModDecl {
                    within: self.within.clone(),
                    name: m.ident.to_string(),
                    path_attr: path_attr(&m.attrs),
                }),
                Some((_, items)) => {
                    self.within.push(m.ident.to_string());
                    self.syntax.inline_mods.push(self.within.clone());
                    for item in items {
                        self.visit_item(item);
                    }
                    self.within.pop();
                }
            },
            Item::Use(u) if test_only(&u.attrs) => {}
            Item::Use(u) => {
                if u.leading_colon.is_some() {
                    return;
                }
                let mut names = Vec::new();
                flatten(&u.tree, &mut Vec::new(), &mut names);
                for (name, path) in names {
                    if let (Some(name), true) = (name, self.within.is_empty()) {
                        self.syntax.bindings.insert(name, path.clone());
                    }
                    self.keep(path);
                }
            }
            other => {
                let (attrs, ident) = match other {
                    Item::Const(i) => (&i.attrs, Some(&i.ident)),
                    Item::Enum(i) => (&i.attrs, Some(&i.ident)),
                    Item::Fn(i) => (&i.attrs, Some(&i.sig.ident)),
                    Item::Macro(i) => (&i.attrs, i.ident.as_ref()),
                    Item::Static(i) => (&i.attrs, Some(&i.ident)),
                    Item::Struct(i) => (&i.attrs, Some(&i.ident)),
                    Item::Trait(i) => (&i.attrs, Some(&i.ident)),
                    Item::TraitAlias(i) => (&i.attrs, Some(&i.ident)),
                    Item::Type(i) => (&i.attrs, Some(&i.ident)),
                    Item::Union(i) => (&i.attrs, Some(&i.ident)),
                    Item::Impl(i) => (&i.attrs, None),
                    Item::ForeignMod(i) => (&i.attrs, None),
                    Item::ExternCrate(i) => (&i.attrs, None),
                    _ => return visit::visit_item(self, other),
                };
                if test_only(attrs) {
                    return;
                }
                if let Some(ident) = ident {
                    self.define(ident);
                }
                visit::visit_item(self, other);
            }
        }
    }

    fn visit_impl_item(&mut self, item: &'ast syn::ImplItem) {
        let attrs = match item {
            syn::ImplItem::Const(i) => &i.attrs,
            syn::ImplItem::Fn(i) => &i.attrs,
            syn::ImplItem::Type(i) => &i.attrs,
            syn::ImplItem::Macro(i) => &i.attrs,
            _ => return visit::visit_impl_item(self, item),
        };
        if !test_only(attrs) {
            visit::visit_impl_item(self, item);
        }
    }

    fn visit_trait_item(&mut self, item: &'ast syn::TraitItem) {
        let attrs = match item {
            syn::TraitItem::Const(i) => &i.attrs,
            syn::TraitItem::Fn(i) => &i.attrs,
            syn::TraitItem::Type(i) => &i.attrs,
            syn::TraitItem::Macro(i) => &i.attrs,
            _ => return visit::visit_trait_item(self, item),
        };
        if !test_only(attrs) {
            visit::visit_trait_item(self, item);
        }
    }

    fn visit_local(&mut self, local: &'ast syn::Local) {
        if !test_only(&local.attrs) {
            visit::visit_local(self, local);
        }
    }

    fn visit_stmt_macro(&mut self, stmt: &'ast syn::StmtMacro) {
        if !test_only(&stmt.attrs) {
            visit::visit_stmt_macro(self, stmt);
        }
    }

    fn visit_field(&mut self, field: &'ast syn::Field) {
        if !test_only(&field.attrs) {
            visit::visit_field(self, field);
        }
    }

    fn visit_variant(&mut self, variant: &'ast syn::Variant) {
        if !test_only(&variant.attrs) {
            visit::visit_variant(self, variant);
        }
    }

    fn visit_arm(&mut self, arm: &'ast syn::Arm) {
        if !test_only(&arm.attrs) {
            visit::visit_arm(self, arm);
        }
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        if path.leading_colon.is_none() {
            self.keep(path.segments.iter().map(|s| s.ident.to_string()).collect());
        }
        visit::visit_path(self, path);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        visit::visit_macro(self, mac);
        if let Ok(args) = mac.parse_body_with(Punctuated::<Expr, Token![,]>::parse_terminated) {
            for arg in &args {
                self.visit_expr(arg);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(text: &str) -> Vec<String> {
        parse(text).unwrap().paths.iter().map(|p| p.segments.join("::")).collect()
    }

    #[test]
    fn nested_use_groups_are_flattened() {
        let found = paths("use crate::{a::{X, Y as Z}, b::{self, c::*}, d};");
        assert_eq!(found, ["crate::a::X", "crate::a::Y", "crate::b", "crate::b::c", "crate::d"]);
    }

    #[test]
    fn paths_in_code_types_and_macro_arguments_are_found() {
        let found = paths(
            "fn f(x: crate::a::T) -> super::b::U { crate::c::g(); let s = format!(\"{}\", self::d::h()); \
             crate::e::m!(); todo!() }",
        );
        assert_eq!(found, ["crate::a::T", "super::b::U", "crate::c::g", "self::d::h", "crate::e::m"]);
    }

    #[test]
    fn test_only_items_are_skipped() {
        let syntax = parse(
            "#[cfg(test)] use crate::a::X;\n#[cfg(test)] mod t { use crate::b::Y; }\n\
             #[cfg(test)] mod u;\n#[cfg(all(test, unix))] fn f() { crate::c::g() }\n\
             struct S; impl S { #[cfg(test)] fn h() { crate::d::g() } }\n\
             #[cfg(any(test, feature = \"x\"))] mod kept;",
        )
        .unwrap();
        assert!(syntax.paths.is_empty(), "{:?}", syntax.paths);
        let decls: Vec<_> = syntax.mod_decls.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(decls, ["kept"]);
    }

    #[test]
    fn top_level_items_and_bindings_are_recorded() {
        let syntax = parse("pub use a::B;\nuse crate::c as d;\npub(crate) fn f() {}\nmod m { fn g() {} }").unwrap();
        assert_eq!(syntax.items.iter().collect::<Vec<_>>(), ["f"]);
        assert_eq!(syntax.bindings["B"], ["a", "B"]);
        assert_eq!(syntax.bindings["d"], ["crate", "c"]);
        assert_eq!(syntax.inline_mods, [vec!["m".to_string()]]);
    }
}
