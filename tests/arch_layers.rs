//! The crate's architecture, checked from its source: which top-level
//! module may use which (the layer rule), and no import cycle between
//! sibling modules anywhere in `src/`.
//!
//! # What counts as a use
//! A file *uses* module T when a path in its code (a `use` tree, or a path
//! in an expression or a type) resolves to T or to an item in T. Paths are
//! resolved as rustc would, far enough for this: `crate::`, `super::` and
//! `self::` paths and 2018-style paths through a child module, walking
//! child modules, then following the `use` bindings (re-exports and private
//! imports alike, which children see through `super::`) and glob
//! re-exports of the module reached, so `super::Context` in
//! `controller/bindcluster` counts as a use of `controller/context`. A path
//! through another module's re-export uses both: `crate::operator::Metrics`
//! uses `operator` (as written) and `telemetry` (where it is defined).
//! Comments, doc links and string literals do not count; `#[cfg(test)]`
//! code does (a test module's imports are dependencies too). `main.rs` (the
//! binary, above everything) is not read.
//!
//! # What counts as an edge
//! A use from file M of module T is an edge between siblings: the two
//! children of their closest common ancestor on the way to M and to T (so
//! `controller/bindcluster/read.rs` using `render/validate` is the edge
//! `controller -> render` of the crate root, and using
//! `controller/context` is `bindcluster -> context` inside `controller`).
//! A module using its own ancestor or descendant is no edge: a parent
//! declaring or re-exporting its children, and a child using what its parent
//! imported, are how modules nest, not dependencies between siblings.
//!
//! # The rules
//! - Every edge between top-level modules is in [`LAYERS`].
//! - Among the children of every module, the edges form no cycle, except
//!   the edges in [`CYCLE_ALLOWLIST`]. A failure prints each cycle with,
//!   for every edge of it, one file and line that makes it.

use std::collections::BTreeMap;
use std::path::Path;

use crate::support_arch::{Graph, find_cycles};

/// Which top-level module may use which. `telemetry`, `bind`, `yaml` and
/// `api` are leaves of the process graph: `operator` (the `run` process) ->
/// `controller` -> `render` -> `bind` / `api`; `local` (local mode, bench)
/// and `offline` (the `render` subcommand) sit on top.
const LAYERS: &[(&str, &[&str])] = &[
    ("telemetry", &[]),
    ("yaml", &[]),
    ("bind", &[]),
    ("api", &["yaml"]),
    ("render", &["api", "bind"]),
    (
        "controller",
        &["render", "api", "bind", "telemetry", "yaml"],
    ),
    (
        "operator",
        &["controller", "telemetry", "render", "api", "bind"],
    ),
    (
        "local",
        &[
            "operator",
            "controller",
            "telemetry",
            "render",
            "api",
            "bind",
            "yaml",
        ],
    ),
    ("import", &["render", "api", "bind", "yaml"]),
    (
        "offline",
        &["local", "controller", "render", "api", "bind", "yaml"],
    ),
];

/// Sibling edges (parent, from, to) a cycle may go through. One, test
/// code only: plan's unit tests (plan/tests.rs) check a plan through diff
/// (`Served`, `diff`) while diff uses plan's `Desired`; production code has
/// no cycle. The test fails when an entry is no longer needed, so it cannot
/// outlive its reason.
const CYCLE_ALLOWLIST: &[(&str, &str, &str)] = &[("controller/zonesync", "plan", "diff")];

#[test]
fn top_level_modules_use_only_the_layers_below() {
    let graph = Graph::of_source_dir(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    let layers: BTreeMap<&str, &[&str]> = LAYERS.iter().copied().collect();
    let top: Vec<String> = graph.children_of(&[]);
    let mut problems = Vec::new();
    for module in &top {
        if !layers.contains_key(module.as_str()) {
            problems.push(format!(
                "top-level module `{module}` has no row in LAYERS (say what it may use)"
            ));
        }
    }
    for ((from, to), at) in graph.edges_in(&[]) {
        let allowed = layers.get(from.as_str()).copied().unwrap_or_default();
        if !allowed.contains(&to.as_str()) {
            problems.push(format!("`{from}` may not use `{to}`: {at}"));
        }
    }
    assert!(
        problems.is_empty(),
        "layer rule broken:\n{}",
        problems.join("\n")
    );
    // The table itself must be a hierarchy, or it allows a cycle.
    let table: BTreeMap<(String, String), String> = LAYERS
        .iter()
        .flat_map(|(from, tos)| {
            tos.iter()
                .map(move |to| ((from.to_string(), to.to_string()), "LAYERS".to_string()))
        })
        .collect();
    assert_eq!(
        find_cycles(&table),
        Vec::<Vec<String>>::new(),
        "LAYERS has a cycle"
    );
}

#[test]
fn no_import_cycle_between_sibling_modules() {
    let graph = Graph::of_source_dir(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    let mut report = Vec::new();
    for parent in graph.parents() {
        let mut edges = graph.edges_in(&parent);
        let parent_name = parent.join("/");
        for (p, from, to) in CYCLE_ALLOWLIST {
            if *p == parent_name {
                let key = (from.to_string(), to.to_string());
                if edges.remove(&key).is_none() {
                    report.push(format!(
                        "CYCLE_ALLOWLIST entry {p}: {from} -> {to} is no longer used; remove it"
                    ));
                }
            }
        }
        for cycle in find_cycles(&edges) {
            let mut text = format!(
                "cycle in `{}`: {}",
                or_root(&parent_name),
                cycle.join(" -> ")
            );
            for pair in cycle.windows(2) {
                let at = &edges[&(pair[0].clone(), pair[1].clone())];
                text.push_str(&format!("\n    {} -> {}: {at}", pair[0], pair[1]));
            }
            report.push(text);
        }
    }
    assert!(
        report.is_empty(),
        "import cycles between sibling modules:\n{}",
        report.join("\n")
    );
}

/// The checker on a small made-up crate: it must see uses through
/// `super::` re-exports, another module's re-export (both modules), grouped
/// `use` trees and plain paths, ignore comments, strings and parent/child
/// nesting, and name the cycle.
#[test]
fn the_checker_finds_a_cycle_through_a_reexport_and_ignores_nesting() {
    let files = [
        ("lib.rs", "pub mod a;\npub mod b;\npub mod c;\npub mod d;\n"),
        (
            "a/mod.rs",
            "pub mod x;\npub mod y;\npub use x::Thing;\n// crate::c::Gone in a comment\nconst S: &str = \"crate::c::Gone\";\n",
        ),
        (
            "a/x.rs",
            "use super::y::{self, Other};\npub struct Thing;\n",
        ),
        (
            "a/y.rs",
            "pub struct Other;\nfn f() -> super::Thing { crate::b::g(); todo!() }\n",
        ),
        (
            "b.rs",
            "use crate::{a::Thing, c::{self}};\npub fn g() {}\n#[cfg(test)]\nmod tests { use super::*; }\n",
        ),
        (
            "c.rs",
            "pub fn h() { let _ = crate::b::g; }\nfn t(_: crate::d::Thing) {}\n",
        ),
        // A re-export of someone else's item: c's use of it uses d and a.
        ("d.rs", "pub use crate::a::x::Thing;\n"),
    ];
    let graph = Graph::of_files(files.iter().map(|(p, t)| (p.to_string(), t.to_string())));
    let top = graph.edges_in(&[]);
    let top_keys: Vec<_> = top.keys().cloned().collect();
    assert_eq!(
        top_keys,
        [
            ("a".into(), "b".into()),
            ("b".into(), "a".into()),
            ("b".into(), "c".into()),
            ("c".into(), "a".into()),
            ("c".into(), "b".into()),
            ("c".into(), "d".into()),
            ("d".into(), "a".into()),
        ],
        "edges at the root: {top:?}"
    );
    assert_eq!(
        top[&("a".to_string(), "b".to_string())],
        "a/y.rs:2 (crate::b::g)"
    );
    // Inside `a`: y uses `super::Thing`, which is x's: y -> x; x -> y.
    let inner = graph.edges_in(&["a".to_string()]);
    assert!(
        inner.contains_key(&("y".to_string(), "x".to_string())),
        "{inner:?}"
    );
    let cycles = find_cycles(&inner);
    assert_eq!(
        cycles,
        vec![vec!["x".to_string(), "y".to_string(), "x".to_string()]]
    );
    assert_eq!(
        find_cycles(&top),
        vec![vec!["a".to_string(), "b".to_string(), "a".to_string()]]
    );
}

fn or_root(name: &str) -> &str {
    if name.is_empty() { "crate" } else { name }
}
