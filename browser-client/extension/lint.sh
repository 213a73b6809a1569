#!/usr/bin/env bash
# Lints the packed extension (build.sh's $XPI_DIR/xpi/) with Mozilla's
# `web-ext lint`, as AMO does, failing on any error or warning. web-ext is
# installed from npm at the pinned version into WEB_EXT_HOME (default
# ~/.cache/ct-auditor-web-ext) when missing.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
WEB_EXT_VERSION=10.7.0
home="${WEB_EXT_HOME:-$HOME/.cache/ct-auditor-web-ext}"
xpi_dir="${XPI_DIR:-${CARGO_TARGET_DIR:-$root/target}/extension}"
bin="$home/node_modules/.bin/web-ext"
if [ ! -x "$bin" ] || [ "$("$bin" --version)" != "$WEB_EXT_VERSION" ]; then
  mkdir -p "$home"
  npm install --no-audit --no-fund --prefix "$home" "web-ext@$WEB_EXT_VERSION" >&2
fi
[ -f "$xpi_dir/xpi/manifest.json" ] || { echo "lint.sh: no packed extension in $xpi_dir/xpi (run build.sh)" >&2; exit 1; }
"$bin" lint --source-dir "$xpi_dir/xpi" --warnings-as-errors --output text
