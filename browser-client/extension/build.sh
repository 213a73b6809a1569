#!/usr/bin/env bash
# Builds the wasm package of browser-client for the extension:
#   pkg/             wasm-bindgen --target web   (loaded by background.js)
#   test/pkg-node/   wasm-bindgen --target nodejs (used by test/e2e.mjs)
# Installs wasm-bindgen-cli at the exact version of the wasm-bindgen crate
# in Cargo.lock when it is missing (a few minutes).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$root"

version="$(awk '$0 == "name = \"wasm-bindgen\"" { getline; gsub(/^version = "|"$/, ""); print; exit }' Cargo.lock)"
[ -n "$version" ] || { echo "build.sh: no wasm-bindgen in Cargo.lock" >&2; exit 1; }
if ! command -v wasm-bindgen >/dev/null 2>&1 || [ "$(wasm-bindgen --version | awk '{print $2}')" != "$version" ]; then
  echo "build.sh: installing wasm-bindgen-cli $version" >&2
  # --locked first; if a pinned dependency of the CLI was yanked since its
  # release, crates.io cannot resolve the lock file any more: resolve afresh.
  cargo install wasm-bindgen-cli --version "$version" --locked \
    || cargo install wasm-bindgen-cli --version "$version"
fi
rustup target add wasm32-unknown-unknown >/dev/null 2>&1 || true

# browser-client is an rlib crate; wasm-bindgen needs a cdylib. `cargo rustc
# --crate-type cdylib` is `cargo build -p browser-client --release --target
# wasm32-unknown-unknown --no-default-features --features wasm` with that
# crate type, without changing browser-client/Cargo.toml.
cargo rustc -p browser-client --lib --release --target wasm32-unknown-unknown \
  --no-default-features --features wasm --crate-type cdylib
wasm="${CARGO_TARGET_DIR:-$root/target}/wasm32-unknown-unknown/release/browser_client.wasm"

rm -rf "$here/pkg" "$here/test/pkg-node"
wasm-bindgen --target web --out-dir "$here/pkg" "$wasm"
wasm-bindgen --target nodejs --out-dir "$here/test/pkg-node" "$wasm"
echo "build.sh: $(du -h "$here/pkg/browser_client_bg.wasm" | cut -f1) wasm in $here/pkg and $here/test/pkg-node" >&2
