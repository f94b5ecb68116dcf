//! An import graph between sibling modules, and its circles.

use std::collections::{BTreeMap, BTreeSet};

/// Where an import was seen: the file and the path as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Witness {
    /// The importing file, under the crate's `src/`.
    pub file: String,
    /// The path, `crate`, `self` or `super` first.
    pub path: String,
}

/// Each module with the modules it imports from, each with its first witness.
#[derive(Debug, Default, Clone)]
pub struct Graph {
    /// Every module of the graph, importing or not.
    pub edges: BTreeMap<String, BTreeMap<String, Witness>>,
}

impl Graph {
    /// Adds a module with no imports yet.
    pub fn add_node(&mut self, name: &str) {
        self.edges.entry(name.to_string()).or_default();
    }

    /// Adds an import, keeping the first witness of each.
    pub fn add_edge(&mut self, from: &str, to: &str, witness: Witness) {
        self.add_node(to);
        self.edges.entry(from.to_string()).or_default().entry(to.to_string()).or_insert(witness);
    }

    /// The modules `name` imports from.
    pub fn imports(&self, name: &str) -> impl Iterator<Item = &str> {
        self.edges.get(name).into_iter().flat_map(|e| e.keys().map(String::as_str))
    }

    /// The strongly connected components of more than one module, each sorted
    /// (Tarjan's algorithm).
    pub fn circles(&self) -> Vec<Vec<String>> {
        let mut tarjan = Tarjan {
            graph: self,
            index: BTreeMap::new(),
            low: BTreeMap::new(),
            stack: Vec::new(),
            on_stack: BTreeSet::new(),
            out: Vec::new(),
        };
        for v in self.edges.keys() {
            if !tarjan.index.contains_key(v.as_str()) {
                tarjan.visit(v);
            }
        }
        tarjan.out
    }
}

/// The state of one run of Tarjan's algorithm.
#[derive(Debug)]
struct Tarjan<'g> {
    /// The graph searched.
    graph: &'g Graph,
    /// Each visited module's visiting order.
    index: BTreeMap<&'g str, usize>,
    /// The lowest index reachable from each module within its component.
    low: BTreeMap<&'g str, usize>,
    /// Modules whose component is not yet complete.
    stack: Vec<&'g str>,
    /// The modules on `stack`.
    on_stack: BTreeSet<&'g str>,
    /// The components found.
    out: Vec<Vec<String>>,
}

impl<'g> Tarjan<'g> {
    /// Visits `v` and everything it reaches.
    fn visit(&mut self, v: &'g str) {
        let order = self.index.len();
        self.index.insert(v, order);
        self.low.insert(v, order);
        self.stack.push(v);
        self.on_stack.insert(v);
        let graph = self.graph;
        for w in graph.imports(v) {
            if !self.index.contains_key(w) {
                self.visit(w);
                let low = self.low[v].min(self.low[w]);
                self.low.insert(v, low);
            } else if self.on_stack.contains(w) {
                let low = self.low[v].min(self.index[w]);
                self.low.insert(v, low);
            }
        }
        if self.low[v] == self.index[v] {
            let mut component = Vec::new();
            while let Some(w) = self.stack.pop() {
                self.on_stack.remove(w);
                component.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                self.out.push(component);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph(edges: &[(&str, &str)]) -> Graph {
        let mut g = Graph::default();
        for (a, b) in edges {
            g.add_edge(a, b, Witness { file: String::new(), path: String::new() });
        }
        g
    }

    #[test]
    fn circles_are_the_components_of_more_than_one_module() {
        let g = graph(&[("a", "b"), ("b", "c"), ("c", "a"), ("c", "d"), ("d", "e"), ("e", "d"), ("f", "a")]);
        assert_eq!(g.circles(), [vec!["d", "e"], vec!["a", "b", "c"]]);
    }

    #[test]
    fn a_chain_has_no_circle() {
        assert!(graph(&[("a", "b"), ("b", "c"), ("a", "c")]).circles().is_empty());
    }
}
