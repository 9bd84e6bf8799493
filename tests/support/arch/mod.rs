//! The source reader behind tests/arch_layers.rs: which module a path in
//! `src/` uses (see that file's header for what counts), the sibling edges
//! those uses make, and the cycles among them. Reads files only.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Module path from the crate root, e.g. `["controller", "bindcluster"]`.
pub type ModPath = Vec<String>;
/// (from, to) sibling edge -> one place that makes it ("file:line (path)").
pub type Edges = BTreeMap<(String, String), String>;

/// One `use` binding at a module's top level.
enum Binding {
    /// `name` stands for this absolute path.
    Name(String, Vec<String>),
    /// `use path::*`.
    Glob(Vec<String>),
}

struct File {
    rel: String,
    module: ModPath,
    /// Every path written in the file: line, the path as written (segments),
    /// and the module it was written in (the file's, or an inline `mod`'s).
    paths: Vec<(usize, Vec<String>, ModPath)>,
}

pub struct Graph {
    modules: BTreeSet<ModPath>,
    files: Vec<File>,
    bindings: BTreeMap<ModPath, Vec<Binding>>,
    /// Names of items each module defines (struct, fn, ...).
    items: BTreeMap<ModPath, BTreeSet<String>>,
}

impl Graph {
    pub fn of_source_dir(src: &Path) -> Graph {
        let mut files = Vec::new();
        collect_rs(src, src, &mut files);
        assert!(
            files.len() > 50,
            "read only {} files under {}",
            files.len(),
            src.display()
        );
        Graph::of_files(files.into_iter().filter(|(rel, _)| rel != "main.rs"))
    }

    pub fn of_files(files: impl IntoIterator<Item = (String, String)>) -> Graph {
        let mut graph = Graph {
            modules: BTreeSet::new(),
            files: Vec::new(),
            bindings: BTreeMap::new(),
            items: BTreeMap::new(),
        };
        let mut parsed = Vec::new();
        for (rel, text) in files {
            let module = module_of(&rel);
            graph.modules.insert(module.clone());
            parsed.push((rel, module, tokens(&strip(&text))));
        }
        for (rel, module, toks) in parsed {
            let file = graph.read_file(rel, module, &toks);
            graph.files.push(file);
        }
        graph
    }

    fn read_file(&mut self, rel: String, module: ModPath, toks: &[(usize, String)]) -> File {
        let mut paths = Vec::new();
        // Inline `mod name {` blocks: (name, brace depth inside the block).
        let mut inline: Vec<(String, usize)> = Vec::new();
        let mut depth = 0usize;
        let mut i = 0;
        while i < toks.len() {
            let (line, tok) = (&toks[i].0, toks[i].1.as_str());
            let here = || {
                let mut m = module.clone();
                m.extend(inline.iter().map(|(n, _)| n.clone()));
                m
            };
            match tok {
                "{" => depth += 1,
                "}" => {
                    if inline.last().is_some_and(|(_, d)| *d == depth) {
                        inline.pop();
                    }
                    depth = depth.saturating_sub(1);
                }
                "mod" if toks.get(i + 2).is_some_and(|t| t.1 == "{") => {
                    inline.push((toks[i + 1].1.clone(), depth + 1));
                }
                "mod" => {
                    let name = &toks[i + 1].1;
                    let mut m = here();
                    m.push(name.clone());
                    self.modules.insert(m);
                }
                "use" => {
                    let mut j = i + 1;
                    let mut out = Vec::new();
                    parse_use_tree(toks, &mut j, Vec::new(), &mut out);
                    let at = here();
                    for (segments, name) in out {
                        if depth == 0 {
                            let abs = self.absolute(&at, &segments);
                            let b = match name {
                                Some(n) => abs.map(|a| Binding::Name(n, a)),
                                None => abs.map(Binding::Glob),
                            };
                            if let Some(b) = b {
                                self.bindings.entry(at.clone()).or_default().push(b);
                            }
                        }
                        paths.push((*line, segments, at.clone()));
                    }
                    i = j;
                    continue;
                }
                "crate" | "super" | "self"
                    if toks.get(i + 1).is_some_and(|t| t.1 == "::")
                        && (i == 0 || toks[i - 1].1 != "::") =>
                {
                    let mut segments = vec![tok.to_string()];
                    let mut j = i + 1;
                    while toks.get(j).is_some_and(|t| t.1 == "::")
                        && toks.get(j + 1).is_some_and(|t| is_ident(&t.1))
                    {
                        segments.push(toks[j + 1].1.clone());
                        j += 2;
                    }
                    paths.push((*line, segments, here()));
                    i = j;
                    continue;
                }
                "struct" | "enum" | "fn" | "const" | "type" | "trait" | "static" | "union" => {
                    if let Some(name) = toks.get(i + 1).filter(|t| is_ident(&t.1)) {
                        self.items.entry(here()).or_default().insert(name.1.clone());
                    }
                }
                _ => {}
            }
            i += 1;
        }
        File { rel, module, paths }
    }

    /// The absolute path (from the crate root) of `segments` written in
    /// module `at`; `None` for an external crate's path.
    fn absolute(&self, at: &[String], segments: &[String]) -> Option<Vec<String>> {
        let mut base: Vec<String> = at.to_vec();
        let mut rest = segments;
        match rest.first().map(String::as_str) {
            Some("crate") => {
                base.clear();
                rest = &rest[1..];
            }
            Some("self") => rest = &rest[1..],
            Some("super") => {
                while rest.first().is_some_and(|s| s == "super") {
                    base.pop();
                    rest = &rest[1..];
                }
            }
            Some(first) => {
                let mut child = base.clone();
                child.push(first.to_string());
                if !self.modules.contains(&child) {
                    return None;
                }
            }
            None => return None,
        }
        base.extend(rest.iter().cloned());
        Some(base)
    }

    /// The module an absolute path lands in: child modules first, then the
    /// module's `use` bindings, then its glob imports. `hops` counts the
    /// bindings followed; from 9 on none is (the module as written).
    fn resolve(&self, path: &[String], hops: usize) -> ModPath {
        let mut module: ModPath = Vec::new();
        for (i, seg) in path.iter().enumerate() {
            let mut child = module.clone();
            child.push(seg.clone());
            if self.modules.contains(&child) {
                module = child;
                continue;
            }
            if hops > 8 {
                break;
            }
            let rest = &path[i + 1..];
            for b in self.bindings.get(&module).into_iter().flatten() {
                if let Binding::Name(name, target) = b
                    && name == seg
                    && target.as_slice() != path
                {
                    let mut t = target.clone();
                    t.extend(rest.iter().cloned());
                    return self.resolve(&t, hops + 1);
                }
            }
            if self.items.get(&module).is_some_and(|s| s.contains(seg)) {
                break;
            }
            for b in self.bindings.get(&module).into_iter().flatten() {
                if let Binding::Glob(g) = b
                    && self.names(g).contains(seg)
                {
                    let mut t = g.clone();
                    t.extend(path[i..].iter().cloned());
                    return self.resolve(&t, hops + 1);
                }
            }
            break;
        }
        module
    }

    /// Names a module offers: children, items and `use` bindings.
    fn names(&self, module: &[String]) -> BTreeSet<String> {
        let mut out: BTreeSet<String> = self.items.get(module).cloned().unwrap_or_default();
        for m in &self.modules {
            if m.len() == module.len() + 1 && m.starts_with(module) {
                out.insert(m[module.len()].clone());
            }
        }
        for b in self.bindings.get(module).into_iter().flatten() {
            if let Binding::Name(n, _) = b {
                out.insert(n.clone());
            }
        }
        out
    }

    pub fn children_of(&self, parent: &[String]) -> Vec<String> {
        self.modules
            .iter()
            .filter(|m| m.len() == parent.len() + 1 && m.starts_with(parent))
            .map(|m| m[parent.len()].clone())
            .collect()
    }

    /// Modules with at least two children (where a cycle can be).
    pub fn parents(&self) -> Vec<ModPath> {
        let mut out: Vec<ModPath> = vec![Vec::new()];
        out.extend(
            self.modules
                .iter()
                .filter(|m| self.children_of(m).len() > 1)
                .cloned(),
        );
        out.sort();
        out.dedup();
        out
    }

    /// The sibling edges among `parent`'s children.
    pub fn edges_in(&self, parent: &[String]) -> Edges {
        let mut edges = Edges::new();
        for f in &self.files {
            for (line, segments, at) in &f.paths {
                let Some(abs) = self.absolute(at, segments) else {
                    continue;
                };
                // Both the module whose path is written and the one the
                // name is defined in: `crate::operator::Metrics` depends on
                // operator re-exporting it, whatever telemetry defines.
                for target in [self.resolve(&abs, 9), self.resolve(&abs, 0)] {
                    let from = &f.module;
                    let common = from.iter().zip(&target).take_while(|(a, b)| a == b).count();
                    if common == from.len() || common == target.len() || common != parent.len() {
                        continue; // one nests in the other, or not under `parent`
                    }
                    if from[..common] != *parent {
                        continue;
                    }
                    edges
                        .entry((from[common].clone(), target[common].clone()))
                        .or_insert_with(|| format!("{}:{} ({})", f.rel, line, segments.join("::")));
                }
            }
        }
        edges
    }
}

/// Every elementary cycle is too many to print: one shortest cycle per
/// strongly connected component, closed (first node repeated at the end).
pub fn find_cycles(edges: &Edges) -> Vec<Vec<String>> {
    let mut adj: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (a, b) in edges.keys() {
        adj.entry(a).or_default().push(b);
        adj.entry(b).or_default();
    }
    let nodes: Vec<&str> = adj.keys().copied().collect();
    let mut cycles = Vec::new();
    let mut done: BTreeSet<&str> = BTreeSet::new();
    for &start in &nodes {
        if done.contains(start) {
            continue;
        }
        let comp = component(&adj, start);
        done.extend(comp.iter().copied());
        if comp.len() < 2 {
            continue;
        }
        // A shortest way back to `start` inside the component (BFS).
        let mut prev: BTreeMap<&str, &str> = BTreeMap::new();
        let mut queue = std::collections::VecDeque::from([start]);
        'bfs: while let Some(n) = queue.pop_front() {
            for &m in &adj[n] {
                if m == start {
                    let mut back = vec![n];
                    while let Some(&p) = prev.get(back[back.len() - 1]) {
                        back.push(p);
                    }
                    let mut path = vec![start.to_string()];
                    path.extend(back.iter().rev().skip(1).map(|s| s.to_string()));
                    path.push(start.to_string());
                    cycles.push(path);
                    break 'bfs;
                }
                if comp.contains(m) && !prev.contains_key(m) {
                    prev.insert(m, n);
                    queue.push_back(m);
                }
            }
        }
    }
    cycles
}

/// The strongly connected component of `start`: nodes reachable from it
/// that also reach it.
fn component<'a>(adj: &BTreeMap<&'a str, Vec<&'a str>>, start: &'a str) -> BTreeSet<&'a str> {
    let reach = |from: &'a str, forward: bool| {
        let mut seen = BTreeSet::from([from]);
        let mut stack = vec![from];
        while let Some(n) = stack.pop() {
            let next: Vec<&str> = if forward {
                adj[n].clone()
            } else {
                adj.iter()
                    .filter(|(_, v)| v.contains(&n))
                    .map(|(k, _)| *k)
                    .collect()
            };
            for m in next {
                if seen.insert(m) {
                    stack.push(m);
                }
            }
        }
        seen
    };
    let fwd = reach(start, true);
    let back = reach(start, false);
    fwd.intersection(&back).copied().collect()
}

/// Parses one `use` tree from `toks[*j]` up to its `;` (or the `,`/`}` of
/// an enclosing group), pushing (segments, bound name or None for a glob).
fn parse_use_tree(
    toks: &[(usize, String)],
    j: &mut usize,
    mut prefix: Vec<String>,
    out: &mut Vec<(Vec<String>, Option<String>)>,
) {
    while let Some((_, t)) = toks.get(*j) {
        match t.as_str() {
            "::" => *j += 1,
            "{" => {
                *j += 1;
                loop {
                    parse_use_tree(toks, j, prefix.clone(), out);
                    match toks.get(*j).map(|t| t.1.as_str()) {
                        Some(",") => *j += 1,
                        Some("}") => {
                            *j += 1;
                            break;
                        }
                        _ => break,
                    }
                    if toks.get(*j).is_some_and(|t| t.1 == "}") {
                        *j += 1;
                        break;
                    }
                }
                if toks.get(*j).is_some_and(|t| t.1 == ";") {
                    *j += 1;
                }
                return;
            }
            "*" => {
                *j += 1;
                out.push((prefix, None));
                return finish(toks, j);
            }
            "as" => {
                let alias = toks.get(*j + 1).map(|t| t.1.clone()).unwrap_or_default();
                *j += 2;
                if alias != "_" && !prefix.is_empty() {
                    out.push((prefix, Some(alias)));
                }
                return finish(toks, j);
            }
            "," | "}" | ";" => {
                if let Some(last) = prefix.last().cloned() {
                    // `self` in a group names the prefix itself.
                    let name = if last == "self" {
                        prefix.pop();
                        prefix.last().cloned().unwrap_or_default()
                    } else {
                        last
                    };
                    out.push((prefix, Some(name)));
                }
                return finish(toks, j);
            }
            s if is_ident(s) => {
                prefix.push(s.to_string());
                *j += 1;
            }
            _ => return,
        }
    }
}

/// Steps over the `;` that ends a top-level use (a group's `,` or `}` is
/// left for the group).
fn finish(toks: &[(usize, String)], j: &mut usize) {
    if toks.get(*j).is_some_and(|t| t.1 == ";") {
        *j += 1;
    }
}

fn is_ident(s: &str) -> bool {
    s.chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
        && s.chars().all(|c| c.is_alphanumeric() || c == '_')
}

/// `a/b/mod.rs` and `a/b.rs` -> `["a", "b"]`; `lib.rs` -> `[]`.
fn module_of(rel: &str) -> ModPath {
    let rel = rel.strip_suffix(".rs").expect("a .rs file");
    let mut parts: Vec<String> = rel.split('/').map(str::to_string).collect();
    if parts.last().is_some_and(|l| l == "mod" || l == "lib") {
        parts.pop();
    }
    parts
}

fn collect_rs(root: &Path, dir: &Path, out: &mut Vec<(String, String)>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            collect_rs(root, &p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            let rel = p
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/");
            out.push((rel, std::fs::read_to_string(&p).unwrap()));
        }
    }
}

/// Source with comments, string and char literals blanked (newlines kept,
/// so line numbers stay right).
fn strip(src: &str) -> String {
    let c: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    let blank = |ch: char| if ch == '\n' { '\n' } else { ' ' };
    let ident_before = |i: usize| i > 0 && (c[i - 1].is_alphanumeric() || c[i - 1] == '_');
    while i < c.len() {
        if c[i] == '/' && c.get(i + 1) == Some(&'/') {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if c[i] == '/' && c.get(i + 1) == Some(&'*') {
            let mut nest = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    nest += 1;
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    nest -= 1;
                    i += 2;
                    if nest == 0 {
                        break;
                    }
                } else {
                    out.push(blank(c[i]));
                    i += 1;
                }
            }
        } else if (c[i] == 'r' || (c[i] == 'b' && c.get(i + 1) == Some(&'r'))) && !ident_before(i) {
            // A raw string r"…", r#"…"#, br"…", or an identifier.
            let mut k = i + if c[i] == 'b' { 2 } else { 1 };
            let mut hashes = 0;
            while c.get(k) == Some(&'#') {
                hashes += 1;
                k += 1;
            }
            if c.get(k) != Some(&'"') {
                out.push(c[i]);
                i += 1;
                continue;
            }
            k += 1;
            while k < c.len() {
                if c[k] == '"' && (0..hashes).all(|h| c.get(k + 1 + h) == Some(&'#')) {
                    k += 1 + hashes;
                    break;
                }
                out.push(blank(c[k]));
                k += 1;
            }
            i = k;
        } else if c[i] == '"' {
            i += 1;
            while i < c.len() && c[i] != '"' {
                if c[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                if i < c.len() {
                    out.push(blank(c[i]));
                    i += 1;
                }
            }
            i += 1;
        } else if c[i] == '\'' && (!ident_before(i) || (c[i - 1] == 'b' && !ident_before(i - 1))) {
            // A char literal ('x', '\n', '\'', '\u{1F}', b'x') or a lifetime ('a).
            let end = if c.get(i + 1) == Some(&'\\') {
                (i + 3..c.len().min(i + 14)).find(|&k| c[k] == '\'')
            } else if c.get(i + 2) == Some(&'\'') {
                Some(i + 2)
            } else {
                None
            };
            match end {
                Some(e) => i = e + 1,
                None => {
                    out.push('\'');
                    i += 1;
                }
            }
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out
}

/// Identifiers, `::` and single punctuation characters, with their line.
fn tokens(src: &str) -> Vec<(usize, String)> {
    let c: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut line = 1;
    let mut i = 0;
    while i < c.len() {
        let ch = c[i];
        if ch == '\n' {
            line += 1;
            i += 1;
        } else if ch.is_whitespace() {
            i += 1;
        } else if ch.is_alphanumeric() || ch == '_' {
            let start = i;
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            out.push((line, c[start..i].iter().collect()));
        } else if ch == ':' && c.get(i + 1) == Some(&':') {
            out.push((line, "::".to_string()));
            i += 2;
        } else {
            out.push((line, ch.to_string()));
            i += 1;
        }
    }
    out
}
