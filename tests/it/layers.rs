//! Imports point down the layers written in ARCHITECTURE.md, and no file imports itself back.
//!
//! Every `crate::…` and `super::…` path in `src/` counts: `use` lines, grouped and nested
//! `use a::{b, c::{d, e}}` lines, and paths written inline in function bodies. Test code
//! (`#[cfg(test)]` onwards) and comments do not. The layer table is read from ARCHITECTURE.md
//! itself, so the document and the code cannot drift apart.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

type Module = Vec<String>;

/// The layer table between `<!-- layers -->` and `<!-- /layers -->`: rows `| N | a, b::c |`,
/// lower numbers lower down.
fn layer_table(architecture: &str) -> BTreeMap<Module, u32> {
    let start = architecture
        .find("<!-- layers -->")
        .expect("ARCHITECTURE.md has a <!-- layers --> table");
    let end = architecture[start..]
        .find("<!-- /layers -->")
        .expect("the layer table ends with <!-- /layers -->")
        + start;
    let mut out = BTreeMap::new();
    for row in architecture[start..end].lines() {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let Some(layer) = cells.get(1).and_then(|c| c.parse::<u32>().ok()) else {
            continue;
        };
        for name in cells[3].split(',') {
            let name = name.trim().trim_matches('`');
            if name.is_empty() {
                continue;
            }
            let module: Module = match name {
                "lib" => Vec::new(),
                _ => name.split("::").map(str::to_string).collect(),
            };
            assert!(
                out.insert(module, layer).is_none(),
                "{name} is in two layers"
            );
        }
    }
    out
}

/// `src/a/b.rs` → `[a, b]`, `src/a/mod.rs` → `[a]`, `lib.rs`/`main.rs` → `[]`.
fn module_of(rel: &Path) -> Module {
    let mut parts: Vec<String> = rel
        .with_extension("")
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

fn sources(src: &Path) -> BTreeMap<Module, String> {
    let mut out = BTreeMap::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                let module = module_of(path.strip_prefix(src).unwrap());
                // lib.rs and main.rs are both the root; their texts are read together.
                out.entry(module)
                    .and_modify(|t: &mut String| t.push_str(&text))
                    .or_insert(text);
            }
        }
    }
    out
}

/// The code without test modules, comments and string literals.
fn code(text: &str) -> String {
    let text = match text.find("#[cfg(test)]") {
        Some(i) => &text[..i],
        None => text,
    };
    let mut out = String::with_capacity(text.len());
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i] == b'"' {
            // A string literal (no raw strings in src/ need care here: their paths are text).
            i += 1;
            while i < b.len() && b[i] != b'"' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else {
            out.push(b[i] as char);
            i += 1;
        }
    }
    out
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Every path a `crate::`/`super::` reference at `at` names, nested groups expanded.
fn expand(text: &str, prefix: &[String]) -> Vec<Module> {
    // `text` starts right after `prefix::`.
    let mut path = prefix.to_vec();
    let mut rest = text;
    loop {
        rest = rest.trim_start();
        if let Some(group) = rest.strip_prefix('{') {
            return group_items(group)
                .into_iter()
                .flat_map(|item| match item.as_str() {
                    "self" | "*" => vec![path.clone()],
                    _ => expand(&item, &path),
                })
                .collect();
        }
        let n = rest.find(|c: char| !is_ident(c)).unwrap_or(rest.len());
        if n == 0 {
            break;
        }
        path.push(rest[..n].to_string());
        match rest[n..].strip_prefix("::") {
            Some(r) => rest = r,
            None => break,
        }
    }
    vec![path]
}

/// The comma-separated items of a `{…}` group, up to its closing brace.
fn group_items(group: &str) -> Vec<String> {
    let mut items = vec![String::new()];
    let mut depth = 0;
    for c in group.chars() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => break,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(String::new());
                continue;
            }
            _ => {}
        }
        items.last_mut().unwrap().push(c);
    }
    items
        .into_iter()
        .map(|s| s.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|s| !s.is_empty())
        .collect()
}

/// The file modules `module` refers to through `crate::` and `super::` paths.
fn references(module: &Module, text: &str, files: &BTreeSet<Module>) -> BTreeSet<Module> {
    let code = code(text);
    let mut out = BTreeSet::new();
    for (at, _) in code.match_indices("::") {
        let before = &code[..at];
        let word_start = before.rfind(|c: char| !is_ident(c)).map_or(0, |i| i + 1);
        let word = &before[word_start..];
        // Only the start of a path: `crate::` or the first of `super::super::`.
        if before[..word_start].ends_with("::") {
            continue;
        }
        let mut base: Module = match word {
            "crate" => Vec::new(),
            "super" => module[..module.len().saturating_sub(1)].to_vec(),
            _ => continue,
        };
        let mut rest = &code[at + 2..];
        while let Some(r) = rest.strip_prefix("super::") {
            base.pop();
            rest = r;
        }
        for path in expand(rest, &base) {
            // The longest prefix of the path that is a file.
            if let Some(target) = (1..=path.len())
                .rev()
                .map(|n| path[..n].to_vec())
                .find(|p| files.contains(p))
                && &target != module
            {
                out.insert(target);
            }
        }
    }
    out
}

fn layer_of(module: &Module, table: &BTreeMap<Module, u32>) -> Option<u32> {
    // The root (`lib`) is its own row, not a prefix of every module.
    let shortest = usize::from(!module.is_empty());
    (shortest..=module.len())
        .rev()
        .find_map(|n| table.get(&module[..n].to_vec()).copied())
}

fn name(m: &Module) -> String {
    if m.is_empty() {
        "lib".into()
    } else {
        m.join("::")
    }
}

/// Upward references and cycles, as sentences.
fn problems(src: &Path, architecture: &str) -> Vec<String> {
    let table = layer_table(architecture);
    let sources = sources(src);
    let files: BTreeSet<Module> = sources.keys().cloned().collect();
    let mut out = Vec::new();
    let mut edges: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for (module, text) in &sources {
        let Some(own) = layer_of(module, &table) else {
            out.push(format!(
                "{} is in no layer of ARCHITECTURE.md",
                name(module)
            ));
            continue;
        };
        for target in references(module, text, &files) {
            if let Some(theirs) = layer_of(&target, &table)
                && theirs > own
            {
                out.push(format!(
                    "{} (layer {own}) refers to {} (layer {theirs}), a layer above it",
                    name(module),
                    name(&target)
                ));
            }
            edges.entry(module.clone()).or_default().insert(target);
        }
    }
    out.extend(cycles(&edges));
    out
}

/// Every file that can reach itself through references, with the way round.
fn cycles(edges: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<String> {
    let mut out = Vec::new();
    for start in edges.keys() {
        // Breadth-first from `start`, remembering how each file was reached.
        let mut from: BTreeMap<&Module, &Module> = BTreeMap::new();
        let mut queue = std::collections::VecDeque::from([start]);
        while let Some(m) = queue.pop_front() {
            for next in edges.get(m).into_iter().flatten() {
                if next == start {
                    let mut way = Vec::new();
                    let mut at = m;
                    loop {
                        way.push(name(at));
                        if at == start {
                            break;
                        }
                        at = from[at];
                    }
                    way.reverse();
                    way.push(name(start));
                    out.push(format!("import cycle: {}", way.join(" → ")));
                    queue.clear();
                    break;
                }
                if next != start && !from.contains_key(next) {
                    from.insert(next, m);
                    queue.push_back(next);
                }
            }
        }
    }
    out
}

#[test]
fn imports_point_down_the_layers_of_architecture_md() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let architecture = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let found = problems(&root.join("src"), &architecture);
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// The checker itself: it must see an upward `use`, a grouped one, an inline path, a
/// `super::` path and a cycle, and nothing in comments, strings or tests.
#[test]
fn the_layer_check_finds_what_it_must() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    std::fs::create_dir_all(src.join("high")).unwrap();
    let files = [
        ("lib.rs", "pub mod low; pub mod high; pub mod peer;"),
        (
            "low.rs",
            "// crate::high::x in a comment\nconst S: &str = \"crate::high::y\";\npub fn f() { crate::high::inline::g(); }\n#[cfg(test)]\nmod tests { use crate::high::t; }\n",
        ),
        ("high/mod.rs", "pub mod inline; pub mod deep;"),
        ("high/inline.rs", "use super::deep::{self, x};"),
        ("high/deep.rs", "use crate::{peer::{a, b}};"),
        ("peer.rs", "use crate::high::deep::x;"),
    ];
    for (path, text) in files {
        std::fs::write(src.join(path), text).unwrap();
    }
    let architecture = "<!-- layers -->\n| layer | what | modules |\n|---|---|---|\n| 0 | low | `low` |\n| 1 | peers | `peer`, `high` |\n| 2 | root | `lib` |\n<!-- /layers -->\n";
    let table = layer_table(architecture);
    assert_eq!(table.get(&vec!["peer".to_string()]), Some(&1));
    let found = problems(src, &architecture.replace("`lib`", "``"));
    // The root is in no layer once its row is emptied.
    assert!(
        found
            .iter()
            .any(|p| p == "lib is in no layer of ARCHITECTURE.md"),
        "{found:?}"
    );
    let found = problems(src, architecture);
    let upward: Vec<&String> = found
        .iter()
        .filter(|p| p.contains("a layer above"))
        .collect();
    assert_eq!(
        upward,
        ["low (layer 0) refers to high::inline (layer 1), a layer above it"],
        "{found:?}"
    );
    assert!(
        found
            .iter()
            .any(|p| p.starts_with("import cycle: high::deep → peer → high::deep")),
        "{found:?}"
    );
    assert!(
        !found.iter().any(|p| p.contains("high::inline →")),
        "`use super::deep` is one way: {found:?}"
    );
}
