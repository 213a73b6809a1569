#!/usr/bin/env node
// Runs the extension's own background.js (with the --target web wasm
// package in ../pkg) in Node, with an in-memory stand-in for the
// WebExtension APIs it uses, against a real auditor and against fake ones:
//
//   node background.mjs --auditor URL --corpus corpus.jsonl --log-list log_list.json
//                       --fake-auditor BIN [--epoch-timeout S]
//
// What is real: background.js, the wasm32 build, fetch to the auditors, the
// auditors (demo-server's, and browser-client's fake_auditor example, which
// answers real YPIR queries over databases of all ones, all zeros or another
// fill than it states). What is simulated: storage, permissions, alarms,
// badge, tabs, messaging, unloading the event page (a fresh instance of
// background.js over the same storage), and the Firefox connection path
// (webRequest.onHeadersReceived + getSecurityInfo returning a chain from
// the corpus; the 1/1000 sampling draw is forced).
//
// Checks, in order:
//  * before consent: nothing is sampled, stored or fetched, no round runs;
//    private windows are never sampled;
//  * timing: the random delay from the visit and the gap between rounds
//    (distributions measured over many draws and over the stored schedule
//    and alarms), every round exactly ROUND_SIZE queries whatever is due;
//  * the audit flow against the real auditor: certificates queued by hand
//    and from connections, counted apart, bad signatures named, the
//    connection rule across an unload, network errors named; rounds audit
//    at most ROUND_SIZE - MIN_CANARIES due SCTs each and fill the rest with
//    canaries; NOT FOUND → re-check in a later epoch → report; the words
//    ("no audits yet", "Reported" only once sent, "the log or the
//    auditor"); the "this site" view; a report leaves only at the click;
//  * against fake auditors: a change of auditor starts clean; all ones, all
//    zeros and a wrong fill are flagged within the stated number of rounds
//    (badge "!"), an honest fake is not; a failed query does not end the
//    round; a short Retry-After is waited for, a long one ends the round and
//    holds the next; queue entries expire; a stall shows on the badge.
// Prints a JSON summary; non-zero exit on failure.

import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { pathToFileURL } from "node:url";
import { parseArgs } from "node:util";

const { values: args } = parseArgs({
  options: {
    auditor: { type: "string" },
    corpus: { type: "string" },
    "log-list": { type: "string" },
    "fake-auditor": { type: "string" },
    "epoch-timeout": { type: "string", default: "120" },
  },
});
for (const k of ["auditor", "corpus", "log-list", "fake-auditor"]) {
  if (!args[k]) {
    console.error("usage: background.mjs --auditor URL --corpus FILE --log-list FILE --fake-auditor BIN");
    process.exit(2);
  }
}
const corpus = readFileSync(args.corpus, "utf8").split("\n").filter((l) => l.trim()).map((l) => JSON.parse(l));
const failures = [];
const check = (c, what) => (c ? true : (failures.push(what), false));
const t0 = Date.now();
const log = (...a) => console.error(`background.mjs [${((Date.now() - t0) / 1000).toFixed(1)} s]:`, ...a);

// ---- fetch: file: URLs (the wasm module, the log list) from disk; every
// other request is recorded ----------------------------------------------------
const realFetch = globalThis.fetch;
const requests = [];
globalThis.fetch = async (input, init) => {
  const url = String(input instanceof Request ? input.url : input);
  if (url.startsWith("file:")) {
    const type = url.endsWith(".wasm") ? "application/wasm" : "application/json";
    return new Response(readFileSync(new URL(url)), { headers: { "content-type": type } });
  }
  requests.push({ url, method: init?.method ?? "GET", at: Date.now() });
  return realFetch(input, init);
};
const queriesSince = (n) => requests.slice(n).filter((r) => r.method === "POST" && /\/query$/.test(r.url));

// ---- WebExtension API stand-in ----------------------------------------------
const allEvents = [];
const events = () => {
  const ls = [];
  allEvents.push(ls);
  return { ls, addListener: (fn, ...rest) => ls.push({ fn, rest }) };
};
const data = {};
const sessionData = {};
const permissions = { granted: true, dataCollection: true };
const clone = (v) => (v === undefined ? undefined : JSON.parse(JSON.stringify(v)));
const onChanged = events();
const badge = { text: "", title: "" };
const securityInfo = new Map();
const tabsCreated = [];
const chrome = {
  storage: {
    local: {
      get: async (keys) => {
        const out = {};
        const list = keys === null || keys === undefined ? Object.keys(data) : [].concat(keys);
        for (const k of list) if (k in data) out[k] = clone(data[k]);
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
      remove: async (keys) => {
        for (const k of [].concat(keys)) delete data[k];
      },
      clear: async () => {
        for (const k of Object.keys(data)) delete data[k];
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
  permissions: {
    contains: async (p) => (p?.data_collection ? permissions.dataCollection : permissions.granted),
    request: async () => true,
  },
  alarms: {
    created: {},
    get: async (n) => chrome.alarms.created[n],
    create(n, o) {
      this.created[n] = { ...o, createdAt: Date.now() };
    },
    clear: async (n) => delete chrome.alarms.created[n],
    onAlarm: events(),
  },
  action: {
    setBadgeText: async ({ text }) => void (badge.text = text),
    setBadgeBackgroundColor: async () => {},
    setTitle: async ({ title }) => void (badge.title = title),
  },
  tabs: {
    create: async (o) => void tabsCreated.push(o.url),
    onRemoved: events(),
    query: async () => [],
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
const setConfig = (patch) => chrome.storage.local.set({ config: { ...(data.config ?? {}), ...patch } });

// Calls the blocking onHeadersReceived listener for a request; `sample`
// forces the CSPRNG draw of the sampling decision (only that synchronous
// draw: the wasm's own randomness stays real).
async function request(requestId, url, sample, extra = {}) {
  const { fn, rest } = chrome.webRequest.onHeadersReceived.ls[0];
  check(rest[1]?.includes("blocking"), "onHeadersReceived registered without 'blocking'");
  const real = Object.getOwnPropertyDescriptor(globalThis, "crypto");
  const fill = sample ? 0 : 0xffffffff;
  Object.defineProperty(globalThis, "crypto", { value: { getRandomValues: (a) => a.fill(fill) }, configurable: true });
  let r;
  try {
    r = fn({ requestId, url, tabId: -1, type: "xmlhttprequest", originUrl: "https://example.com/", ...extra });
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
  await new Promise((r) => setTimeout(r, 200));
}

// A copy of a certificate whose embedded SCT's signature is corrupted (last
// byte of the SCT list, inside the signature).
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

// A fake auditor (browser-client's fake_auditor example), killed at exit.
const fakes = [];
async function startFake(fill, claimed = 0.117) {
  const child = spawn(args["fake-auditor"], ["--fill", String(fill), "--claimed", String(claimed)], {
    stdio: ["pipe", "pipe", "inherit"],
  });
  fakes.push(child);
  const lines = createInterface({ input: child.stdout });
  const got = {};
  for await (const line of lines) {
    const [k, v] = line.split("=");
    got[k] = v;
    if (got.AUDITOR_URL && got.CONTROL_URL) break;
  }
  const fail = (body) =>
    realFetch(`${got.CONTROL_URL}/fake/fail`, { method: "POST", body: JSON.stringify(body) }).then((r) => {
      if (r.status !== 204) throw new Error(`fake control: ${r.status}`);
    });
  return { url: got.AUDITOR_URL, fail };
}

// One round through the alarm or the message; returns the counts and the
// queries it sent (checked: always ROUND_SIZE unless the round ended early).
const roundSizes = [];
async function round(expectOk = true) {
  const before = requests.length;
  const r = await sendMessage({ type: "run-audits" });
  const sent = queriesSince(before).length;
  roundSizes.push(sent);
  if (expectOk && !r?.ok) throw new Error(`run-audits: ${r?.error}`);
  return { ...(r?.value ?? {}), ok: r?.ok, error: r?.error, sent };
}

// ---- the test -----------------------------------------------------------------
const result = {};
const schedule = await import(new URL("../schedule.js", import.meta.url).href);
const { ROUND_SIZE, MIN_CANARIES } = schedule;
try {
  const auditor = args.auditor.replace(/\/+$/, "");
  const logListUrl = pathToFileURL(args["log-list"]).href;
  const embedded = (truth) => corpus.filter((e) => e.truth === truth && !e.tls_sct);
  const der = (s) => Array.from(Buffer.from(s, "base64"));

  // ---- Before consent: nothing sampled, stored or fetched. -----------------
  data.config = { auditorUrl: auditor, logListUrl };
  await loadBackground();
  chrome.runtime.onInstalled.ls[0].fn({ reason: "install" });
  check(tabsCreated.includes("moz-extension://00000000-test/onboarding.html"), "the first-run page did not open at install");
  const first = embedded("logged")[0];
  securityInfo.set("pre", { state: "secure", certificates: [{ rawDER: der(first.cert) }, { rawDER: der(first.issuer) }] });
  check((await request("pre", "https://before-consent.example/", true)) === "not sampled", "sampled before consent");
  const early = await sendMessage({ type: "add-certificate", leaf: first.cert, issuer: first.issuer });
  check(!early.ok && /not set up/.test(early.error), `add-certificate before consent: ${JSON.stringify(early)}`);
  const earlyRound = await sendMessage({ type: "run-audits" });
  check(!earlyRound.ok && /not set up/.test(earlyRound.error), `a round before consent: ${JSON.stringify(earlyRound)}`);
  await new Promise((r) => setTimeout(r, 1500)); // counters would be flushed by now
  check(JSON.stringify(Object.keys(data)) === '["config"]', `stored before consent: ${Object.keys(data)}`);
  check(Object.keys(sessionData).length === 0, "session state stored before consent");
  check(requests.length === 0, `fetched before consent: ${JSON.stringify(requests)}`);
  check(chrome.alarms.created.audit === undefined, "a round scheduled before consent");
  const notSetUp = await call({ type: "popup-state" });
  check(notSetUp.active === false, "popup: set up before consent");

  // The user agrees (the first-run page stores consentedAt).
  await setConfig({ consentedAt: Date.now(), testingNoDelay: true });
  await until("a round scheduled after consent", async () => chrome.alarms.created.audit !== undefined, 10);
  const alarm0 = chrome.alarms.created.audit;
  check(alarm0.when - alarm0.createdAt >= 5 * 60e3 && alarm0.when - alarm0.createdAt <= 60 * 60e3,
    `first round after consent not 5-60 min away: ${JSON.stringify(alarm0)}`);
  check(alarm0.periodInMinutes === undefined, "rounds have a fixed period");
  // Private windows are never sampled.
  check((await request("pre", "https://private.example/", true, { incognito: true })) === "not sampled", "a private window was sampled");

  // ---- Timing: the distributions of the draws. -------------------------------
  const N = 20000;
  const hist = (xs, lo, hi, bins) => {
    const h = new Array(bins).fill(0);
    for (const x of xs) h[Math.min(bins - 1, Math.floor(((x - lo) / (hi - lo)) * bins))]++;
    return h;
  };
  const delaysH = Array.from({ length: N }, () => schedule.auditDelayMs() / 3600e3);
  const gapsMin = Array.from({ length: N }, () => schedule.roundGapMs() / 60e3);
  const summary = (xs) => ({ min: Math.min(...xs), max: Math.max(...xs), mean: xs.reduce((a, b) => a + b, 0) / xs.length });
  const dS = summary(delaysH);
  const gS = summary(gapsMin);
  const dLo = schedule.AUDIT_DELAY_MIN_H, dHi = schedule.AUDIT_DELAY_MAX_H;
  const gLo = schedule.ROUND_GAP_MIN_MIN, gHi = schedule.ROUND_GAP_MAX_MIN;
  check(dS.min >= dLo && dS.max <= dHi && Math.abs(dS.mean - (dLo + dHi) / 2) < 0.3, `delay from the visit: ${JSON.stringify(dS)}`);
  check(gS.min >= gLo && gS.max <= gHi && Math.abs(gS.mean - (gLo + gHi) / 2) < 6, `gap between rounds: ${JSON.stringify(gS)}`);
  // Uniform: each of 10 bins within ±12% of N/10 (σ ≈ 3%).
  const dH = hist(delaysH, dLo, dHi, 10);
  const gH = hist(gapsMin, gLo, gHi, 10);
  check(dH.every((c) => Math.abs(c - N / 10) < 0.12 * (N / 10)), `delay histogram: ${dH}`);
  check(gH.every((c) => Math.abs(c - N / 10) < 0.12 * (N / 10)), `gap histogram: ${gH}`);
  // A round's slots: always ROUND_SIZE, at most ROUND_SIZE - MIN_CANARIES audits.
  for (const due of [0, 1, 2, 5, 40]) {
    const slots = schedule.roundSlots(Array.from({ length: due }, (_, i) => `k${i}`));
    const audits = slots.filter((s) => s.kind === "audit").length;
    check(slots.length === ROUND_SIZE && audits === Math.min(due, ROUND_SIZE - MIN_CANARIES), `slots for ${due} due: ${JSON.stringify(slots)}`);
  }
  check(schedule.retryAfterMs("120") === 120000 && schedule.retryAfterMs(null) === null && schedule.retryAfterMs("soon") === null,
    "Retry-After parsing");
  result.timing = {
    delay_hours: { ...dS, histogram: dH },
    round_gap_minutes: { ...gS, histogram: gH },
  };

  const caps = await call({ type: "capabilities" });
  check(caps.readsConnections === true, "getSecurityInfo not detected");

  const [manual, ...viaConnections] = embedded("logged").slice(0, 4);
  const omitted = embedded("omitted").slice(0, 6);

  // Options page: a certificate added by hand.
  const added = await call({ type: "add-certificate", leaf: manual.cert, issuer: manual.issuer });
  check(added.queued === 1 && added.checked[0]?.signature.status === "valid", `add-certificate: ${JSON.stringify(added)}`);
  check(requests.length === 0 || requests.every((r) => r.url.startsWith(auditor)), "fetched elsewhere than the auditor");
  const tls = corpus.find((e) => e.truth === "logged" && e.tls_sct);
  const addedTls = await call({ type: "add-certificate", leaf: tls.cert, issuer: tls.issuer });
  check(addedTls.queued === 0 && addedTls.checked.length === 0, `add-certificate (TLS SCT): ${JSON.stringify(addedTls)}`);
  check(data.status?.addedWithoutEmbeddedScts === 1, "hand-added certificate without embedded SCTs not counted");

  // Firefox path: sampled connections with their chains.
  const conn = [...viaConnections, ...omitted];
  let sampled = 0;
  for (const [i, e] of conn.entries()) {
    securityInfo.set(`r${i}`, { state: "secure", certificates: [{ rawDER: der(e.cert) }, { rawDER: der(e.issuer) }] });
    if ((await request(`r${i}`, `https://site${i}.example/`, true)) === "sampled") sampled++;
  }
  check(sampled === conn.length, `${sampled} of ${conn.length} forced samples taken`);
  securityInfo.set("rtls", { state: "secure", certificates: [{ rawDER: der(tls.cert) }, { rawDER: der(tls.issuer) }] });
  await request("rtls", "https://tls-sct.example/", true);
  await until("certificate without embedded SCTs counted", async () => data.status?.sampledWithoutEmbeddedScts === 1, 30);
  const bad = embedded("logged")[4];
  securityInfo.set("rbad", {
    state: "secure",
    certificates: [{ rawDER: der(corruptEmbeddedSct(bad.cert)) }, { rawDER: der(bad.issuer) }],
  });
  await request("rbad", "https://bad-sct.example/", true);
  await until("SCT with a bad signature counted", async () => data.status?.sctsBadSignature === 1, 30);
  const lu = data.status?.lastUnauditable;
  check(
    lu?.host === "bad-sct.example" && /^the SCT's signature does not verify with the log's key/.test(lu?.reason ?? ""),
    `last unauditable SCT: ${JSON.stringify(lu)}`,
  );
  const noIssuer = await sendMessage({ type: "add-certificate", leaf: bad.cert, issuer: "" });
  check(!noIssuer.ok && /need the issuer certificate/.test(noIssuer.error), `add-certificate without issuer: ${JSON.stringify(noIssuer)}`);
  check(!data.status?.sampleErrors, `sample errors: ${data.status?.lastSampleError}`);
  check((await request("again", "https://site0.example/x", true)) === "not sampled", "same origin within 115 s counted as a new connection");
  check((await request("fresh", "https://other.example/", false)) === "not sampled", "unsampled draw still sampled");
  await until("sampled certificates queued", async () => JSON.parse(data.queue ?? '{"items":[]}').items.length === 1 + conn.length, 30);

  // The event page is unloaded and woken again: the origins seen survive.
  await until("connection state saved to storage.session", async () => "https://site0.example" in (sessionData.seen ?? {}), 10);
  await until("counters flushed", async () => data.status?.connections === conn.length + 3, 10);
  const connectionsBefore = data.status.connections;
  await loadBackground();
  check((await request("after-unload", "https://site0.example/y", true)) === "not sampled", "an unload forgot the origins seen");
  // The page in tab 7 loads again (the unload lost the in-memory page
  // certificates): the same connection, not sampled, but remembered for the
  // popup's "this site" view.
  const tabPage = conn[conn.length - 1];
  securityInfo.set("tab7", { state: "secure", certificates: [{ rawDER: der(tabPage.cert) }, { rawDER: der(tabPage.issuer) }] });
  await request("tab7", `https://site${conn.length - 1}.example/`, false, { type: "main_frame", tabId: 7 });
  await until("counters flushed after the unload", async () => data.status?.connections === connectionsBefore, 5);

  // No audits yet: the words say so.
  const popup0 = await call({ type: "popup-state" });
  check(popup0.active && popup0.week.audits === 0 && popup0.rounds === 0, `popup before any round: ${JSON.stringify(popup0.week)}`);

  // Network failures name the URL, and hint at host access when missing.
  await setConfig({ auditorUrl: "http://127.0.0.1:9" });
  permissions.granted = false;
  const noAccess = await sendMessage({ type: "run-audits" });
  check(
    !noAccess.ok && noAccess.error.includes("http://127.0.0.1:9/v1/manifest") && noAccess.error.includes("no host access"),
    `network error without host access: ${noAccess.error}`,
  );
  permissions.granted = true;
  await setConfig({ auditorUrl: auditor });

  // ---- Rounds against the real auditor. -------------------------------------
  // The queue's SCTs were queued with testingNoDelay (no random delay); each
  // round audits at most ROUND_SIZE - MIN_CANARIES of them and fills the
  // rest with canaries. First every SCT once (a NOT FOUND stays queued for
  // its re-check), from the alarm as the browser runs it.
  const total = 1 + conn.length;
  const sampleItem = JSON.parse(data.queue).items[0];
  const queueNow = () => JSON.parse(data.queue ?? '{"items":[]}').items;
  let rounds = 0;
  const firstRounds = [];
  while (queueNow().some((i) => i.not_found_in === null) && rounds < 20) {
    const before = data.status?.lastRunAt;
    const nReq = requests.length;
    chrome.alarms.onAlarm.ls[0].fn({ name: "audit" });
    if (!(await until("a round from the alarm", async () => data.status?.lastRunAt !== before, 120))) break;
    rounds++;
    const c = data.status.lastRun;
    roundSizes.push(queriesSince(nReq).length);
    firstRounds.push(c);
    check(!data.status.lastError, `round error: ${data.status.lastError}`);
    check(c.queries === ROUND_SIZE && c.audited <= ROUND_SIZE - MIN_CANARIES && c.canaries === ROUND_SIZE - c.audited,
      `round ${rounds}: ${JSON.stringify(c)}`);
    // The next round's time: a random gap from now.
    const a = chrome.alarms.created.audit;
    const gap = (a.when - a.createdAt) / 60e3;
    check(gap >= schedule.ROUND_GAP_MIN_MIN - 0.1 && gap <= schedule.ROUND_GAP_MAX_MIN + 0.1, `gap to the next round ${gap} min`);
  }
  const audited = firstRounds.reduce((a, c) => a + c.audited, 0);
  check(audited >= total && !queueNow().some((i) => i.not_found_in === null), `${audited} audits for ${total} SCTs in ${rounds} rounds`);
  check(rounds >= Math.ceil(total / (ROUND_SIZE - MIN_CANARIES)), `${total} SCTs audited in ${rounds} rounds`);
  const logged1 = firstRounds.reduce((a, c) => a + c.logged, 0);
  const notFound1 = firstRounds.reduce((a, c) => a + c.notFound, 0);
  check(logged1 >= 1 + viaConnections.length, `only ${logged1} logged`);

  const popup = await call({ type: "popup-state", tabId: 7 });
  check(popup.auditor === auditor && popup.epoch !== null, `popup auditor/epoch: ${popup.auditor} ${popup.epoch}`);
  check(popup.week.audits === audited, `popup: ${popup.week.audits} audits this week, expected ${audited}`);
  check(popup.week.canaries === data.status.canaries && popup.week.canaries > 0, `popup canaries ${popup.week.canaries}`);
  check(popup.queue.every((i) => i.state === "later_epoch" || i.state === "ready"), `popup queue: ${JSON.stringify(popup.queue.map((i) => i.state))}`);
  check(
    popup.notFound.length > 0 && popup.notFound.every((a) => /or the auditor's (data is|filters are) wrong/.test(a.message)),
    `NOT FOUND words: ${JSON.stringify(popup.notFound.map((a) => a.message))}`,
  );
  const c = popup.confidence;
  check(c?.stated === true && c.fillRatio > 0 && c.fillRatio < 0.5 && c.onesFlaggedAfter > 0 && c.zerosFlaggedAfter > c.onesFlaggedAfter,
    `popup confidence: ${JSON.stringify(c)}`);
  check(popup.canaries?.auditor === auditor && popup.canaries.probes === data.status.canaries && popup.canaries.verdict === "consistent",
    `popup canaries: ${JSON.stringify(popup.canaries)}`);
  // This site: tab 7's page, one of the omitted certificates.
  const site = popup.site;
  check(site?.known && site.host === `site${conn.length - 1}.example` && site.scts.length >= 1, `this site: ${JSON.stringify(site)}`);
  check(site?.scts?.length && site.scts.every((s) => s.state !== "not_sampled" && s.state !== "not_auditable"),
    `this site's standing: ${JSON.stringify(site?.scts)}`);
  const popupNoTab = await call({ type: "popup-state", tabId: 99 });
  check(popupNoTab.site?.known === false, "a tab without a page certificate shows one");

  // Re-checks in later epochs → reports; "Reported" only once sent.
  for (let i = 0; i < 20 && queueNow().length > 0; i++) {
    const after = Math.max(...queueNow().map((x) => x.not_found_in ?? 0));
    await until("a later epoch", async () => (await epochNow()) > after, Number(args["epoch-timeout"]));
    const r = await round();
    check(r.sent === ROUND_SIZE, `re-check round of ${r.sent} queries`);
  }
  check(queueNow().length === 0, `items left in the queue: ${queueNow().length}`);
  // An empty round is padded too.
  const empty = await round();
  check(empty.sent === ROUND_SIZE && empty.audited === 0 && empty.canaries === ROUND_SIZE, `empty round: ${JSON.stringify(empty)}`);
  const reports = data.reports ?? [];
  const omittedCerts = new Set(omitted.map((e) => e.cert));
  check(reports.every((r) => omittedCerts.has(r.chain[0])), "a report names a certificate that was logged");
  if (check(reports.length > 0, "no report after the re-checks")) {
    check(badge.text === String(reports.length), `badge "${badge.text}" for ${reports.length} unsent reports`);
    const reported = (data.audits ?? []).filter((a) => a.report);
    check(
      reported.length > 0 &&
        reported.every((a) => /^NOT FOUND in epochs \d+ and \d+: .*or the auditor's filters are wrong.*misbehaviour report/.test(a.message)),
      `report words: ${JSON.stringify(reported.map((a) => a.message))}`,
    );
    const popup2 = await call({ type: "popup-state" });
    check(popup2.reports.length === reports.length && popup2.reports.every((r) => r.sent === null), "a report shown as sent before it was sent");
    check(data.reportsSent === undefined, "a report was sent without the user asking");
    // The newest report: the auditor still holds its epochs.
    const leaf = reports[reports.length - 1].leaf_hash;
    const refused = await sendMessage({ type: "send-report", leaf_hash: leaf });
    check(refused?.ok === false && data.reportsSent === undefined, "send-report without consent was not refused");
    permissions.dataCollection = false;
    const declined = await sendMessage({ type: "send-report", leaf_hash: leaf, consent: true });
    check(declined?.ok === false && /browsing activity/.test(declined.error) && data.reportsSent === undefined,
      `send-report without browsingActivity: ${JSON.stringify(declined)}`);
    permissions.dataCollection = true;
    const sent = await call({ type: "send-report", leaf_hash: leaf, consent: true });
    check(sent.result === "received", `send-report: ${JSON.stringify(sent)}`);
    const popup3 = await call({ type: "popup-state" });
    check(popup3.reports.find((r) => r.leaf_hash === leaf)?.sent?.result === "received", "popup: the sent report");
    check(badge.text === (reports.length > 1 ? String(reports.length - 1) : ""), `badge after sending: "${badge.text}"`);
    result.reports = { made: reports.length, sent: 1 };
  }
  result.real_auditor = { rounds: firstRounds.length, audited, logged: logged1, not_found: notFound1, canaries: data.status.canaries };

  // ---- Fake auditors. ---------------------------------------------------------
  await chrome.storage.local.set({ reports: [] });
  // A pending item with a NOT FOUND of the real auditor: a new auditor
  // forgets it (its re-check starts over).
  const q = JSON.parse(data.queue ?? '{"items":[]}');
  // Rounds count until a verdict; returns [verdict, rounds].
  async function roundsUntilFlagged(max) {
    for (let i = 1; i <= max; i++) {
      const r = await round();
      check(r.sent === ROUND_SIZE, `round of ${r.sent} queries`);
      const v = data.auditorState.canaryCheck?.verdict;
      if (v !== "consistent") return [v, i];
    }
    return [data.auditorState.canaryCheck?.verdict, max];
  }
  const perCanary = (n) => Math.ceil(n / MIN_CANARIES); // the stated bound in rounds
  const ones = await startFake("ones");
  // Before switching: one queued item with a NOT FOUND.
  q.items.push({ ...sampleItem, leaf_hash: "ab".repeat(32), not_found_in: 3 });
  await chrome.storage.local.set({ queue: JSON.stringify(q) });
  await setConfig({ auditorUrl: ones.url });
  const [vOnes, rOnes] = await roundsUntilFlagged(10);
  const stated = data.auditorState.canaryCheck.claimed;
  check(data.auditorState.auditor === ones.url, "the auditor's state does not name it");
  check(JSON.parse(data.queue).items.every((i) => i.not_found_in === null), "the old auditor's NOT FOUND carried over");
  const onesBound = perCanary((await call({ type: "popup-state" })).confidence.onesFlaggedAfter);
  check(vOnes === "too_many_logged" && rOnes <= onesBound, `all ones: ${vOnes} after ${rOnes} rounds (bound ${onesBound})`);
  check(badge.text === "!", `badge for a flagged auditor: "${badge.text}"`);
  const pOnes = await call({ type: "popup-state" });
  check(/LOGGED too often/.test(pOnes.canaries.message) && pOnes.canaries.measured === 1, `popup, all ones: ${JSON.stringify(pOnes.canaries)}`);
  check(Math.abs(stated - 0.117) < 1e-9, `stated fill ${stated}`);

  const zeros = await startFake("zeros");
  await setConfig({ auditorUrl: zeros.url });
  const zerosBound = perCanary((await call({ type: "popup-state" })).confidence?.zerosFlaggedAfter ?? 112);
  const [vZeros, rZeros] = await roundsUntilFlagged(zerosBound);
  check(vZeros === "too_few_logged" && rZeros <= zerosBound, `all zeros: ${vZeros} after ${rZeros} rounds (bound ${zerosBound})`);
  check(data.auditorState.canaryCheck.probes <= rZeros * ROUND_SIZE, "the old auditor's canaries carried over");

  const wrong = await startFake("0.5");
  await setConfig({ auditorUrl: wrong.url });
  const [vWrong, rWrong] = await roundsUntilFlagged(16);
  check(vWrong === "too_many_logged", `fill 0.5 stated as 0.117: ${vWrong} after ${rWrong} rounds`);

  const honest = await startFake("0.117");
  await setConfig({ auditorUrl: honest.url });
  const [vHonest, rHonest] = await roundsUntilFlagged(16);
  check(vHonest === "consistent" && rHonest === 16, `honest fake: ${vHonest} after ${rHonest} rounds`);
  check(badge.text === "", `badge for an honest auditor: "${badge.text}"`);
  result.fakes = {
    all_ones: { verdict: vOnes, rounds: rOnes, bound: onesBound },
    all_zeros: { verdict: vZeros, rounds: rZeros, bound: zerosBound },
    fill_half_stated_0_117: { verdict: vWrong, rounds: rWrong },
    honest: { verdict: vHonest, rounds: rHonest, measured: data.auditorState.canaryCheck.measured },
  };

  // Failures, against the honest fake.
  // A 5xx: the query falls back to a fresh draw (here the same fake, after
  // a short backoff) and is answered.
  await honest.fail({ status: 500, count: 1 });
  const f0 = await round(false);
  check(
    f0.ok && f0.sent === ROUND_SIZE + 1 && f0.failed === 0 && f0.retried === 1 && f0.fallbacks === 1,
    `a 500 falls back: ${JSON.stringify(f0)}`,
  );
  // A 4xx is not a failure the fallback handles: the query fails.
  await honest.fail({ status: 400, count: 1 });
  const f1 = await round(false);
  check(f1.ok && f1.sent === ROUND_SIZE && f1.failed === 1 && f1.fallbacks === 0, `one failed query: ${JSON.stringify(f1)}`);
  check(/1 of 4 queries failed/.test(data.auditorState.lastError ?? ""), `lastError: ${data.auditorState.lastError}`);
  await honest.fail({ status: 503, retry_after: 1, count: 1 });
  const tRetry = Date.now();
  const f2 = await round(false);
  check(f2.ok && f2.failed === 0 && f2.retried === 1 && f2.sent === ROUND_SIZE + 1, `short Retry-After: ${JSON.stringify(f2)}`);
  const retriedAt = requests.filter((r) => r.at >= tRetry && /\/query$/.test(r.url)).map((r) => r.at);
  check(retriedAt.some((t, i) => i > 0 && t - retriedAt[i - 1] >= 950), "the retry did not wait for Retry-After");
  await honest.fail({ status: 503, retry_after: 3600, count: 1 });
  const f3 = await round(false);
  const held = data.auditorState.retryUntil;
  check(f3.sent === 1 && held >= Date.now() + 3500e3, `long Retry-After: ${JSON.stringify(f3)}; retryUntil ${held}`);
  check(chrome.alarms.created.audit.when >= held, "the next round is before the Retry-After");
  const nReq = requests.length;
  const f4 = await sendMessage({ type: "run-audits" });
  check(!f4.ok && /Retry-After/.test(f4.error) && requests.length === nReq, `a round during Retry-After: ${JSON.stringify(f4)}`);
  const pRetry = await call({ type: "popup-state" });
  check(pRetry.retryUntil === held, "popup: Retry-After not shown");

  // A stall: no successful round for 48 hours.
  await chrome.storage.local.set({ auditorState: { ...data.auditorState, lastSuccessAt: Date.now() - 49 * 3600e3 } });
  await sendMessage({ type: "run-audits" }); // refused (Retry-After): still no success
  const pStall = await call({ type: "popup-state" });
  check(pStall.stalled === true && badge.text === "?", `stall: popup ${pStall.stalled}, badge "${badge.text}"`);
  // Queue expiry: an entry queued 15 days ago is dropped at the next round.
  const old = JSON.parse(data.queue);
  old.items.push({ ...sampleItem, leaf_hash: "cd".repeat(32), queued_at_ms: Date.now() - 15 * 86400e3 });
  await chrome.storage.local.set({ queue: JSON.stringify(old) });
  const expiredBefore = data.status.expired ?? 0;
  // ... even while the auditor asks to wait (the round is refused).
  const refused = await sendMessage({ type: "run-audits" });
  check(!refused.ok, "a round ran during Retry-After");
  await chrome.storage.local.set({ auditorState: { ...data.auditorState, retryUntil: null } });
  await round();
  check(
    (data.status.expired ?? 0) === expiredBefore + 1 && !JSON.parse(data.queue).items.some((i) => i.leaf_hash === "cd".repeat(32)),
    `queue expiry: expired ${data.status.expired}`,
  );
  check(badge.text === "" && (await call({ type: "popup-state" })).stalled === false, "a successful round did not end the stall");
  result.round_sizes = roundSizes.reduce((m, n) => ({ ...m, [n]: (m[n] ?? 0) + 1 }), {});
  result.requests = requests.length;
} catch (e) {
  failures.push(`exception: ${e?.stack ?? e}`);
} finally {
  for (const f of fakes) f.stdin.end();
}

const summary = {
  ok: failures.length === 0,
  harness: "background.js in Node with stand-in WebExtension APIs; real wasm (--target web), real and fake auditors",
  seconds: Math.round((Date.now() - t0) / 1000),
  ...result,
  badge: badge.text,
  failures,
};
console.log(JSON.stringify(summary, null, 2));
process.exit(summary.ok ? 0 : 1);
