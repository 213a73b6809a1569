#!/usr/bin/env node
// Packs the extension into an XPI (a ZIP file) that is the same, byte for
// byte, on every machine: the files named below (nothing else: no tests,
// docs or build files), in sorted order, each with the same fixed date and
// no extra fields, deflated by Node's zlib at level 9.
//
//   node tools/pack.mjs --out DIR
//
// Writes DIR/xpi/ (the packed files, for `web-ext lint`) and
// DIR/private-ct-auditor-<version>.xpi; prints the XPI's path and SHA-256.

import { createHash } from "node:crypto";
import { cpSync, mkdirSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { parseArgs } from "node:util";
import zlib from "node:zlib";

const { values: args } = parseArgs({ options: { out: { type: "string" } } });
if (!args.out) {
  console.error("usage: pack.mjs --out DIR");
  process.exit(2);
}
const src = new URL("..", import.meta.url).pathname.replace(/\/$/, "");
const FILES = [
  "manifest.json",
  "background.js",
  "config.js",
  "schedule.js",
  "pages.css",
  "popup.html",
  "popup.js",
  "options.html",
  "options.js",
  "onboarding.html",
  "onboarding.js",
  "privacy.html",
  "pkg/browser_client.js",
  "pkg/browser_client_bg.wasm",
];
const DIRS = ["icons"];

const names = [...FILES];
for (const d of DIRS) {
  for (const f of readdirSync(join(src, d))) if (statSync(join(src, d, f)).isFile()) names.push(`${d}/${f}`);
}
names.sort();

const staged = join(args.out, "xpi");
rmSync(staged, { recursive: true, force: true });
for (const n of names) {
  mkdirSync(dirname(join(staged, n)), { recursive: true });
  cpSync(join(src, n), join(staged, n));
}

// ZIP (APPNOTE 6.3.x): local headers + data, central directory, end record.
const DOS_TIME = 0; // 00:00:00
const DOS_DATE = (0 << 9) | (1 << 5) | 1; // 1980-01-01
const local = [];
const central = [];
let offset = 0;
for (const n of names) {
  const data = readFileSync(join(src, n));
  const deflated = zlib.deflateRawSync(data, { level: 9 });
  const stored = deflated.length >= data.length;
  const body = stored ? data : deflated;
  const name = Buffer.from(n, "utf8");
  const crc = zlib.crc32(data);
  const head = Buffer.alloc(30);
  head.writeUInt32LE(0x04034b50, 0);
  head.writeUInt16LE(20, 4); // version needed
  head.writeUInt16LE(0x0800, 6); // UTF-8 names
  head.writeUInt16LE(stored ? 0 : 8, 8);
  head.writeUInt16LE(DOS_TIME, 10);
  head.writeUInt16LE(DOS_DATE, 12);
  head.writeUInt32LE(crc, 14);
  head.writeUInt32LE(body.length, 18);
  head.writeUInt32LE(data.length, 22);
  head.writeUInt16LE(name.length, 26);
  head.writeUInt16LE(0, 28);
  local.push(head, name, body);
  const c = Buffer.alloc(46);
  c.writeUInt32LE(0x02014b50, 0);
  c.writeUInt16LE(20, 4); // version made by (MS-DOS, 2.0)
  c.writeUInt16LE(20, 6);
  c.writeUInt16LE(0x0800, 8);
  c.writeUInt16LE(stored ? 0 : 8, 10);
  c.writeUInt16LE(DOS_TIME, 12);
  c.writeUInt16LE(DOS_DATE, 14);
  c.writeUInt32LE(crc, 16);
  c.writeUInt32LE(body.length, 20);
  c.writeUInt32LE(data.length, 24);
  c.writeUInt16LE(name.length, 28);
  c.writeUInt32LE(offset, 42); // disk 0, attributes 0
  central.push(c, name);
  offset += head.length + name.length + body.length;
}
const cd = Buffer.concat(central);
const end = Buffer.alloc(22);
end.writeUInt32LE(0x06054b50, 0);
end.writeUInt16LE(names.length, 8);
end.writeUInt16LE(names.length, 10);
end.writeUInt32LE(cd.length, 12);
end.writeUInt32LE(offset, 16);
const xpi = Buffer.concat([...local, cd, end]);

const version = JSON.parse(readFileSync(join(src, "manifest.json"), "utf8")).version;
const file = join(args.out, `private-ct-auditor-${version}.xpi`);
writeFileSync(file, xpi);
const sha = createHash("sha256").update(xpi).digest("hex");
console.error(`pack.mjs: ${relative(process.cwd(), file) || file}: ${names.length} files, ${xpi.length} bytes, sha256 ${sha}`);
console.log(file);
