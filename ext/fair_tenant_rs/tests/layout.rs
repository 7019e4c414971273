//! No import circles: every source file is a module, and a `crate::` (or `super::`) path in its code
//! (comments left out) is an edge to the longest module that path names. The graph must have no cycle.
//! And only the bindings (`ruby_api/`, and the crate root that calls them) know Ruby.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

fn collect(dir: &Path, root: &Path, out: &mut BTreeMap<String, String>) {
    for entry in fs::read_dir(dir).expect("readable src/") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            collect(&path, root, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let rel = path
                .strip_prefix(root)
                .expect("under src/")
                .with_extension("");
            let mut parts: Vec<String> = rel
                .iter()
                .map(|p| p.to_string_lossy().into_owned())
                .collect();
            if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
                parts.pop();
            }
            let code = fs::read_to_string(&path).expect("readable source");
            out.insert(parts.join("::"), code);
        }
    }
}

/// The paths a file's code names, `crate::a::b::c` as `a::b::c`; `super::x` resolved against `module`.
fn paths(module: &str, code: &str) -> Vec<String> {
    let parent = module.rsplit_once("::").map_or("", |(p, _)| p);
    let mut found = Vec::new();
    for line in code.lines().filter(|l| !l.trim_start().starts_with("//")) {
        for (prefix, base) in [("crate::", ""), ("super::", parent)] {
            let mut rest = line;
            while let Some(at) = rest.find(prefix) {
                let preceded = rest[..at].chars().last();
                rest = &rest[at + prefix.len()..];
                if preceded.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                    continue;
                }
                let path: String = rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                    .collect();
                let path = path.trim_end_matches(':');
                found.push(if base.is_empty() {
                    path.to_string()
                } else {
                    format!("{base}::{path}")
                });
            }
        }
    }
    found
}

fn cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        stack: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = stack.iter().position(|n| n == node) {
            let mut found = stack[at..].to_vec();
            found.push(node.to_string());
            return Some(found);
        }
        if done.contains(node) {
            return None;
        }
        stack.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(found) = visit(next, graph, stack, done) {
                return Some(found);
            }
        }
        stack.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|node| visit(node, graph, &mut Vec::new(), &mut done))
}

/// Every source file's module path (`fair::caps`; the crate root is `""`) and its text.
fn sources() -> BTreeMap<String, String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = BTreeMap::new();
    collect(&root, &root, &mut files);
    files
}

fn graph(depth: Option<usize>) -> BTreeMap<String, BTreeSet<String>> {
    let files = sources();
    let cut = |m: &str| match depth {
        Some(d) => m.split("::").take(d).collect::<Vec<_>>().join("::"),
        None => m.to_string(),
    };
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, code) in &files {
        for path in paths(module, code) {
            let segments: Vec<&str> = path.split("::").collect();
            let target = (1..=segments.len())
                .rev()
                .map(|n| segments[..n].join("::"))
                .find(|m| files.contains_key(m));
            let (from, to) = match target {
                Some(t) => (cut(module), cut(&t)),
                None => continue,
            };
            if from != to && !from.is_empty() {
                graph.entry(from).or_default().insert(to);
            }
        }
    }
    graph
}

#[test]
fn no_import_circle_between_files() {
    let graph = graph(None);
    assert!(graph.len() > 20, "too few modules found: {graph:?}");
    assert_eq!(cycle(&graph), None, "an import circle between files");
}

#[test]
fn no_import_circle_between_top_level_modules() {
    let graph = graph(Some(1));
    assert!(
        graph.contains_key("ruby_api"),
        "no edges from ruby_api: {graph:?}"
    );
    assert_eq!(
        cycle(&graph),
        None,
        "an import circle between top-level modules"
    );
}

#[test]
fn finds_a_circle_when_there_is_one() {
    let mut graph = BTreeMap::new();
    graph.insert("a".to_string(), BTreeSet::from(["b".to_string()]));
    graph.insert("b".to_string(), BTreeSet::from(["a".to_string()]));
    assert_eq!(
        cycle(&graph),
        Some(vec!["a".into(), "b".into(), "a".into()])
    );
    let code = "use super::z::W;\n    // crate::commented\nuse crate::a::{b, c};";
    assert_eq!(paths("x::y", code), ["x::z::W", "a"]);
}

#[test]
fn only_the_bindings_know_ruby() {
    let files = sources();
    assert!(
        files.contains_key("ruby_api::client"),
        "no bindings found: {:?}",
        files.keys()
    );
    let knowing: Vec<&String> = files
        .iter()
        .filter(|(module, _)| !module.is_empty() && !module.starts_with("ruby_api"))
        .filter(|(_, code)| code.contains("magnus") || code.contains("crate::ruby_api"))
        .map(|(module, _)| module)
        .collect();
    assert!(
        knowing.is_empty(),
        "plain modules that name magnus or the bindings: {knowing:?}"
    );
}
