#!/usr/bin/env node
// Runs the extension's own background.js (with the --target web wasm
// package in ../pkg) in Node, with an in-memory stand-in for the
// WebExtension APIs it uses, against a real auditor:
//
//   node background.mjs --auditor URL --corpus corpus.jsonl --log-list log_list.json
//
// What is real: background.js, the wasm32 build, fetch to the auditor, the
// auditor. What is simulated: storage (local and session), permissions,
// alarms, badge, messaging, unloading the event page (a fresh instance of
// background.js over the same storage), and the Firefox connection path
// (webRequest.onHeadersReceived + getSecurityInfo returning a chain from
// the corpus; the 1/1000 sampling draw is forced).
// Checks: a certificate added from the options page and sampled
// "connections" are queued; a certificate without embedded SCTs counts
// apart when added by hand and when sampled; an embedded SCT whose
// signature does not verify is counted and named; the connection rule's
// state survives an unload; a network failure names the URL and hints at
// host access; an audit round answers every logged one logged; the popup's
// state (week's audits and bytes, why each item waits, NOT FOUND); omitted
// SCTs not found in two epochs become misbehaviour reports with the badge
// showing their number; a report is sent to the auditor only with the
// popup's consent, and the auditor accepts it (a repeat is a duplicate). Prints a JSON summary; non-zero exit on failure.
// Needs an auditor that publishes a new epoch now and then (demo-server
// --epoch-interval).

import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";
import { parseArgs } from "node:util";

const { values: args } = parseArgs({
  options: {
    auditor: { type: "string" },
    corpus: { type: "string" },
    "log-list": { type: "string" },
    "epoch-timeout": { type: "string", default: "120" },
  },
});
for (const k of ["auditor", "corpus", "log-list"]) {
  if (!args[k]) {
    console.error("usage: background.mjs --auditor URL --corpus FILE --log-list FILE");
    process.exit(2);
  }
}
const corpus = readFileSync(args.corpus, "utf8").split("\n").filter((l) => l.trim()).map((l) => JSON.parse(l));
const failures = [];
const check = (c, what) => (c ? true : (failures.push(what), false));

// ---- fetch: file: URLs (the wasm module, the log list) from disk ----------
const realFetch = globalThis.fetch;
globalThis.fetch = async (input, init) => {
  const url = String(input instanceof Request ? input.url : input);
  if (url.startsWith("file:")) {
    const type = url.endsWith(".wasm") ? "application/wasm" : "application/json";
    return new Response(readFileSync(new URL(url)), { headers: { "content-type": type } });
  }
  return realFetch(input, init);
};

// ---- WebExtension API stand-in ----------------------------------------------
const allEvents = [];
const events = () => {
  const ls = [];
  allEvents.push(ls);
  return { ls, addListener: (fn, ...rest) => ls.push({ fn, rest }) };
};
const data = {};
const sessionData = {};
const permissions = { granted: true };
const clone = (v) => (v === undefined ? undefined : JSON.parse(JSON.stringify(v)));
const onChanged = events();
const badge = { text: "" };
const securityInfo = new Map();
const chrome = {
  storage: {
    local: {
      get: async (keys) => {
        const out = {};
        for (const k of [].concat(keys)) if (k in data) out[k] = clone(data[k]);
        return out;
      },
      set: async (obj) => {
        const changes = {};
        for (const [k, v] of Object.entries(obj)) {
          changes[k] = { oldValue: data[k], newValue: clone(v) };
          data[k] = clone(v);
        }
        for (const { fn } of onChanged.ls) fn(changes, "local");
      },
    },
    session: {
      get: async (keys) => {
        const out = {};
        for (const k of [].concat(keys)) if (k in sessionData) out[k] = clone(sessionData[k]);
        return out;
      },
      set: async (obj) => {
        for (const [k, v] of Object.entries(obj)) sessionData[k] = clone(v);
      },
    },
    onChanged,
  },
  permissions: { contains: async () => permissions.granted },
  alarms: { created: {}, get: async (n) => chrome.alarms.created[n], create(n, o) { this.created[n] = o; }, onAlarm: events() },
  action: {
    setBadgeText: async ({ text }) => void (badge.text = text),
    setBadgeBackgroundColor: async () => {},
    onClicked: events(),
  },
  runtime: {
    getURL: (p) => `moz-extension://00000000-test/${p}`,
    onInstalled: events(),
    onStartup: events(),
    onMessage: events(),
    openOptionsPage: async () => {},
  },
  webRequest: {
    onHeadersReceived: events(),
    getSecurityInfo: async (requestId, opts) => {
      if (!opts?.certificateChain || !opts?.rawDER) throw new Error("harness: chain with rawDER expected");
      return securityInfo.get(requestId) ?? { state: "insecure" };
    },
  },
};
globalThis.chrome = chrome;

function sendMessage(msg) {
  return new Promise((resolve) => {
    const { fn } = chrome.runtime.onMessage.ls[0];
    const async = fn(msg, {}, resolve);
    if (!async) resolve(undefined);
  });
}
async function call(msg) {
  const r = await sendMessage(msg);
  if (!r?.ok) throw new Error(`${msg.type}: ${r?.error}`);
  return r.value;
}

// Calls the blocking onHeadersReceived listener for a request; `sample`
// forces the CSPRNG draw of the sampling decision (only that synchronous
// draw: the wasm's own randomness stays real).
async function request(requestId, url, sample) {
  const { fn, rest } = chrome.webRequest.onHeadersReceived.ls[0];
  check(rest[1]?.includes("blocking"), "onHeadersReceived registered without 'blocking'");
  const real = Object.getOwnPropertyDescriptor(globalThis, "crypto");
  const fill = sample ? 0 : 0xffffffff;
  Object.defineProperty(globalThis, "crypto", { value: { getRandomValues: (a) => a.fill(fill) }, configurable: true });
  let r;
  try {
    r = fn({ requestId, url, tabId: 1, originUrl: "https://example.com/" });
  } finally {
    Object.defineProperty(globalThis, "crypto", real);
  }
  return r === undefined ? "not sampled" : (await r, "sampled");
}

async function until(what, cond, seconds) {
  const end = Date.now() + seconds * 1000;
  while (Date.now() < end) {
    if (await cond()) return true;
    await new Promise((r) => setTimeout(r, 200));
  }
  failures.push(`timed out: ${what}`);
  return false;
}

async function epochNow() {
  const m = await (await realFetch(`${args.auditor}/v1/manifest`)).json();
  return m.epoch;
}

// Loads background.js. Again later: a fresh instance over the same storage,
// as when Firefox unloads the idle event page and wakes it for an event.
let instances = 0;
async function loadBackground() {
  for (const ls of allEvents) ls.length = 0;
  instances++;
  await import(new URL(`../background.js?instance=${instances}`, import.meta.url).href);
  // Its state loads from storage (stand-ins: a few microtasks); until then
  // the request listener defers its decision, which request() below does
  // not expect.
  await new Promise((r) => setTimeout(r, 200));
}

// A copy of a certificate whose embedded SCT's signature is corrupted (last
// byte of the SCT list, inside the signature): still parses, no longer
// verifies under its (known) log's key.
function corruptEmbeddedSct(b64) {
  const der = Buffer.from(b64, "base64");
  const oid = Buffer.from([0x06, 0x0a, 0x2b, 0x06, 0x01, 0x04, 0x01, 0xd6, 0x79, 0x02, 0x04, 0x02]);
  let j = der.indexOf(oid);
  if (j < 0) throw new Error("no SCT list extension");
  j += oid.length;
  if (der[j] === 0x01) j += 3; // critical BOOLEAN
  if (der[j] !== 0x04) throw new Error("extnValue is not an OCTET STRING");
  let len = der[j + 1];
  let head = 2;
  if (len & 0x80) {
    const n = len & 0x7f;
    len = 0;
    for (let k = 0; k < n; k++) len = len * 256 + der[j + 2 + k];
    head += n;
  }
  der[j + head + len - 1] ^= 0x01;
  return der.toString("base64");
}

// ---- the test -----------------------------------------------------------------
const result = {};
try {
  const auditor = args.auditor.replace(/\/+$/, "");
  data.config = { auditorUrl: auditor, logListUrl: pathToFileURL(args["log-list"]).href };
  await loadBackground();
  check(chrome.alarms.created.audit?.periodInMinutes === 60, "no hourly audit alarm");

  const caps = await call({ type: "capabilities" });
  check(caps.readsConnections === true, "getSecurityInfo not detected");

  const embedded = (truth) => corpus.filter((e) => e.truth === truth && !e.tls_sct);
  const [manual, ...viaConnections] = embedded("logged").slice(0, 4);
  const omitted = embedded("omitted").slice(0, 6);

  // Options page: a certificate added by hand.
  const added = await call({ type: "add-certificate", leaf: manual.cert, issuer: manual.issuer });
  check(added.queued === 1 && added.checked[0]?.signature.status === "valid", `add-certificate: ${JSON.stringify(added)}`);
  // By hand, a certificate without embedded SCTs: counted as added, not as sampled.
  const tls = corpus.find((e) => e.truth === "logged" && e.tls_sct);
  const addedTls = await call({ type: "add-certificate", leaf: tls.cert, issuer: tls.issuer });
  check(addedTls.queued === 0 && addedTls.checked.length === 0, `add-certificate (TLS SCT): ${JSON.stringify(addedTls)}`);
  check(data.status?.addedWithoutEmbeddedScts === 1, "hand-added certificate without embedded SCTs not counted");
  check(!data.status?.sampledWithoutEmbeddedScts, "hand-added certificate counted as sampled");

  // Firefox path: sampled connections with their chains.
  const der = (s) => Array.from(Buffer.from(s, "base64"));
  const conn = [...viaConnections, ...omitted];
  let sampled = 0;
  for (const [i, e] of conn.entries()) {
    securityInfo.set(`r${i}`, { state: "secure", certificates: [{ rawDER: der(e.cert) }, { rawDER: der(e.issuer) }] });
    if ((await request(`r${i}`, `https://site${i}.example/`, true)) === "sampled") sampled++;
  }
  check(sampled === conn.length, `${sampled} of ${conn.length} forced samples taken`);
  // A certificate whose SCTs came by TLS: nothing to queue, counted.
  securityInfo.set("rtls", { state: "secure", certificates: [{ rawDER: der(tls.cert) }, { rawDER: der(tls.issuer) }] });
  await request("rtls", "https://tls-sct.example/", true);
  await until("certificate without embedded SCTs counted", async () => data.status?.sampledWithoutEmbeddedScts === 1, 30);
  check(data.status?.addedWithoutEmbeddedScts === 1, "a sampled certificate counted as added by hand");
  // An embedded SCT under the known log whose signature does not verify:
  // not queued, counted, named.
  const bad = embedded("logged")[4];
  securityInfo.set("rbad", {
    state: "secure",
    certificates: [{ rawDER: der(corruptEmbeddedSct(bad.cert)) }, { rawDER: der(bad.issuer) }],
  });
  await request("rbad", "https://bad-sct.example/", true);
  await until("SCT with a bad signature counted", async () => data.status?.sctsBadSignature === 1, 30);
  const lu = data.status?.lastUnauditable;
  check(
    lu?.host === "bad-sct.example" &&
      lu?.source === "sampled" &&
      /^the SCT's signature does not verify with the log's key/.test(lu?.reason ?? "") &&
      !/Invalid\(/.test(lu?.reason ?? ""),
    `last unauditable SCT: ${JSON.stringify(lu)}`,
  );
  // By hand, without the issuer: a certificate with embedded SCTs is told
  // that they need it.
  const noIssuer = await sendMessage({ type: "add-certificate", leaf: bad.cert, issuer: "" });
  check(!noIssuer.ok && /need the issuer certificate/.test(noIssuer.error), `add-certificate without issuer: ${JSON.stringify(noIssuer)}`);
  check(!data.status?.sampleErrors, `sample errors: ${data.status?.lastSampleError}`);
  check((await request("again", "https://site0.example/x", true)) === "not sampled", "same origin within 115 s counted as a new connection");
  check((await request("fresh", "https://other.example/", false)) === "not sampled", "unsampled draw still sampled");
  const ownUrl = chrome.runtime.getURL("");
  check(
    chrome.webRequest.onHeadersReceived.ls[0].fn({ requestId: "own", url: "https://x.example/", originUrl: ownUrl }) === undefined,
    "the extension's own requests are sampled",
  );
  await until("sampled certificates queued", async () => JSON.parse(data.queue ?? '{"items":[]}').items.length === 1 + conn.length, 30);
  check(data.status?.queued === 1 + conn.length, `queued counter ${data.status?.queued}, expected ${1 + conn.length}`);

  // The event page is unloaded and woken again: the origins seen survive in
  // storage.session, so site0 (last request a moment ago) is still the
  // same connection.
  await until("connection state saved to storage.session", async () => "https://site0.example" in (sessionData.seen ?? {}), 10);
  await until("counters flushed", async () => data.status?.connections === conn.length + 3, 10);
  const connectionsBefore = data.status.connections;
  const startsBefore = data.status.backgroundStarts;
  await loadBackground();
  check((await request("after-unload", "https://site0.example/y", true)) === "not sampled", "an unload forgot the origins seen");
  check((await request("new-after-unload", "https://fresh.example/", false)) === "not sampled", "unsampled draw sampled");
  await until("counters flushed after the unload", async () => data.status?.connections === connectionsBefore + 1, 10);
  check(data.status.backgroundStarts === startsBefore + 1, `background starts ${data.status.backgroundStarts}`);

  // A network failure names the URL, and hints at host access when it is
  // missing.
  data.config = { ...data.config, auditorUrl: "http://127.0.0.1:9" };
  permissions.granted = false;
  const noAccess = await sendMessage({ type: "run-audits" });
  check(
    !noAccess.ok && noAccess.error.includes("http://127.0.0.1:9/v1/manifest") && noAccess.error.includes("no host access"),
    `network error without host access: ${noAccess.error}`,
  );
  check(data.status?.lastError === noAccess.error, "lastError differs from the message");
  permissions.granted = true;
  const down = await sendMessage({ type: "run-audits" });
  check(
    !down.ok && down.error.includes("http://127.0.0.1:9/v1/manifest") && down.error.includes("server runs"),
    `network error with host access: ${down.error}`,
  );
  data.config = { ...data.config, auditorUrl: auditor };
  const { queueStatus } = await import(new URL("../pkg/browser_client.js", import.meta.url).href);

  // Hourly alarm → audit round (called through the alarm listener like the browser does).
  delete data.status.lastRun; // left by the failed rounds above
  chrome.alarms.onAlarm.ls[0].fn({ name: "audit" });
  if (!(await until("first audit round", async () => data.status?.lastRun !== undefined, 60))) throw new Error("no audit round");
  const run1 = data.status.lastRun;
  const epoch1 = data.status.lastEpoch; // the epoch that round used
  check(!data.status.lastError, `first round error: ${data.status.lastError}`);
  check(run1.audited === 1 + conn.length, `first round audited ${run1.audited} of ${1 + conn.length}`);
  check(run1.logged >= 1 + viaConnections.length, `only ${run1.logged} logged in the first round`);
  check(run1.reports === 0 && badge.text === "", "a report in the first epoch");

  // The popup: this week's audits and bytes, why each pending item waits,
  // the NOT FOUND answers, auditor and epoch.
  const popup = await call({ type: "popup-state" });
  check(popup.auditor === auditor && popup.epoch === epoch1, `popup auditor/epoch: ${popup.auditor} ${popup.epoch}`);
  check(popup.week.audits === run1.audited, `popup: ${popup.week.audits} audits this week, expected ${run1.audited}`);
  check(popup.week.bytes > run1.audited * 100000, `popup: ${popup.week.bytes} bytes for ${run1.audited} audits`);
  check(
    popup.queue.length === run1.notFound && popup.queue.every((i) => i.state === "later_epoch" && i.not_found_in === epoch1),
    `popup queue: ${JSON.stringify(popup.queue.map((i) => i.state))}`,
  );
  check(
    popup.notFound.length === run1.notFound && popup.notFound.every((a) => /^site\d+\.example$/.test(a.host ?? "")),
    `popup NOT FOUND: ${JSON.stringify(popup.notFound.map((a) => a.host))}`,
  );
  check(popup.unauditable.badSignature === 1, "popup: the bad SCT signature is not shown");
  // The other reasons, from the queue's own JSON: an SCT younger than the
  // MMD, and one from a log the auditor does not track.
  const manifestBytes = new TextEncoder().encode(data.manifest.text);
  const q = JSON.parse(data.queue);
  const young = { ...q.items[0], not_found_in: null, sct_timestamp_ms: Date.now(), mmd_s: 3600 };
  const untracked = { ...q.items[0], not_found_in: null, log_id: Buffer.alloc(32, 7).toString("base64") };
  const names = JSON.stringify({ [untracked.log_id]: "Untracked Log 2026" });
  const states = JSON.parse(queueStatus(JSON.stringify({ items: [young, untracked] }), manifestBytes, Date.now(), names));
  check(states[0]?.state === "mmd" && states[0]?.due_ms === young.sct_timestamp_ms + 3600000, `queueStatus (MMD): ${JSON.stringify(states[0])}`);
  check(/maximum merge delay/.test(states[0]?.message ?? ""), `queueStatus (MMD) message: ${JSON.stringify(states[0])}`);
  check(
    states[1]?.state === "log_not_tracked" &&
      states[1]?.message?.includes(`this auditor does not track log "Untracked Log 2026" (${untracked.log_id})`),
    `queueStatus (untracked log): ${JSON.stringify(states[1])}`,
  );
  // LOGGED is shown with the epoch's measured fill ratio, NOT FOUND as certain.
  const c = popup.confidence;
  check(c?.epoch === epoch1 && c.measured === true && c.fillRatio > 0 && c.fillRatio < 0.5, `popup confidence: ${JSON.stringify(c)}`);
  check(
    popup.queue.every((i) => /^pending: NOT FOUND in epoch \d+; re-checked in a later epoch/.test(i.message ?? "")),
    `popup queue messages: ${JSON.stringify(popup.queue.map((i) => i.message))}`,
  );
  for (const a of data.audits ?? []) {
    const want = a.logged
      ? `LOGGED in epoch ${a.epoch}, probably: one audit is probabilistic, and an SCT that was never logged also passes it with probability ${c?.fillRatio.toFixed(3)} (this epoch's measured fill ratio)`
      : `NOT FOUND in epoch ${a.epoch}: certain for this epoch`;
    check(a.message?.startsWith(want) && a.fillRatioMeasured === true, `audit message: ${a.message}`);
  }
  const perf = data.status.perf;
  check(perf?.audits === run1.audited && perf.up > 0 && perf.down > 0, `perf: ${JSON.stringify(perf)}`);

  // Next epoch: re-checks → reports, badge.
  await until("a later epoch", async () => (await epochNow()) > epoch1, Number(args["epoch-timeout"]));
  const run2 = await call({ type: "run-audits" });
  const reports = data.reports ?? [];
  check(run2.audited === run1.notFound, `second round audited ${run2.audited}, expected the ${run1.notFound} re-checks`);
  check(run2.reports === run2.notFound && reports.length === run2.reports, "re-check NotFound without a report");
  check(badge.text === (reports.length ? String(reports.length) : ""), `badge "${badge.text}" for ${reports.length} reports`);
  const omittedCerts = new Set(omitted.map((e) => e.cert));
  check(reports.every((r) => omittedCerts.has(r.chain[0])), "a report names a certificate that was logged");
  check(JSON.parse(data.queue).items.length === 0, "items left in the queue");
  const reported = (data.audits ?? []).filter((a) => a.report);
  check(
    reported.length === reports.length && reported.every((a) => /^NOT FOUND in epochs \d+ and \d+: certain; .*misbehaviour report/.test(a.message ?? "")),
    `report messages: ${JSON.stringify(reported.map((a) => a.message))}`,
  );
  const popup2 = await call({ type: "popup-state" });
  check(popup2.reports.length === reports.length && popup2.queue.length === 0, "popup: reports or queue wrong after the re-check");
  // Reports leave only with the user's consent (the popup's button).
  check(data.reportsSent === undefined, "a report was sent without the user asking");
  if (reports.length) {
    const leaf = reports[0].leaf_hash;
    const refused = await sendMessage({ type: "send-report", leaf_hash: leaf });
    check(refused?.ok === false && data.reportsSent === undefined, "send-report without consent was not refused");
    const sent = await call({ type: "send-report", leaf_hash: leaf, consent: true });
    check(sent.result === "received", `send-report: ${JSON.stringify(sent)}`);
    const again = await call({ type: "send-report", leaf_hash: leaf, consent: true });
    check(again.result === "already reported", `send-report again: ${JSON.stringify(again)}`);
    const popup3 = await call({ type: "popup-state" });
    const shown = popup3.reports.find((r) => r.leaf_hash === leaf);
    check(shown?.sent?.result === "already reported", `popup: sent report ${JSON.stringify(shown)}`);
    check(popup3.reports.filter((r) => r.sent).length === 1, "popup: a report shown sent that was not");
    result.report_sent = sent;
  }
  Object.assign(result, {
    epochs: [epoch1, data.status.lastEpoch],
    queued: { by_hand: added.queued, via_connections: conn.length },
    status: data.status,
    first_round: run1,
    second_round: run2,
  });
} catch (e) {
  failures.push(`exception: ${e?.stack ?? e}`);
}

const summary = {
  ok: failures.length === 0,
  harness: "background.js in Node with stand-in WebExtension APIs; real wasm (--target web) and auditor",
  ...result,
  badge: badge.text,
  failures,
};
console.log(JSON.stringify(summary, null, 2));
process.exit(summary.ok ? 0 : 1);
