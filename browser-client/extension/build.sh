#!/usr/bin/env bash
# Builds the extension, reproducibly, in one command:
#   pkg/             wasm-bindgen --target web   (loaded by background.js)
#   test/pkg-node/   wasm-bindgen --target nodejs (used by test/e2e.mjs)
#   $XPI_DIR/private-ct-auditor-<version>.xpi and its unpacked files in
#   $XPI_DIR/xpi/ (what `web-ext lint` reads); XPI_DIR defaults to
#   target/extension in the workspace.
#
# Pinned: the Rust toolchain (rust-toolchain.toml beside this script: cargo
# runs from here), wasm-bindgen-cli at the version of the wasm-bindgen crate
# in Cargo.lock, installed with --locked (a few minutes, once), and the
# paths that would otherwise end up in the wasm (remapped). Two builds from
# the same commit give the same XPI, byte for byte (.ci/run checks it).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
target="${CARGO_TARGET_DIR:-$root/target}"
xpi_dir="${XPI_DIR:-$target/extension}"
cd "$here" # rust-toolchain.toml
# The pinned toolchain and its wasm32 target, when missing (rustup 1.28
# and later install it only when asked; older ones on first use).
rustup toolchain install >/dev/null 2>&1 || true

version="$(awk '$0 == "name = \"wasm-bindgen\"" { getline; gsub(/^version = "|"$/, ""); print; exit }' "$root/Cargo.lock")"
[ -n "$version" ] || { echo "build.sh: no wasm-bindgen in Cargo.lock" >&2; exit 1; }
if ! command -v wasm-bindgen >/dev/null 2>&1 || [ "$(wasm-bindgen --version | awk '{print $2}')" != "$version" ]; then
  echo "build.sh: installing wasm-bindgen-cli $version" >&2
  # In cargo's own temporary folder, not the project's target directory.
  env -u CARGO_TARGET_DIR cargo install wasm-bindgen-cli --version "$version" --locked
fi

# browser-client is an rlib crate; wasm-bindgen needs a cdylib. `cargo rustc
# --crate-type cdylib` builds it with that crate type without changing
# browser-client/Cargo.toml. The remaps keep the machine's paths (the
# workspace, the target directory, cargo's registry) out of the wasm's panic
# messages.
cargo_home="${CARGO_HOME:-$HOME/.cargo}"
RUSTFLAGS="--remap-path-prefix=$root=/build --remap-path-prefix=$target=/target --remap-path-prefix=$cargo_home=/cargo" \
  cargo rustc --manifest-path "$root/Cargo.toml" -p browser-client --lib --release \
  --target wasm32-unknown-unknown --no-default-features --features wasm --crate-type cdylib --locked
wasm="$target/wasm32-unknown-unknown/release/browser_client.wasm"

rm -rf "$here/pkg" "$here/test/pkg-node"
wasm-bindgen --target web --out-dir "$here/pkg" "$wasm"
wasm-bindgen --target nodejs --out-dir "$here/test/pkg-node" "$wasm"
echo "build.sh: $(du -h "$here/pkg/browser_client_bg.wasm" | cut -f1) wasm in $here/pkg and $here/test/pkg-node" >&2

node "$here/tools/pack.mjs" --out "$xpi_dir"
