//! Where unsafe code may live: the workspace denies `unsafe_code`
//! (root Cargo.toml `[workspace.lints]`), and only pir-core's SIMD kernels
//! (`kernel.rs` and below) and its aligned buffers (`mem.rs`) allow it,
//! each block with a `// SAFETY:` comment (clippy's
//! `undocumented_unsafe_blocks`, also a workspace lint).

use std::path::{Path, PathBuf};

/// The modules that may allow unsafe code, relative to the workspace.
const UNSAFE_HOMES: &[&str] = &["pir-core/src/kernel.rs", "pir-core/src/mem.rs"];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        let name = e.file_name();
        if p.is_dir() {
            if name != "target" && name != "node_modules" && name != ".git" {
                rust_files(&p, out);
            }
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

#[test]
fn unsafe_code_is_allowed_only_in_pir_cores_kernels() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf();
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    assert!(files.len() > 100, "only {} Rust files found", files.len());
    let mut homes_seen = 0;
    let mut wrong = Vec::new();
    for f in &files {
        let rel = f.strip_prefix(&root).expect("below the root");
        let rel = rel.to_string_lossy().replace('\\', "/");
        let text = std::fs::read_to_string(f).expect("source file");
        let allows = text.contains("allow(unsafe_code)");
        let home = UNSAFE_HOMES.contains(&rel.as_str());
        if allows && home {
            homes_seen += 1;
        } else if allows && !rel.starts_with("test-support/") {
            wrong.push(rel);
        }
    }
    assert!(
        wrong.is_empty(),
        "unsafe code allowed outside pir-core's kernels: {wrong:?}"
    );
    assert_eq!(homes_seen, UNSAFE_HOMES.len(), "{UNSAFE_HOMES:?}");
    let root_toml = std::fs::read_to_string(root.join("Cargo.toml")).expect("Cargo.toml");
    assert!(root_toml.contains("unsafe_code = \"deny\""));
}

/// Every crate of the workspace takes the workspace's lints.
#[test]
fn every_crate_inherits_the_workspace_lints() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf();
    let toml = std::fs::read_to_string(root.join("Cargo.toml")).expect("Cargo.toml");
    let members = toml
        .lines()
        .find(|l| l.trim_start().starts_with("members"))
        .expect("members");
    let crates: Vec<&str> = members.split('"').skip(1).step_by(2).collect();
    assert!(crates.len() >= 11, "{crates:?}");
    for c in crates {
        let t = std::fs::read_to_string(root.join(c).join("Cargo.toml")).expect("crate manifest");
        assert!(
            t.contains("[lints]\nworkspace = true"),
            "{c}/Cargo.toml does not inherit [workspace.lints]"
        );
    }
}
