#!/usr/bin/env node
// Runs the extension's own background.js (with the --target web wasm
// package in ../pkg) in Node, with an in-memory stand-in for the
// WebExtension APIs it uses, against a real auditor:
//
//   node background.mjs --auditor URL --corpus corpus.jsonl --log-list log_list.json
//
// What is real: background.js, the wasm32 build, fetch to the auditor, the
// auditor. What is simulated: storage, alarms, badge, messaging, and the
// Firefox connection path (webRequest.onHeadersReceived + getSecurityInfo
// returning a chain from the corpus; the 1/1000 sampling draw is forced).
// Checks: a certificate added from the options page and sampled
// "connections" are queued; an audit round answers every logged one
// logged; omitted SCTs not found in two epochs become misbehaviour reports
// with the badge showing their number. Prints a JSON summary; non-zero exit
// on failure. Needs an auditor that publishes a new epoch now and then
// (demo-server --epoch-interval).

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
const events = () => {
  const ls = [];
  return { ls, addListener: (fn, ...rest) => ls.push({ fn, rest }) };
};
const data = {};
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
    onChanged,
  },
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

// ---- the test -----------------------------------------------------------------
const result = {};
try {
  const auditor = args.auditor.replace(/\/+$/, "");
  data.config = { auditorUrl: auditor, logListUrl: pathToFileURL(args["log-list"]).href };
  await import(new URL("../background.js", import.meta.url).href);
  check(chrome.alarms.created.audit?.periodInMinutes === 60, "no hourly audit alarm");

  const caps = await call({ type: "capabilities" });
  check(caps.readsConnections === true, "getSecurityInfo not detected");

  const embedded = (truth) => corpus.filter((e) => e.truth === truth && !e.tls_sct);
  const [manual, ...viaConnections] = embedded("logged").slice(0, 4);
  const omitted = embedded("omitted").slice(0, 6);

  // Options page: a certificate added by hand.
  const added = await call({ type: "add-certificate", leaf: manual.cert, issuer: manual.issuer });
  check(added.queued === 1 && added.checked[0]?.signature.status === "valid", `add-certificate: ${JSON.stringify(added)}`);

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
  const tls = corpus.find((e) => e.truth === "logged" && e.tls_sct);
  securityInfo.set("rtls", { state: "secure", certificates: [{ rawDER: der(tls.cert) }, { rawDER: der(tls.issuer) }] });
  await request("rtls", "https://tls-sct.example/", true);
  await until("certificate without embedded SCTs counted", async () => data.status?.sampledWithoutEmbeddedScts === 1, 30);
  check(!data.status?.sampleErrors, `sample errors: ${data.status?.lastSampleError}`);
  check((await request("again", "https://site0.example/x", true)) === "not sampled", "same origin within 115 s counted as a new connection");
  check((await request("fresh", "https://other.example/", false)) === "not sampled", "unsampled draw still sampled");
  const ownUrl = chrome.runtime.getURL("");
  check(
    chrome.webRequest.onHeadersReceived.ls[0].fn({ requestId: "own", url: "https://x.example/", originUrl: ownUrl }) === undefined,
    "the extension's own requests are sampled",
  );
  await until("sampled certificates queued", async () => JSON.parse(data.queue ?? '{"items":[]}').items.length === 1 + conn.length, 30);

  // Hourly alarm → audit round (called through the alarm listener like the browser does).
  chrome.alarms.onAlarm.ls[0].fn({ name: "audit" });
  if (!(await until("first audit round", async () => data.status?.lastRun !== undefined, 60))) throw new Error("no audit round");
  const run1 = data.status.lastRun;
  const epoch1 = data.status.lastEpoch; // the epoch that round used
  check(!data.status.lastError, `first round error: ${data.status.lastError}`);
  check(run1.audited === 1 + conn.length, `first round audited ${run1.audited} of ${1 + conn.length}`);
  check(run1.logged >= 1 + viaConnections.length, `only ${run1.logged} logged in the first round`);
  check(run1.reports === 0 && badge.text === "", "a report in the first epoch");

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
  Object.assign(result, {
    epochs: [epoch1, data.status.lastEpoch],
    queued: { by_hand: added.queued, via_connections: conn.length },
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
