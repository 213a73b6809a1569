//! Every Markdown file of the repository (README.md, docs/**, the crates'
//! READMEs; not target/ or node_modules/) is checked against the tree:
//!
//! * a relative link points to a file or folder that exists, inside the
//!   repository;
//! * a `file.md#anchor` or `#anchor` link points to a heading of that file
//!   (GitHub's anchor rules: lower case, punctuation dropped, spaces to
//!   hyphens, `-1`, `-2`, … for repeated headings);
//! * a section cited by name (`benchmarks.md, "Batching"`,
//!   `scale.md section "Derived"`) is a heading of that file;
//! * the prose cites no git commit: no word of 7 to 12 or of 40 lower-case
//!   hex digits with both a digit and a letter, outside fenced code blocks
//!   and URLs (the docs describe the system as it is; its history is in
//!   git).
//!
//! What the docs say about metrics and error codes is checked by
//! auditor-server's and ct-ingest's own `tests/docs.rs`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};

/// One thing wrong with one line of one document.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Problem {
    file: String,
    line: usize,
    what: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.file, self.line, self.what)
    }
}

/// A document split for checking: its anchors, its headings' plain text,
/// and its text with fenced code blocks blanked (line numbers kept).
struct Doc {
    anchors: BTreeSet<String>,
    headings: Vec<String>,
    /// Outside fenced code blocks; inline code kept.
    prose: Vec<String>,
}

/// Whether `line` opens or closes a fenced code block: its fence
/// character and length.
fn fence(line: &str) -> Option<(char, usize)> {
    let t = line.trim_start();
    let c = t.chars().next()?;
    if c != '`' && c != '~' {
        return None;
    }
    let n = t.chars().take_while(|&x| x == c).count();
    (n >= 3).then_some((c, n))
}

/// The text of an ATX heading line (`## Title ##` → `Title`).
fn heading_text(line: &str) -> Option<&str> {
    let t = line.trim_start();
    if line.len() - t.len() > 3 {
        return None;
    }
    let level = t.chars().take_while(|&c| c == '#').count();
    if !(1..=6).contains(&level) {
        return None;
    }
    let rest = &t[level..];
    if !(rest.is_empty() || rest.starts_with(' ') || rest.starts_with('\t')) {
        return None;
    }
    let rest = rest.trim();
    let rest = rest.trim_end_matches('#');
    Some(rest.trim_end())
}

/// A heading's text as GitHub renders it: links reduced to their text,
/// code and emphasis marks and backslash escapes dropped.
fn plain(text: &str) -> String {
    let mut out = String::new();
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == ']' && chars.get(i + 1) == Some(&'(') {
            // skip the link destination
            let mut depth = 0usize;
            i += 1;
            while i < chars.len() {
                match chars[i] {
                    '(' => depth += 1,
                    ')' => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
        } else if c == '\\' && chars.get(i + 1).is_some_and(|n| n.is_ascii_punctuation()) {
            out.push(chars[i + 1]);
            i += 1;
        } else if !matches!(c, '`' | '*' | '[' | '!')
            || (c == '!' && chars.get(i + 1) != Some(&'['))
        {
            out.push(c);
        }
        i += 1;
    }
    out.trim().to_owned()
}

/// GitHub's anchor for a heading's plain text (before de-duplication).
fn slug(plain: &str) -> String {
    plain
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            '-' | '_' => Some(c),
            c if c.is_alphanumeric() => Some(c),
            _ => None,
        })
        .collect()
}

/// `line` with inline code spans replaced by spaces (same byte length, so
/// that positions still match).
fn blank_code_spans(line: &str) -> String {
    let b = line.as_bytes();
    let mut out = b.to_vec();
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'`' {
            i += 1;
            continue;
        }
        let n = b[i..].iter().take_while(|&&c| c == b'`').count();
        // the closing run of exactly n backticks
        let mut j = i + n;
        let mut close = None;
        while j < b.len() {
            if b[j] == b'`' {
                let m = b[j..].iter().take_while(|&&c| c == b'`').count();
                if m == n {
                    close = Some(j);
                    break;
                }
                j += m;
            } else {
                j += 1;
            }
        }
        match close {
            Some(j) => {
                for c in &mut out[i..j + n] {
                    *c = b' ';
                }
                i = j + n;
            }
            None => i += n,
        }
    }
    // Only ASCII bytes were replaced, and whole spans of them: still UTF-8.
    String::from_utf8(out).unwrap_or_else(|_| line.to_owned())
}

fn parse(text: &str) -> Doc {
    let mut anchors = BTreeSet::new();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut headings = Vec::new();
    let mut prose = Vec::new();
    let mut open: Option<(char, usize)> = None;
    for line in text.lines() {
        if let Some((c, n)) = fence(line) {
            match open {
                None => open = Some((c, n)),
                Some((oc, on)) if oc == c && n >= on && line.trim().chars().all(|x| x == c) => {
                    open = None
                }
                Some(_) => {}
            }
            prose.push(String::new());
            continue;
        }
        if open.is_some() {
            prose.push(String::new());
            continue;
        }
        if let Some(h) = heading_text(line) {
            let p = plain(h);
            let base = slug(&p);
            let count = seen.entry(base.clone()).or_insert(0);
            anchors.insert(if *count == 0 {
                base.clone()
            } else {
                format!("{base}-{count}")
            });
            *count += 1;
            headings.push(p);
        }
        for attr in ["id=\"", "name=\""] {
            let mut rest = line;
            while let Some(at) = rest.find(attr) {
                rest = &rest[at + attr.len()..];
                if let Some(end) = rest.find('"') {
                    anchors.insert(rest[..end].to_owned());
                }
            }
        }
        prose.push(line.to_owned());
    }
    Doc {
        anchors,
        headings,
        prose,
    }
}

/// `rel` (a `/`-separated link path) resolved against the folder `dir`
/// of the repository; `None` if it leaves the repository.
fn resolve(dir: &str, rel: &str) -> Option<String> {
    let mut parts: Vec<&str> = if rel.starts_with('/') {
        Vec::new()
    } else {
        dir.split('/').filter(|p| !p.is_empty()).collect()
    };
    for p in rel.split('/') {
        match p {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            p => parts.push(p),
        }
    }
    Some(parts.join("/"))
}

fn parent(file: &str) -> &str {
    file.rfind('/').map_or("", |i| &file[..i])
}

fn percent_decode(s: &str) -> String {
    let hex = |c: u8| (c as char).to_digit(16);
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The link destinations of one prose line (inline code already blanked):
/// `[text](dest)`, `![alt](dest "title")`, `[label]: dest`, and HTML
/// `href="…"` / `src="…"`.
fn link_targets(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        let mut depth = 1usize;
        let mut end = after.len();
        for (i, c) in after.char_indices() {
            match c {
                '(' => depth += 1,
                ')' => {
                    depth -= 1;
                    if depth == 0 {
                        end = i;
                        break;
                    }
                }
                _ => {}
            }
        }
        let inner = after[..end].trim();
        let dest = if let Some(d) = inner.strip_prefix('<') {
            d.split('>').next().unwrap_or("")
        } else {
            inner.split_whitespace().next().unwrap_or("")
        };
        if !dest.is_empty() {
            out.push(dest.to_owned());
        }
        rest = &after[end.min(after.len())..];
    }
    let t = line.trim_start();
    if let Some(r) = t.strip_prefix('[') {
        if let Some(close) = r.find("]:") {
            if !r[..close].is_empty() && !r[..close].contains('[') {
                if let Some(d) = r[close + 2..].split_whitespace().next() {
                    out.push(d.trim_start_matches('<').trim_end_matches('>').to_owned());
                }
            }
        }
    }
    for attr in ["href=\"", "src=\""] {
        let mut rest = line;
        while let Some(at) = rest.find(attr) {
            rest = &rest[at + attr.len()..];
            if let Some(end) = rest.find('"') {
                out.push(rest[..end].to_owned());
            }
        }
    }
    out
}

/// Whether a link destination names a scheme (`https:`, `mailto:`):
/// links out of the repository are not checked.
fn is_external(dest: &str) -> bool {
    let Some(colon) = dest.find(':') else {
        return false;
    };
    let scheme = &dest[..colon];
    !scheme.is_empty()
        && scheme
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '.' | '-'))
}

/// Hex-shaped words that are names, not commits.
const NOT_COMMITS: &[&str] = &["ed25519"];

/// The words of `line` that look like a git commit: 7–12 or 40 lower-case
/// hex digits, with at least one digit and one letter, not `0x…`, not part
/// of a longer word or of a URL, and not a name such as `ed25519`.
fn commit_like(line: &str) -> Vec<String> {
    // URLs (and the rest of their token) are not prose.
    let mut text = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(at) = rest.find("://") {
        let start = rest[..at]
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '+' | '.' | '-')))
            .map_or(0, |i| i + 1);
        text.push_str(&rest[..start]);
        let tail = &rest[at + 3..];
        let end = tail
            .find(|c: char| c.is_whitespace() || matches!(c, ')' | '>' | '"' | '`'))
            .unwrap_or(tail.len());
        text.push(' ');
        rest = &tail[end..];
    }
    text.push_str(rest);

    let mut out = Vec::new();
    let b = text.as_bytes();
    let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut i = 0;
    while i < b.len() {
        if !word(b[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < b.len() && word(b[i]) {
            i += 1;
        }
        let w = &text[start..i];
        let hex = w
            .bytes()
            .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c));
        let has_digit = w.bytes().any(|c| c.is_ascii_digit());
        let has_letter = w.bytes().any(|c| c.is_ascii_alphabetic());
        let len_ok = (7..=12).contains(&w.len()) || w.len() == 40;
        let hex_prefixed = start >= 1 && b[start - 1] == b'x' && start >= 2 && b[start - 2] == b'0';
        if hex && has_digit && has_letter && len_ok && !hex_prefixed && !NOT_COMMITS.contains(&w) {
            out.push(w.to_owned());
        }
    }
    out
}

/// Sections cited by name: `file.md "Name"`, `file.md, "Name"`,
/// `file.md section "Name"` (backticks around the file name allowed, the
/// name possibly wrapped over lines). Returns (line index, file, name).
fn cited_sections(prose: &[String]) -> Vec<(usize, String, String)> {
    let text: String = prose
        .iter()
        .map(|l| l.replace('`', ""))
        .collect::<Vec<_>>()
        .join("\n");
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(at) = text[from..].find(".md") {
        let md_end = from + at + 3;
        from = md_end;
        // the file name before ".md"
        let start = text[..md_end - 3]
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '/')))
            .map_or(0, |i| i + 1);
        let file = &text[start..md_end];
        let mut rest = &text[md_end..];
        // "file.md#x" is a link, checked as one
        if file.len() <= 3 {
            continue;
        }
        rest = rest.strip_prefix(',').unwrap_or(rest);
        rest = rest.trim_start_matches([' ', '\n']);
        if let Some(r) = rest.strip_prefix("section") {
            rest = r.trim_start_matches([' ', '\n']);
        }
        let close = if let Some(r) = rest.strip_prefix('"') {
            rest = r;
            '"'
        } else if let Some(r) = rest.strip_prefix('\u{201c}') {
            rest = r;
            '\u{201d}'
        } else {
            continue;
        };
        let Some(end) = rest.find(close) else {
            continue;
        };
        let name = rest[..end].split_whitespace().collect::<Vec<_>>().join(" ");
        if name.is_empty() || name.len() > 120 {
            continue;
        }
        let line = text[..md_end].matches('\n').count();
        out.push((line, file.to_owned(), name));
    }
    out
}

/// Whether `name` names one of `doc`'s sections: a heading equal to it, or
/// starting with it up to punctuation ("Epoch build" for "Epoch build:
/// HASH_V2 …"), case aside, or its anchor.
fn names_section(doc: &Doc, name: &str) -> bool {
    let want = name.trim().to_lowercase();
    doc.anchors.contains(&slug(name))
        || doc.headings.iter().any(|h| {
            let h = h.to_lowercase();
            h == want
                || h.strip_prefix(&want)
                    .is_some_and(|r| r.starts_with(|c: char| !c.is_alphanumeric()))
        })
}

/// Checks a set of Markdown documents (paths relative to the repository
/// root, `/`-separated); `exists` says whether any other relative path is
/// a file or folder of the repository.
fn check(docs: &BTreeMap<String, String>, exists: &dyn Fn(&str) -> bool) -> Vec<Problem> {
    let parsed: BTreeMap<&str, Doc> = docs.iter().map(|(p, t)| (p.as_str(), parse(t))).collect();
    let mut problems = Vec::new();
    for (file, doc) in &parsed {
        let dir = parent(file);
        let mut problem = |line: usize, what: String| {
            problems.push(Problem {
                file: (*file).to_owned(),
                line: line + 1,
                what,
            })
        };
        for (n, line) in doc.prose.iter().enumerate() {
            for dest in link_targets(&blank_code_spans(line)) {
                if is_external(&dest) {
                    continue;
                }
                let (path, anchor) = match dest.split_once('#') {
                    Some((p, a)) => (p, Some(a)),
                    None => (dest.as_str(), None),
                };
                let target = if path.is_empty() {
                    (*file).to_owned()
                } else {
                    match resolve(dir, &percent_decode(path)) {
                        Some(t) => t,
                        None => {
                            problem(n, format!("link {dest} leaves the repository"));
                            continue;
                        }
                    }
                };
                if !parsed.contains_key(target.as_str()) && !exists(&target) {
                    problem(n, format!("link {dest}: {target} does not exist"));
                    continue;
                }
                if let (Some(anchor), Some(t)) = (anchor, parsed.get(target.as_str())) {
                    if !t.anchors.contains(&percent_decode(anchor).to_lowercase()) {
                        problem(n, format!("link {dest}: no heading #{anchor} in {target}"));
                    }
                }
            }
            for hash in commit_like(line) {
                problem(
                    n,
                    format!("cites the commit {hash} (docs describe the present)"),
                );
            }
        }
        for (n, cited, name) in cited_sections(&doc.prose) {
            let target = resolve(dir, &cited)
                .filter(|t| parsed.contains_key(t.as_str()))
                .or_else(|| resolve("", &cited).filter(|t| parsed.contains_key(t.as_str())))
                .or_else(|| resolve("docs", &cited).filter(|t| parsed.contains_key(t.as_str())));
            match target.as_deref().and_then(|t| parsed.get(t)) {
                None => problem(n, format!("cites {cited} \"{name}\": no such document")),
                Some(t) if !names_section(t, &name) => {
                    problem(n, format!("cites {cited} \"{name}\": no such section"))
                }
                Some(_) => {}
            }
        }
    }
    problems
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("test-support sits in the workspace root")
        .to_path_buf()
}

/// Every `.md` file under `dir`, skipping build output, dependencies and
/// hidden folders.
fn markdown_files(root: &Path, dir: &Path, out: &mut BTreeMap<String, String>) {
    let entries =
        std::fs::read_dir(dir).unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()));
    for entry in entries {
        let entry = entry.expect("directory entry");
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        let kind = entry.file_type().expect("file type");
        if kind.is_dir() {
            if name == "target" || name == "node_modules" || name.starts_with('.') {
                continue;
            }
            markdown_files(root, &path, out);
        } else if name.ends_with(".md") {
            let rel = path
                .strip_prefix(root)
                .expect("under the root")
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join("/");
            let text =
                std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {rel}: {e}"));
            out.insert(rel, text);
        }
    }
}

#[test]
fn every_markdown_file_links_and_cites_what_exists() {
    let root = root();
    let mut docs = BTreeMap::new();
    markdown_files(&root, &root, &mut docs);
    for must in ["README.md", "docs/benchmarks.md", "docs/architecture.md"] {
        assert!(
            docs.contains_key(must),
            "{must} not found among {:?}",
            docs.keys()
        );
    }
    let exists = |rel: &str| root.join(rel).exists();
    let problems = check(&docs, &exists);
    assert!(
        problems.is_empty(),
        "{} problem(s) in the docs:\n{}",
        problems.len(),
        problems
            .iter()
            .map(|p| format!("  {p}\n"))
            .collect::<String>()
    );
}

/// The benchmark record stays the current results (issue notes keep the
/// history): docs/benchmarks.md at most 400 lines, docs/bench at most 50
/// files.
#[test]
fn benchmark_docs_stay_current_results() {
    let root = root();
    let lines = std::fs::read_to_string(root.join("docs/benchmarks.md"))
        .expect("docs/benchmarks.md")
        .lines()
        .count();
    assert!(
        lines <= 400,
        "docs/benchmarks.md has {lines} lines (at most 400)"
    );
    fn files(dir: &Path) -> usize {
        std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
            .map(|e| {
                let e = e.expect("directory entry");
                if e.file_type().expect("file type").is_dir() {
                    files(&e.path())
                } else {
                    1
                }
            })
            .sum()
    }
    let n = files(&root.join("docs/bench"));
    assert!(n <= 50, "docs/bench holds {n} files (at most 50)");
}

mod checker {
    use super::*;

    fn run(docs: &[(&str, &str)], files: &[&str]) -> Vec<String> {
        let docs: BTreeMap<String, String> = docs
            .iter()
            .map(|(p, t)| ((*p).to_owned(), (*t).to_owned()))
            .collect();
        let files: BTreeSet<String> = files.iter().map(|f| (*f).to_owned()).collect();
        check(&docs, &|p: &str| files.contains(p))
            .into_iter()
            .map(|p| p.to_string())
            .collect()
    }

    const GUIDE: &str = "# Guide\n\n## Batching\n\n## AMD EPYC Zen 4 (AVX-512 + VNNI)\n\n## Batching\n\n### The `vpmulld` kernel\n";

    #[test]
    fn good_links_and_citations_pass() {
        let readme = "See [guide](docs/guide.md#batching), [again](docs/guide.md#batching-1), \
[zen](docs/guide.md#amd-epyc-zen-4-avx-512--vnni), [k](docs/guide.md#the-vpmulld-kernel), \
[code](src/lib.rs), [dir](docs/), [top](#readme) and <https://example.org/abcdef1>, \
[paper](https://eprint.iacr.org/2024/270).\n\n# Readme\n\nAs guide.md, \"Batching\" says; \
digests like `e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855`, 0x1f2e3d4c5b and Ed25519 are not commits.\n\n\
```sh\ngit checkout 1a2b3c4\n```\n";
        let out = run(
            &[("README.md", readme), ("docs/guide.md", GUIDE)],
            &["src/lib.rs", "docs"],
        );
        assert!(out.is_empty(), "{out:?}");
    }

    #[test]
    fn a_broken_anchor_is_caught() {
        let out = run(
            &[
                (
                    "README.md",
                    "# Readme\n\nSee [the batch curve](docs/guide.md#batch-curve).\n",
                ),
                ("docs/guide.md", GUIDE),
            ],
            &[],
        );
        assert_eq!(
            out,
            ["README.md:3: link docs/guide.md#batch-curve: no heading #batch-curve in docs/guide.md"]
        );
        let out = run(&[("docs/guide.md", "# Guide\n\nAbove: [x](#guid).\n")], &[]);
        assert_eq!(
            out,
            ["docs/guide.md:3: link #guid: no heading #guid in docs/guide.md"]
        );
    }

    #[test]
    fn a_missing_file_and_a_link_out_of_the_repository_are_caught() {
        let out = run(
            &[(
                "docs/guide.md",
                "# Guide\n\n[a](bench/gone.json) and [b](../../etc/passwd)\n",
            )],
            &["docs/bench"],
        );
        assert_eq!(
            out,
            [
                "docs/guide.md:3: link bench/gone.json: docs/bench/gone.json does not exist",
                "docs/guide.md:3: link ../../etc/passwd leaves the repository",
            ]
        );
    }

    #[test]
    fn a_commit_cite_is_caught() {
        let out = run(
            &[(
                "docs/guide.md",
                "# Guide\n\nMeasured at 16d2833 (see `b35-a78c511-run1.json`).\n\n```\n16d2833 in a code block is fine\n```\n",
            )],
            &[],
        );
        assert_eq!(
            out,
            [
                "docs/guide.md:3: cites the commit 16d2833 (docs describe the present)",
                "docs/guide.md:3: cites the commit a78c511 (docs describe the present)",
            ]
        );
    }

    #[test]
    fn a_cited_section_that_does_not_exist_is_caught() {
        let out = run(
            &[
                (
                    "docs/scale.md",
                    "# Scale\n\nThe parts (`benchmarks.md`, \"Tried and\ndropped\"); the\nbatches (benchmarks.md section \"Batching\").\n",
                ),
                ("docs/benchmarks.md", "# Benchmarks\n\n## Batching\n"),
            ],
            &[],
        );
        assert_eq!(
            out,
            ["docs/scale.md:3: cites benchmarks.md \"Tried and dropped\": no such section"]
        );
    }

    #[test]
    fn slugs_follow_github() {
        assert_eq!(
            slug(&plain("AMD EPYC Zen 4 (AVX-512 + VNNI)")),
            "amd-epyc-zen-4-avx-512--vnni"
        );
        assert_eq!(
            slug(&plain("auditor-server: load and epoch build")),
            "auditor-server-load-and-epoch-build"
        );
        assert_eq!(
            slug(&plain("The `vpmulld` kernel at 2^33 bits")),
            "the-vpmulld-kernel-at-233-bits"
        );
        assert_eq!(
            slug(&plain("[Sizing](operator.md#sizing) of ℓ1 × ℓ2")),
            "sizing-of-ℓ1--ℓ2"
        );
        assert_eq!(
            slug(&plain("1. The set and its filters (SimplePIR §6)")),
            "1-the-set-and-its-filters-simplepir-6"
        );
    }
}
