//! In every crate of the workspace (and fuzz/), the import graph between
//! the crate's top-level modules has no cycles: each module uses only
//! modules below it.
//!
//! Every `crate::<module>` path (grouped `use crate::{a, b}` included) and
//! every `super::` of a top-level module is an edge from the module whose
//! source contains it: `src/<m>.rs` and everything under `src/<m>/`. Paths
//! to items of the crate root (`crate::join_if`, `crate::Error`) are edges
//! to the root, whose own `use` declarations are its edges (its `mod`
//! declarations are not); a root path to an item the root re-exports
//! (`pub use error::Error` makes `crate::Error` an edge to `error`).
//! Comments and string literals are ignored, and so
//! is test code (`#[cfg(test)] mod …`, inline or in its own file): a unit
//! test may build its fixtures from a higher layer.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The node of the crate root (`lib.rs`).
const ROOT: &str = "crate";

/// `src` with comments, string and character literals blanked (newlines
/// and lengths kept, so byte offsets stay meaningful).
fn strip(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let blank = |c: u8| if c == b'\n' { b'\n' } else { b' ' };
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    out.push(b' ');
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let mut depth = 0;
                while i < b.len() {
                    if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                        depth += 1;
                        out.extend([b' ', b' ']);
                        i += 2;
                    } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                        depth -= 1;
                        out.extend([b' ', b' ']);
                        i += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        out.push(blank(b[i]));
                        i += 1;
                    }
                }
            }
            b'r' if matches!(b.get(i + 1), Some(b'"' | b'#'))
                && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_')) =>
            {
                // raw string r"…", r#"…"#
                let mut j = i + 1;
                while b.get(j) == Some(&b'#') {
                    j += 1;
                }
                if b.get(j) != Some(&b'"') {
                    out.push(b[i]);
                    i += 1;
                    continue;
                }
                let hashes = j - i - 1;
                let mut end = j + 1;
                while end < b.len()
                    && !(b[end] == b'"'
                        && b[end + 1..].iter().take(hashes).all(|&c| c == b'#')
                        && b.len() - end > hashes)
                {
                    end += 1;
                }
                let stop = (end + 1 + hashes).min(b.len());
                out.extend(b[i..stop].iter().map(|&c| blank(c)));
                i = stop;
            }
            b'"' => {
                out.push(b' ');
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    let step = if b[i] == b'\\' { 2 } else { 1 };
                    for k in 0..step {
                        if let Some(&c) = b.get(i + k) {
                            out.push(blank(c));
                        }
                    }
                    i += step;
                }
                out.push(b' ');
                i += 1;
            }
            b'\'' => {
                // a character literal ('x', '\n', '\u{..}'), else a lifetime
                let close = if b.get(i + 1) == Some(&b'\\') {
                    let from = (i + 3).min(b.len());
                    b[from..].iter().position(|&c| c == b'\'').map(|p| from + p)
                } else {
                    // one character, then the quote
                    let ch = src[i + 1..].chars().next().map_or(1, char::len_utf8);
                    (b.get(i + 1 + ch) == Some(&b'\'')).then_some(i + 1 + ch)
                };
                match close {
                    Some(c) => {
                        out.extend(b[i..=c].iter().map(|&c| blank(c)));
                        i = c + 1;
                    }
                    None => {
                        out.push(b'\'');
                        i += 1;
                    }
                }
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8(out).expect("only ASCII bytes were replaced")
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// The identifier starting at `i` (after skipping whitespace).
fn ident_at(s: &str, mut i: usize) -> (&str, usize) {
    let b = s.as_bytes();
    while i < b.len() && b[i].is_ascii_whitespace() {
        i += 1;
    }
    let start = i;
    while i < b.len() && is_ident(b[i]) {
        i += 1;
    }
    (&s[start..i], i)
}

/// Blanks every `#[cfg(test)]` item that is a `mod` with a body; returns
/// the names of `#[cfg(test)] mod name;` declarations (their files are
/// test code too).
fn drop_test_mods(s: &mut String) -> Vec<String> {
    let mut out_of_line = Vec::new();
    let mut from = 0;
    while let Some(p) = s[from..].find("#[cfg(test)]") {
        let at = from + p;
        let after = at + "#[cfg(test)]".len();
        let (kw, i) = ident_at(s, after);
        let (kw, i) = if kw == "pub" || kw.starts_with("pub(") {
            ident_at(s, i)
        } else {
            (kw, i)
        };
        if kw != "mod" {
            from = after;
            continue;
        }
        let (name, i) = ident_at(s, i);
        let rest = s[i..].trim_start();
        if rest.starts_with(';') {
            out_of_line.push(name.to_string());
            from = i;
            continue;
        }
        // blank the braced body
        let open = i + s[i..].find('{').expect("mod body");
        let mut depth = 0usize;
        let mut end = open;
        for (k, c) in s[open..].bytes().enumerate() {
            match c {
                b'{' => depth += 1,
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = open + k;
                        break;
                    }
                }
                _ => {}
            }
        }
        let blanked: String = s[at..=end]
            .chars()
            .map(|c| if c == '\n' { '\n' } else { ' ' })
            .collect();
        s.replace_range(at..=end, &blanked);
        from = end + 1;
    }
    out_of_line
}

/// The byte ranges of the bodies of inline modules (`mod x { … }`) in
/// `code`: a `super::` inside one climbs out of it first.
fn inline_mods(code: &str) -> Vec<(usize, usize)> {
    let b = code.as_bytes();
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(p) = code[from..].find("mod ") {
        let at = from + p;
        from = at + 4;
        if at > 0 && is_ident(b[at - 1]) {
            continue;
        }
        let (name, i) = ident_at(code, at + 4);
        let rest = code[i..].trim_start();
        if name.is_empty() || !rest.starts_with('{') {
            continue;
        }
        let open = code.len() - rest.len();
        let mut depth = 0usize;
        for (k, &c) in b[open..].iter().enumerate() {
            match c {
                b'{' => depth += 1,
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        out.push((open, open + k));
                        break;
                    }
                }
                _ => {}
            }
        }
    }
    out
}

/// How many inline modules of `inline` enclose byte `at`.
fn inline_depth(inline: &[(usize, usize)], at: usize) -> usize {
    inline.iter().filter(|&&(a, b)| a < at && at < b).count()
}

/// Top-level modules referred to by `crate::…` paths in `code`, plus
/// [`ROOT`] for paths to the root's own items. `depth` is how deep the
/// file's module sits below the root (`src/m.rs`: 1, `src/m/x.rs`: 2): a
/// chain of that many `super::` reaches the root too.
fn references(
    code: &str,
    modules: &BTreeSet<String>,
    reexports: &BTreeMap<String, String>,
    depth: usize,
) -> BTreeSet<String> {
    let b = code.as_bytes();
    let inline = inline_mods(code);
    let mut refs = BTreeSet::new();
    let mut add = |name: &str| {
        if modules.contains(name) {
            refs.insert(name.to_string());
        } else if let Some(m) = reexports.get(name) {
            refs.insert(m.clone());
        } else if !name.is_empty() && name != "self" {
            refs.insert(ROOT.to_string());
        }
    };
    for key in ["crate::", "super::"] {
        let mut from = 0;
        while let Some(p) = code[from..].find(key) {
            let at = from + p;
            from = at + key.len();
            if at > 0 && (is_ident(b[at - 1]) || b[at - 1] == b'$' || b[at - 1] == b':') {
                continue; // `pir_crate::`, `$crate::`, the rest of a `super::` chain
            }
            if key == "super::" {
                let mut ups = 1;
                while code[from..].starts_with("super::") {
                    ups += 1;
                    from += key.len();
                }
                if ups < depth + inline_depth(&inline, at) {
                    continue; // inside the same top-level module
                }
            }
            let rest = code[from..].trim_start();
            if let Some(group) = rest.strip_prefix('{') {
                // use crate::{a, b::c, d::{e, f}}: the first segment of
                // each top-level entry of the group
                let mut depth = 0usize;
                let mut entry_start = true;
                let g = group.as_bytes();
                for (k, &c) in g.iter().enumerate() {
                    match c {
                        b'{' => depth += 1,
                        b'}' if depth == 0 => break,
                        b'}' => depth -= 1,
                        b',' if depth == 0 => entry_start = true,
                        c if entry_start && is_ident(c) => {
                            entry_start = false;
                            let (name, _) = ident_at(group, k);
                            add(name);
                        }
                        _ => {}
                    }
                }
            } else {
                let (name, _) = ident_at(code, from);
                add(name);
            }
        }
    }
    refs
}

/// `mod`/`use` edges of the crate root: `use m::…` and `pub use m::…`
/// (not `mod m;`), plus any `crate::m` path.
fn root_references(code: &str, modules: &BTreeSet<String>) -> BTreeSet<String> {
    let mut refs = references(code, modules, &BTreeMap::new(), 0);
    refs.remove(ROOT);
    for line in code.lines() {
        let t = line.trim_start();
        let t = t
            .strip_prefix("pub use ")
            .or_else(|| t.strip_prefix("pub(crate) use "))
            .or_else(|| t.strip_prefix("use "));
        if let Some(rest) = t {
            let (name, _) = ident_at(rest, 0);
            if modules.contains(name) {
                refs.insert(name.to_string());
            }
        }
    }
    refs
}

/// Items the crate root re-exports from its modules: `pub use m::X;`,
/// `pub use m::{X, Y as Z};` map `X`, `Z` (and `Y`) to `m`.
fn root_reexports(code: &str, modules: &BTreeSet<String>) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut from = 0;
    while let Some(p) = code[from..].find("pub use ") {
        let at = from + p + "pub use ".len();
        from = at;
        let (m, i) = ident_at(code, at);
        if !modules.contains(m) || !code[i..].starts_with("::") {
            continue;
        }
        let end = code[i..].find(';').map_or(code.len(), |e| i + e);
        let tail = &code[i + 2..end];
        let names = tail.trim().trim_start_matches('{').trim_end_matches('}');
        for entry in names.split(',') {
            for word in entry.split(|c: char| c.is_whitespace() || c == ':' || c == '{' || c == '}')
            {
                if !word.is_empty() && word != "as" && word != "self" {
                    out.insert(word.to_string(), m.to_string());
                }
            }
        }
    }
    out
}

fn rs_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            rs_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The module graph of the sources under `src`: top-level module (or
/// [`ROOT`]) → modules it refers to.
fn module_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    // top-level modules: src/m.rs or src/m/mod.rs (src/bin/ holds binaries)
    let modules: BTreeSet<String> = std::fs::read_dir(src)
        .expect("src directory")
        .flatten()
        .filter_map(|e| {
            let p = e.path();
            let stem = p.file_stem()?.to_str()?.to_string();
            let rust_file = p.extension().is_some_and(|x| x == "rs");
            let dir_module = p.is_dir() && p.join("mod.rs").is_file();
            ((rust_file || dir_module) && stem != "lib" && stem != "main").then_some(stem)
        })
        .collect();
    let mut graph = BTreeMap::new();
    let lib = std::fs::read_to_string(src.join("lib.rs")).expect("lib.rs");
    let mut code = strip(&lib);
    drop_test_mods(&mut code);
    graph.insert(ROOT.to_string(), root_references(&code, &modules));
    let reexports = root_reexports(&code, &modules);
    for m in &modules {
        let mut files = Vec::new();
        let file = src.join(format!("{m}.rs"));
        if file.is_file() {
            files.push(file);
        }
        rs_files(&src.join(m), &mut files);
        // test files: `#[cfg(test)] mod x;` declared in a file of m
        let mut test_files = BTreeSet::new();
        let mut refs = BTreeSet::new();
        let mut parsed = Vec::new();
        for f in &files {
            let text = std::fs::read_to_string(f).expect("source file");
            let mut code = strip(&text);
            let tests = drop_test_mods(&mut code);
            // a file's child modules live in the directory named after it
            let dir = if f.file_name().is_some_and(|n| n == "mod.rs") {
                f.parent().expect("parent").to_path_buf()
            } else {
                f.with_extension("")
            };
            for t in tests {
                test_files.insert(dir.join(format!("{t}.rs")));
                test_files.insert(dir.join(&t).join("mod.rs"));
                // and everything below a test module's directory
                let mut below = Vec::new();
                rs_files(&dir.join(&t), &mut below);
                test_files.extend(below);
            }
            parsed.push((f.clone(), code));
        }
        for (f, code) in parsed {
            if test_files.contains(&f) {
                continue;
            }
            // src/m.rs and src/m/mod.rs: 1; one more per directory below
            let rel = f.strip_prefix(src).expect("below src");
            let mut depth = rel.components().count();
            if rel.file_name().is_some_and(|n| n == "mod.rs") {
                depth -= 1;
            }
            refs.extend(references(&code, &modules, &reexports, depth));
        }
        refs.remove(m);
        graph.insert(m.clone(), refs);
    }
    graph
}

/// Every cycle's node sequence, one per strongly connected component with
/// more than one node (Tarjan).
fn cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct State<'a> {
        graph: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        sccs: Vec<Vec<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a str) {
        let i = s.index.len();
        s.index.insert(v, i);
        s.low.insert(v, i);
        s.stack.push(v);
        s.on_stack.insert(v);
        let graph = s.graph;
        for w in graph.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(lw);
            } else if s.on_stack.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut scc = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                scc.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if scc.len() > 1 {
                scc.sort();
                s.sccs.push(scc);
            }
        }
    }
    let mut s = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        sccs: Vec::new(),
    };
    for v in graph.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.sccs
}

fn render(graph: &BTreeMap<String, BTreeSet<String>>) -> String {
    graph
        .iter()
        .map(|(m, deps)| {
            format!(
                "{m} -> {}\n",
                deps.iter().cloned().collect::<Vec<_>>().join(", ")
            )
        })
        .collect()
}

/// The workspace root (this crate sits in it).
fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

/// The workspace's members (root Cargo.toml `members = [...]`), plus fuzz/.
fn crates() -> Vec<String> {
    let root = std::fs::read_to_string(workspace().join("Cargo.toml")).expect("Cargo.toml");
    let line = root
        .lines()
        .find(|l| l.trim_start().starts_with("members"))
        .expect("members line");
    let mut out: Vec<String> = line
        .split('"')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect();
    out.push("fuzz".to_string());
    out
}

#[test]
fn every_crates_module_graph_is_acyclic() {
    let crates = crates();
    assert!(crates.len() >= 11, "{crates:?}");
    let mut failures = Vec::new();
    let mut checked = 0;
    for c in &crates {
        let src = workspace().join(c).join("src");
        if !src.join("lib.rs").is_file() {
            continue;
        }
        checked += 1;
        let graph = module_graph(&src);
        let found = cycles(&graph);
        if !found.is_empty() {
            failures.push(format!("{c}: {found:?}\n{}", render(&graph)));
        }
    }
    assert!(checked >= 10, "only {checked} crates with a lib.rs");
    assert!(
        failures.is_empty(),
        "import cycles between top-level modules:\n{}",
        failures.join("\n")
    );
}

/// pir-core: the graph is about the real modules (a parse that found
/// nothing would pass vacuously), and `mem` is a leaf.
#[test]
fn pir_core_layers() {
    let src = workspace().join("pir-core/src");
    let graph = module_graph(&src);
    for m in ["kernel", "mem", "db", "digits", "ntt", "server", "client"] {
        assert!(graph.contains_key(m), "module {m} not found in {src:?}");
    }
    assert!(graph["server"].contains("kernel") && graph["db"].contains("mem"));
    assert!(
        graph["mem"].is_empty(),
        "mem must be a leaf:\n{}",
        render(&graph)
    );
}

/// auditor-server, bottom up: each layer uses only the layers before it
/// (docs/architecture.md). Modules of one layer may use each other one way.
#[test]
fn auditor_server_layers() {
    let layers: &[&[&str]] = &[
        &["error", "metrics", "conn"],
        &["config"],
        &["builddir", "layout", "epochdir", "snapshot"],
        &["memory", "fill", "batch"],
        &["epoch"],
        &["plan", "objstore"],
        &["state"],
        &["http", "reports", "routes"],
        &["service"],
        &["bench", "soak", "rehearse"],
    ];
    let graph = module_graph(&workspace().join("auditor-server/src"));
    let layer_of = |m: &str| layers.iter().position(|l| l.contains(&m));
    for (m, deps) in &graph {
        if m == ROOT {
            continue;
        }
        let Some(lm) = layer_of(m) else {
            panic!("auditor-server module {m} is in no layer of this test");
        };
        for d in deps {
            let ld = layer_of(d).unwrap_or_else(|| panic!("{m} uses {d}, which is in no layer"));
            assert!(
                ld <= lm,
                "auditor-server: {m} (layer {lm}) uses {d} (layer {ld}), a higher layer:\n{}",
                render(&graph)
            );
        }
    }
    assert!(
        graph["config"].iter().all(|d| d == "error"),
        "config is plain data: {:?}",
        graph["config"]
    );
}

/// The checker itself: a cycle through a grouped import, a root item and a
/// `super::` is found; comments, strings and test modules are not edges.
#[test]
fn checker_finds_cycles_and_ignores_comments_strings_and_tests() {
    let dir = std::env::temp_dir().join(format!("module-graph-checker-{}", std::process::id()));
    let src = dir.join("src");
    std::fs::create_dir_all(src.join("b")).expect("temp dir");
    let write = |p: &str, s: &str| std::fs::write(src.join(p), s).expect("write");
    write(
        "lib.rs",
        "pub mod a;\npub mod b;\npub mod c;\npub use a::X;\n",
    );
    write(
        "a.rs",
        "use crate::{b::{self, Y}, c};\n// crate::d is a comment\nconst S: &str = \"crate::d\";\n",
    );
    write("b.rs", "mod inner;\n");
    write(
        "b/inner.rs",
        "pub fn f() { super::super::c::g() }\nuse super::Y;\n",
    );
    write(
        "c.rs",
        "fn h() -> char { '\"' }\n#[cfg(test)]\nmod tests {\n    use crate::a;\n}\n#[cfg(test)]\nmod more;\n",
    );
    std::fs::create_dir_all(src.join("c")).expect("temp dir");
    write("c/more.rs", "use crate::a;\n");
    write("d.rs", "pub fn j() { super::join() }\n");
    let g = module_graph(&src);
    assert_eq!(g[ROOT], BTreeSet::from(["a".to_string()]));
    assert_eq!(g["a"], BTreeSet::from(["b".to_string(), "c".to_string()]));
    assert_eq!(g["b"], BTreeSet::from(["c".to_string()]));
    assert!(g["c"].is_empty(), "{}", render(&g));
    assert_eq!(g["d"], BTreeSet::from([ROOT.to_string()]));
    assert!(cycles(&g).is_empty());
    // now close a cycle a → b → c → a
    write("c.rs", "pub fn k() { crate::a::g() }\n");
    let g = module_graph(&src);
    let abc = ["a", "b", "c"].map(String::from).to_vec();
    assert_eq!(cycles(&g), vec![abc]);
    // and one through the root: d → root → a → d
    write("a.rs", "pub fn g() { crate::d::j() }\n");
    write("c.rs", "\n");
    let g = module_graph(&src);
    assert_eq!(
        cycles(&g),
        vec![vec!["a".to_string(), ROOT.to_string(), "d".to_string()]]
    );
    std::fs::remove_dir_all(&dir).expect("clean up");
}

/// A directory module (`src/m/mod.rs`) is a node, and a path to an item
/// the root re-exports is an edge to the module it comes from.
#[test]
fn checker_sees_directory_modules_and_root_reexports() {
    let dir = std::env::temp_dir().join(format!("module-graph-dirs-{}", std::process::id()));
    let src = dir.join("src");
    std::fs::create_dir_all(src.join("cfg")).expect("temp dir");
    let write = |p: &str, s: &str| std::fs::write(src.join(p), s).expect("write");
    write(
        "lib.rs",
        "pub mod cfg;\npub mod error;\npub mod epoch;\npub use error::{Error, Result as R};\n",
    );
    write("error.rs", "pub struct Error;\n");
    write("cfg/mod.rs", "mod shard;\nuse crate::Error;\n");
    write(
        "cfg/shard.rs",
        "use super::super::epoch::Epoch;\nuse super::X;\n",
    );
    write("epoch.rs", "use crate::{cfg, R};\n");
    let g = module_graph(&src);
    assert_eq!(
        g["cfg"],
        BTreeSet::from(["error".to_string(), "epoch".to_string()])
    );
    assert_eq!(
        g["epoch"],
        BTreeSet::from(["cfg".to_string(), "error".to_string()])
    );
    assert_eq!(
        cycles(&g),
        vec![vec!["cfg".to_string(), "epoch".to_string()]]
    );
    std::fs::remove_dir_all(&dir).expect("clean up");
}

/// A `super::` inside an inline module climbs out of that module first.
#[test]
fn super_in_an_inline_module_stays_in_its_file() {
    let dir = std::env::temp_dir().join(format!("module-graph-inline-{}", std::process::id()));
    let src = dir.join("src");
    std::fs::create_dir_all(&src).expect("temp dir");
    let write = |p: &str, s: &str| std::fs::write(src.join(p), s).expect("write");
    write("lib.rs", "pub mod hex;\npub mod b;\n");
    write(
        "hex.rs",
        "pub fn encode() {}\npub mod array {\n    pub fn f() { super::encode() }\n}\n",
    );
    write(
        "b.rs",
        "mod x {\n    fn g() { super::super::hex::encode() }\n}\n",
    );
    let g = module_graph(&src);
    assert!(g["hex"].is_empty(), "{}", render(&g));
    assert_eq!(g["b"], BTreeSet::from(["hex".to_string()]));
    std::fs::remove_dir_all(&dir).expect("clean up");
}
