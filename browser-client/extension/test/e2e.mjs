#!/usr/bin/env node
// End-to-end check of the wasm32 build of browser-client (the code the
// extension runs) against a real auditor-server, through the same exports
// and in the same order as background.js: inspect → queueAdd → GET manifest
// → queueReady → Prober.prepare → POST → Query.decode → queueRecord.
//
//   node e2e.mjs --auditor URL --corpus corpus.jsonl --log-list log_list.json
//                [--n 20] [--omitted 12] [--recheck-timeout 120] [--pkg DIR]
//
// Corpus: JSON lines {cert, issuer, tls_sct?, truth} as written by
// audit-demo's demo-server (browser-client sim::CorpusEntry). Checks:
//   * logged certificates (half with embedded SCTs, audited through the
//     pending queue; half with TLS-delivered SCTs, audited directly with
//     Prober since queueAdd takes only embedded SCTs) all answer bit 1;
//   * forged SCTs fail signature verification at inspect (never audited);
//   * omitted SCTs (issued, never logged) are audited through the queue: a
//     0 keeps them for a re-check that waits for a later epoch, and a
//     second 0 there yields a misbehaviour report (only if the auditor
//     publishes a new epoch within --recheck-timeout seconds; 0 skips);
//     no report ever names a logged certificate.
// Prints one JSON summary on stdout; exits non-zero on any failure.

import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { performance } from "node:perf_hooks";
import { parseArgs } from "node:util";

const { values: args } = parseArgs({
  options: {
    auditor: { type: "string" },
    corpus: { type: "string" },
    "log-list": { type: "string" },
    n: { type: "string", default: "20" },
    omitted: { type: "string", default: "12" },
    "recheck-timeout": { type: "string", default: "120" },
    pkg: { type: "string", default: new URL("./pkg-node/", import.meta.url).pathname },
  },
});
for (const k of ["auditor", "corpus", "log-list"]) {
  if (!args[k]) {
    console.error(`usage: e2e.mjs --auditor URL --corpus FILE --log-list FILE [--n N] [--omitted M] [--recheck-timeout S]`);
    process.exit(2);
  }
}

const require = createRequire(import.meta.url);
const wasm = require(`${args.pkg.replace(/\/$/, "")}/browser_client.js`);
const { inspect, queueAdd, queueReady, queueRecord, Prober } = wasm;

const auditor = args.auditor.replace(/\/+$/, "");
const nLogged = Number(args.n);
const nOmitted = Number(args.omitted);
const recheckTimeoutS = Number(args["recheck-timeout"]);
const logList = readFileSync(args["log-list"]);
const corpus = readFileSync(args.corpus, "utf8")
  .split("\n")
  .filter((l) => l.trim())
  .map((l) => JSON.parse(l));
const b64 = (s) => new Uint8Array(Buffer.from(s, "base64"));

const failures = [];
function check(cond, what) {
  if (!cond) failures.push(what);
  return cond;
}

const stats = {
  prepare_ms: [],
  roundtrip_ms: [],
  decode_ms: [],
  upload_bytes: 0,
  download_bytes: 0,
  queries: 0,
};
const mean = (xs) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : null);

async function getManifest() {
  const resp = await fetch(`${auditor}/v1/manifest`, { cache: "no-cache" });
  if (!resp.ok) throw new Error(`GET /v1/manifest: HTTP ${resp.status}`);
  return new Uint8Array(await resp.arrayBuffer());
}

// One private probe: prepare (random filter, YPIR query), POST, decode.
async function probe(prober, leafHashHex) {
  let t = performance.now();
  const q = prober.prepare(leafHashHex);
  stats.prepare_ms.push(performance.now() - t);
  try {
    const body = q.body();
    t = performance.now();
    const resp = await fetch(auditor + q.path(), {
      method: "POST",
      headers: { "content-type": "application/octet-stream" },
      body,
    });
    const bytes = new Uint8Array(await resp.arrayBuffer());
    stats.roundtrip_ms.push(performance.now() - t);
    if (!resp.ok) throw new Error(`POST ${q.path()}: HTTP ${resp.status} ${new TextDecoder().decode(bytes)}`);
    stats.queries++;
    stats.upload_bytes += body.length;
    stats.download_bytes += bytes.length;
    t = performance.now();
    const logged = q.decode(bytes);
    stats.decode_ms.push(performance.now() - t);
    return { logged, epoch: q.epoch(), filter: q.filter() };
  } finally {
    q.free();
  }
}

// Audits every ready item of the queue (last index first), as background.js does.
async function auditReady(queue, manifest, truthByLeaf, tally) {
  const prober = new Prober(manifest);
  try {
    const ready = JSON.parse(queueReady(queue, manifest, Date.now()));
    tally.ready.push(ready.length);
    for (const i of [...ready].reverse()) {
      const item = JSON.parse(queue).items[i];
      const truth = truthByLeaf.get(item.leaf_hash);
      const r = await probe(prober, item.leaf_hash);
      const out = JSON.parse(queueRecord(queue, i, r.logged, r.epoch, r.filter, auditor, Date.now()));
      queue = out.queue;
      const key = item.not_found_in == null ? "first" : "recheck";
      tally[truth][key][r.logged ? "logged" : "not_found"]++;
      if (truth === "logged") check(r.logged, `logged embedded SCT ${item.leaf_hash} answered not found (epoch ${r.epoch}, filter ${r.filter})`);
      if (out.report) {
        tally.reports.push(out.report);
        check(truth === "omitted", `misbehaviour report for a ${truth} certificate ${item.leaf_hash}`);
        check(out.report.leaf_hash === item.leaf_hash && out.report.not_found_in_epochs.length === 2, "malformed report");
      }
    }
  } finally {
    prober.free();
  }
  return queue;
}

const t0 = performance.now();
const embeddedLogged = corpus.filter((e) => e.truth === "logged" && !e.tls_sct).slice(0, Math.ceil(nLogged / 2));
const tlsLogged = corpus.filter((e) => e.truth === "logged" && e.tls_sct).slice(0, Math.floor(nLogged / 2));
const omitted = corpus.filter((e) => e.truth === "omitted" && !e.tls_sct).slice(0, nOmitted);
const forged = corpus.filter((e) => e.truth === "forged");
check(embeddedLogged.length + tlsLogged.length === nLogged, `corpus has fewer than ${nLogged} logged certificates`);

// 1. inspect every selected certificate; queue the embedded SCTs.
let queue = "";
const truthByLeaf = new Map();
const forgedResult = { inspected: 0, rejected: 0, accepted: 0 };
for (const e of forged) {
  forgedResult.inspected++;
  let scts;
  try {
    scts = JSON.parse(inspect(b64(e.cert), b64(e.issuer), logList, b64(e.tls_sct)));
  } catch (_) {
    scts = []; // not even parseable: rejected as well
  }
  if (scts.every((s) => s.signature.status !== "valid")) forgedResult.rejected++;
  else {
    forgedResult.accepted++;
    failures.push(`forged SCT accepted by inspect: ${scts[0]?.leaf_hash}`);
  }
  for (const s of scts.filter((s) => s.signature.status === "invalid")) {
    check(/^the SCT's signature does not verify with the log's key \(.+\)/.test(s.signature.message ?? ""),
      `forged SCT: no message for people: ${JSON.stringify(s.signature)}`);
  }
}
for (const [list, truth] of [
  [embeddedLogged, "logged"],
  [omitted, "omitted"],
]) {
  for (const e of list) {
    const cert = b64(e.cert);
    const issuer = b64(e.issuer);
    const scts = JSON.parse(inspect(cert, issuer, logList, undefined));
    check(scts.length > 0 && scts.every((s) => s.signature.status === "valid" && s.kind === "precert"),
      `${truth} certificate: embedded SCTs do not all verify: ${JSON.stringify(scts.map((s) => s.signature))}`);
    const before = queue ? JSON.parse(queue).items.length : 0;
    queue = queueAdd(queue, cert, issuer, logList, Date.now(), 0xffffffff);
    const items = JSON.parse(queue).items;
    check(items.length === before + scts.length, `queueAdd queued ${items.length - before} of ${scts.length} SCTs`);
    for (const s of scts) {
      check(items.some((p) => p.leaf_hash === s.leaf_hash && p.log_id === s.log_id), "queued leaf hash differs from inspect's");
      truthByLeaf.set(s.leaf_hash, truth);
    }
  }
}
const tlsLeaves = [];
for (const e of tlsLogged) {
  const scts = JSON.parse(inspect(b64(e.cert), new Uint8Array(), logList, b64(e.tls_sct)));
  if (check(scts.length === 1 && scts[0].signature.status === "valid" && scts[0].kind === "x509",
    `TLS-delivered SCT does not verify: ${JSON.stringify(scts)}`)) tlsLeaves.push(scts[0].leaf_hash);
}
const queued = JSON.parse(queue || '{"items":[]}').items.length;

// 2. The manifest; nothing is ready before the MMD has passed.
let manifest = await getManifest();
const firstEpoch = new Prober(manifest);
const epoch1 = firstEpoch.epoch();
// The auditor states the epoch's fill ratio (measured when it built the
// epoch; the canaries check it); the verdicts say what
// LOGGED and NOT FOUND mean with it.
const fillRatio = firstEpoch.fillRatio();
check(firstEpoch.fillRatioMeasured() && fillRatio > 0 && fillRatio < 0.5, `fill ratio ${fillRatio} (measured: ${firstEpoch.fillRatioMeasured()})`);
const loggedText = firstEpoch.verdict(true, []);
check(loggedText.startsWith(`LOGGED in epoch ${epoch1}, probably`) && loggedText.includes(`probability ${fillRatio.toFixed(3)} (the fill ratio the auditor states for this epoch)`),
  `LOGGED verdict: ${loggedText}`);
check(firstEpoch.verdict(false, []).startsWith(`NOT FOUND in epoch ${epoch1}: certain`), "NOT FOUND verdict");
check(firstEpoch.verdict(false, [epoch1, epoch1 + 1]).includes("misbehaviour report"), "report verdict");
firstEpoch.free();
// A certificate with embedded SCTs but no issuer is told that it needs the
// issuer; one without embedded SCTs needs none.
try {
  inspect(b64(embeddedLogged[0].cert), new Uint8Array(), logList, undefined);
  failures.push("inspect without the issuer of embedded SCTs succeeded");
} catch (e) {
  check(/need the issuer certificate/.test(String(e?.message ?? e)), `inspect without issuer: ${e}`);
}
if (tlsLogged.length) {
  check(JSON.parse(inspect(b64(tlsLogged[0].cert), new Uint8Array(), logList, undefined)).length === 0,
    "a certificate without embedded SCTs was asked for its issuer");
}
check(JSON.parse(queueReady(queue, manifest, 0)).length === 0, "queueReady ignored the MMD wait");

// 3. Audit through the queue (embedded: logged and omitted).
const tally = {
  ready: [],
  reports: [],
  logged: { first: { logged: 0, not_found: 0 }, recheck: { logged: 0, not_found: 0 } },
  omitted: { first: { logged: 0, not_found: 0 }, recheck: { logged: 0, not_found: 0 } },
};
queue = await auditReady(queue, manifest, truthByLeaf, tally);
check(tally.ready[0] === queued, `only ${tally.ready[0]} of ${queued} queued audits were ready`);
const waiting = JSON.parse(queue).items;
check(waiting.every((p) => truthByLeaf.get(p.leaf_hash) === "omitted" && p.not_found_in != null),
  "after the first round the queue holds something other than omitted SCTs awaiting a re-check");
check(JSON.parse(queueReady(queue, manifest, Date.now())).length === 0, "a re-check was ready in the same epoch");

// 4. TLS-delivered logged SCTs: probed directly (no queueAdd for them).
const tlsResult = { audited: 0, logged: 0 };
{
  const prober = new Prober(manifest);
  try {
    for (const leaf of tlsLeaves) {
      const r = await probe(prober, leaf);
      tlsResult.audited++;
      if (check(r.logged, `logged TLS-delivered SCT ${leaf} answered not found (epoch ${r.epoch})`)) tlsResult.logged++;
    }
  } finally {
    prober.free();
  }
}

// 5. Re-check the NotFound ones in a later epoch → misbehaviour reports.
let epoch2 = null;
let recheck = "skipped";
if (waiting.length > 0 && recheckTimeoutS > 0) {
  const deadline = Date.now() + recheckTimeoutS * 1000;
  recheck = "timed out waiting for a later epoch";
  while (Date.now() < deadline) {
    const m = await getManifest();
    const p = new Prober(m);
    const e = p.epoch();
    p.free();
    if (e > epoch1) {
      manifest = m;
      epoch2 = e;
      break;
    }
    await new Promise((r) => setTimeout(r, 1000));
  }
  if (epoch2 !== null) {
    recheck = "done";
    queue = await auditReady(queue, manifest, truthByLeaf, tally);
    check(tally.ready[1] === waiting.length, `only ${tally.ready[1]} of ${waiting.length} re-checks were ready in epoch ${epoch2}`);
    check(JSON.parse(queue).items.length === 0, "items left in the queue after the re-check");
    // 12 omitted SCTs at fill ≈ 0.1: P(no report) ≈ 0.21^12 ≈ 1e-8.
    if (omitted.length >= 10) check(tally.reports.length > 0, "no misbehaviour report for omitted SCTs");
  } else {
    failures.push(`no epoch after ${epoch1} within ${recheckTimeoutS} s`);
  }
}

const loggedEmbeddedAudited = tally.logged.first.logged + tally.logged.first.not_found;
const summary = {
  ok: failures.length === 0,
  client: "browser-client wasm32 (wasm-bindgen --target nodejs)",
  auditor,
  epochs: epoch2 === null ? [epoch1] : [epoch1, epoch2],
  logged_embedded: { audited: loggedEmbeddedAudited, logged: tally.logged.first.logged, via: "queueAdd/queueReady/queueRecord" },
  logged_tls: { ...tlsResult, via: "inspect + Prober" },
  forged: forgedResult,
  omitted: {
    queued: omitted.length,
    first_not_found: tally.omitted.first.not_found,
    first_false_positive: tally.omitted.first.logged,
    recheck,
    recheck_not_found: tally.omitted.recheck.not_found,
    recheck_false_positive: tally.omitted.recheck.logged,
    misbehaviour_reports: tally.reports.length,
  },
  per_query: {
    queries: stats.queries,
    upload_bytes: stats.queries ? stats.upload_bytes / stats.queries : null,
    download_bytes: stats.queries ? stats.download_bytes / stats.queries : null,
    prepare_ms: mean(stats.prepare_ms),
    roundtrip_ms: mean(stats.roundtrip_ms),
    decode_ms: mean(stats.decode_ms),
  },
  seconds: (performance.now() - t0) / 1000,
  failures,
};
console.log(JSON.stringify(summary, null, 2));
process.exit(summary.ok ? 0 : 1);
