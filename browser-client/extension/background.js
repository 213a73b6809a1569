// Background of the private CT auditor extension (Firefox: module event
// page; Chromium: module service worker). All CT and PIR work is done by the
// wasm build of browser-client (pkg/, made by build.sh); this file does the
// I/O: storage, fetch, alarms, badge, and — where the browser allows it —
// reading the certificate chain of a connection.
//
// Nothing happens before the user has chosen an auditor and agreed on the
// first-run page (config.consentedAt): no connection is sampled, nothing is
// stored, nothing is fetched. Private windows are never sampled (the
// manifest says "incognito": "not_allowed", and the listener checks again).
//
// Storage (storage.local):
//   config       {auditorUrl, consentedAt, logListUrl, testingSampleAll, testingNoDelay}
//   auditorState the state of the current auditor (a new auditor starts
//                clean): {auditor, since, canaries (browser-client's
//                CanaryTally JSON), canaryCheck, rounds, lastRoundAt,
//                lastSuccessAt, retryUntil, lastError, nextRoundAt}
//   queue        pending audits, the JSON string of browser-client's PendingQueue
//   schedule     "leaf_hash/log_id" -> earliest audit time (ms): the random
//                delay from the visit (schedule.js)
//   reports      misbehaviour reports (array of objects, the wire form of
//                POST /v1/reports), kept until the user sends or clears them
//   reportsSent  leaf hash -> {at, auditor, result} for reports the user chose
//                to send (popup button), or {at, auditor, error}
//   logList      {url, fetchedAt, text}: cached log list (refreshed daily)
//   manifest     {auditor, fetchedAt, text}: the last manifest (for the popup)
//   usage        {days: {"YYYY-MM-DD": {audits, logged, canaries, manifests, up, down}}}: the last 8 days
//   audits       the last audits (time, auditor, epoch, result and its
//                sentence, timings, bytes)
//   hosts        leaf hash -> host name it was seen on (for the popup)
//   status       what the options page shows (counters, last errors)
// Storage (storage.session, kept while the browser runs):
//   seen         origin -> time of its last request (the connection rule)
// Memory only (never stored): the certificate chain of each tab's page, for
// the popup's "this site" view.

import init, {
  canaryCheck,
  canaryLeaf,
  canaryRecord,
  canariesToFlag,
  Fallback,
  fallbackFailure,
  inspect,
  queueAdd,
  queueReady,
  queueRecord,
  queueStatus,
  Prober,
} from "./pkg/browser_client.js";
import { DEFAULT_CONFIG } from "./config.js";
import {
  QUEUE_MAX_AGE_DAYS,
  RETRY_IN_ROUND_MAX_S,
  ROUND_SIZE,
  STALL_HOURS,
  auditDelayMs,
  retryAfterMs,
  roundGapMs,
  roundSlots,
  uniform,
} from "./schedule.js";

const api = globalThis.browser ?? globalThis.chrome;
// browser-client/src/policy.rs AuditPolicy::default(): 1/1000 of the
// connections are sampled, 2 SCTs of each are audited.
const SAMPLED_FRACTION = 1 / 1000;
const AUDITS_PER_SAMPLE = 2;
const LOG_LIST_MAX_AGE_MS = 24 * 3600 * 1000;
// The connection rule: a request to an origin that had no request for
// 115 s (Firefox's default HTTP keep-alive timeout,
// network.http.keep-alive.timeout) most likely opened a new TLS connection.
const CONNECTION_IDLE_MS = 115 * 1000;
const SEEN_MAX = 5000;
const TABS_MAX = 100;
// Per-request state is written at most once a second.
const FLUSH_MS = 1000;
const RECENT_AUDITS = 50;
const USAGE_DAYS = 8;
const WEEK_MS = 7 * 86400 * 1000;
const HOST_ADDED_BY_HAND = "(added by hand)";

// No top-level await: Chromium refuses it in service workers.
const wasmReady = init();

// Every read-modify-write of the stored state goes through this chain, so
// that rounds and new connections never interleave.
let chain = Promise.resolve();
function serial(fn) {
  const p = chain.then(fn);
  chain = p.catch(() => {});
  return p;
}

const message = (e) => String(e?.message ?? e);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const iso = (ms) => new Date(ms).toISOString().replace(/\.\d+Z$/, "Z");

async function getConfig() {
  const { config } = await api.storage.local.get("config");
  return { ...DEFAULT_CONFIG, ...(config ?? {}) };
}

function auditorBase(config) {
  return (config.auditorUrl ?? "").replace(/\/+$/, "");
}

// Set up: an auditor chosen and the user's consent given.
function isActive(config) {
  return typeof config.consentedAt === "number" && auditorBase(config) !== "";
}

async function updateStatus(patch) {
  const { status } = await api.storage.local.get("status");
  const next = { ...(status ?? {}), ...patch };
  await api.storage.local.set({ status: next });
  return next;
}

async function addCounters(counters) {
  const { status } = await api.storage.local.get("status");
  const patch = {};
  for (const [k, v] of Object.entries(counters)) patch[k] = (status?.[k] ?? 0) + v;
  return updateStatus(patch);
}

// Per-request counters stay in memory and are written at most every FLUSH_MS.
const unflushed = {};
let flushTimer = null;
function countLater(key) {
  unflushed[key] = (unflushed[key] ?? 0) + 1;
  if (flushTimer === null) {
    flushTimer = setTimeout(() => {
      flushTimer = null;
      const c = { ...unflushed };
      for (const k of Object.keys(unflushed)) delete unflushed[k];
      serial(() => addCounters(c));
    }, FLUSH_MS);
  }
}

// A fetch that failed before any response: the browser's message names
// nothing, so the error says which URL and what to check.
async function networkError(url, e) {
  let hint = "check that the server runs and is reachable from this browser";
  try {
    const u = new URL(url);
    if (/^https?:$/.test(u.protocol) && typeof api.permissions?.contains === "function") {
      const pattern = `${u.protocol}//${u.hostname}/*`;
      const granted = await api.permissions.contains({ origins: [pattern] });
      if (!granted) {
        hint =
          `the extension has no host access to ${u.origin}: choose the auditor again on the options page ` +
          "(it asks for access), or grant it in about:addons → Private CT auditor → Permissions";
      }
    }
  } catch (_) {
    /* keep the generic hint */
  }
  const timedOut = e?.name === "TimeoutError";
  const err = new Error(
    timedOut ? `${url}: no answer in time (${message(e).trim()})` : `${url}: network error (${message(e).trim()}); ${hint}`,
  );
  err.code = timedOut ? "timeout" : "network";
  return err;
}

async function fetchOk(url, init) {
  let resp;
  try {
    resp = await fetch(url, init);
  } catch (e) {
    throw await networkError(url, e);
  }
  if (!resp.ok) {
    let detail = "";
    let shardUrl = null;
    try {
      const body = await resp.json();
      detail = body.error ?? "";
      shardUrl = typeof body.shard_url === "string" ? body.shard_url : null;
    } catch (_) {
      /* not a JSON error body */
    }
    const e = new Error(`${url}: HTTP ${resp.status} ${detail}`.trim());
    e.status = resp.status;
    e.code = detail;
    e.shardUrl = shardUrl; // 421 wrong_shard: the shard that holds the database
    e.retryAfterMs = retryAfterMs(resp.headers.get("retry-after"));
    throw e;
  }
  return resp;
}

const overloaded = (e) => e?.status === 503 || e?.status === 429;

// The log list, cached for a day (the SCT signatures are checked against it).
async function getLogList() {
  const config = await getConfig();
  if (!isActive(config)) throw new Error("not set up yet: nothing is fetched before the first-run page is done");
  const { logList } = await api.storage.local.get("logList");
  if (logList && logList.url === config.logListUrl && Date.now() - logList.fetchedAt < LOG_LIST_MAX_AGE_MS) {
    return new TextEncoder().encode(logList.text);
  }
  try {
    const text = await (await fetchOk(config.logListUrl, { cache: "no-cache" })).text();
    await api.storage.local.set({ logList: { url: config.logListUrl, fetchedAt: Date.now(), text } });
    return new TextEncoder().encode(text);
  } catch (e) {
    if (logList && logList.url === config.logListUrl) return new TextEncoder().encode(logList.text); // stale but usable
    throw e;
  }
}

async function loadQueue() {
  const { queue } = await api.storage.local.get("queue");
  return typeof queue === "string" ? queue : "";
}

function queueItems(raw) {
  return raw ? JSON.parse(raw).items : [];
}

const itemKey = (i) => `${i.leaf_hash}/${i.log_id}`;

// Keeps the host names of the leaf hashes still in the queue, in a report
// or among the recent audits; adds `more`.
async function saveHosts(more = {}) {
  const { hosts, reports, audits } = await api.storage.local.get(["hosts", "reports", "audits"]);
  const keep = new Set([
    ...queueItems(await loadQueue()).map((i) => i.leaf_hash),
    ...(reports ?? []).map((r) => r.leaf_hash),
    ...(audits ?? []).map((a) => a.leaf_hash),
    ...Object.keys(more),
  ]);
  const next = {};
  for (const [h, host] of Object.entries({ ...more, ...(hosts ?? {}) })) if (keep.has(h)) next[h] = host;
  await api.storage.local.set({ hosts: next });
}

// Drops the schedule entries of items no longer queued.
async function saveSchedule(more = {}) {
  const { schedule } = await api.storage.local.get("schedule");
  const keep = new Set(queueItems(await loadQueue()).map(itemKey));
  const next = {};
  for (const [k, t] of Object.entries({ ...(schedule ?? {}), ...more })) if (keep.has(k)) next[k] = t;
  await api.storage.local.set({ schedule: next });
}

// Inspects a certificate's embedded SCTs and adds the auditable ones to the
// pending queue: at most `limit` of them, chosen uniformly by the wasm side.
// Each gets its earliest audit time: a random delay from now (schedule.js).
// `source` is "sampled" (a connection) or "manual" (the options page).
async function enqueueCertificate(leafDer, issuerDer, limit, source, host) {
  await wasmReady;
  const config = await getConfig();
  if (!isActive(config)) throw new Error("not set up yet: choose an auditor on the first-run page first");
  const logList = await getLogList();
  const checked = JSON.parse(inspect(leafDer, issuerDer, logList, undefined));
  const counters = {};
  let lastUnauditable;
  if (checked.length === 0) {
    // No SCT list extension: the site delivers its SCTs by TLS or OCSP,
    // which no extension API exposes.
    counters[source === "sampled" ? "sampledWithoutEmbeddedScts" : "addedWithoutEmbeddedScts"] = 1;
  }
  for (const c of checked) {
    const status = c.signature?.status;
    if (status === "valid") continue;
    const unknown = status === "unknown_log";
    const key = unknown ? "sctsUnknownLog" : "sctsBadSignature";
    counters[key] = (counters[key] ?? 0) + 1;
    lastUnauditable = {
      at: Date.now(),
      source,
      host,
      log: c.log_description ?? c.log_id,
      timestampMs: c.timestamp_ms,
      reason: c.signature?.message ?? (unknown ? "the log is not in the log list" : "the signature does not verify"),
    };
  }
  let queued = 0;
  await serial(async () => {
    if (checked.some((c) => c.signature?.status === "valid")) {
      const now = Date.now();
      const raw = await loadQueue();
      const known = new Set(queueItems(raw).map(itemKey));
      const next = queueAdd(raw, leafDer, issuerDer, logList, now, Math.min(limit, 0xffffffff));
      const added = queueItems(next).filter((i) => !known.has(itemKey(i)));
      queued = added.length;
      await api.storage.local.set({ queue: next });
      const delay = () => (config.testingNoDelay === true ? 0 : auditDelayMs());
      await saveSchedule(Object.fromEntries(added.map((i) => [itemKey(i), now + delay()])));
      await saveHosts(Object.fromEntries(added.map((i) => [i.leaf_hash, host])));
    }
    await addCounters({ ...counters, queued });
    const patch = { pending: queueItems(await loadQueue()).length };
    if (lastUnauditable) patch.lastUnauditable = lastUnauditable;
    await updateStatus(patch);
  });
  return { checked, queued };
}

// ---- Reading connections (Firefox only) ---------------------------------

// What the synchronous request listener needs: the settings and, per
// origin, the time of its last request (in storage.session, so that it
// survives the event page being unloaded when idle).
let liveConfig = { ...DEFAULT_CONFIG };
let seen = null; // Map origin -> ms, most recent last; null until loaded
const sessionArea = api.storage.session ?? null;
const stateReady = (async () => {
  let stored = {};
  try {
    liveConfig = await getConfig();
    if (sessionArea && isActive(liveConfig)) stored = (await sessionArea.get("seen")).seen ?? {};
  } catch (e) {
    console.warn("ct-auditor: loading state:", e);
  }
  seen = new Map(Object.entries(stored).sort((a, b) => a[1] - b[1]));
})();

let seenTimer = null;
function saveSeenLater() {
  if (!sessionArea || seenTimer !== null) return;
  seenTimer = setTimeout(() => {
    seenTimer = null;
    sessionArea.set({ seen: Object.fromEntries(seen) }).catch((e) => console.warn("ct-auditor:", e));
  }, FLUSH_MS);
}

function isNewConnection(origin, now) {
  const last = seen.get(origin);
  seen.delete(origin);
  seen.set(origin, now);
  if (seen.size > SEEN_MAX) {
    for (const [o, t] of seen) if (now - t > CONNECTION_IDLE_MS) seen.delete(o);
    for (const o of seen.keys()) {
      if (seen.size <= SEEN_MAX) break;
      seen.delete(o); // oldest first
    }
  }
  saveSeenLater();
  return last === undefined || now - last > CONNECTION_IDLE_MS;
}

async function onSampledSecurityInfo(info, host) {
  if ((info.state !== "secure" && info.state !== "weak") || !info.certificates || info.certificates.length < 2) {
    await serial(() => addCounters({ sampledWithoutChain: 1 }));
    return;
  }
  const leaf = new Uint8Array(info.certificates[0].rawDER);
  const issuer = new Uint8Array(info.certificates[1].rawDER);
  try {
    await enqueueCertificate(leaf, issuer, AUDITS_PER_SAMPLE, "sampled", host);
  } catch (e) {
    const msg = `${host}: ${message(e)}`;
    await serial(async () => (await addCounters({ sampleErrors: 1 }), updateStatus({ lastSampleError: msg })));
  }
}

// The page certificate of each tab (memory only, for the popup's "this
// site" view; lost when the event page unloads or the browser quits).
const tabCerts = new Map();
function rememberTab(tabId, host, info) {
  if (!info?.certificates?.length) return;
  tabCerts.delete(tabId);
  tabCerts.set(tabId, {
    host,
    at: Date.now(),
    leaf: Array.from(info.certificates[0].rawDER ?? []),
    issuer: Array.from(info.certificates[1]?.rawDER ?? []),
  });
  for (const k of tabCerts.keys()) {
    if (tabCerts.size <= TABS_MAX) break;
    tabCerts.delete(k);
  }
}

// Whether this new connection is sampled.
function decide(url) {
  if (!isNewConnection(url.origin, Date.now())) return false;
  countLater("connections");
  // testingSampleAll (options page, "Testing"): every new connection is sampled.
  const fraction = liveConfig.testingSampleAll === true ? 1 : SAMPLED_FRACTION;
  if (uniform() >= fraction) return false;
  countLater("sampled");
  return true;
}

function handle(details, url) {
  const sampled = decide(url);
  const page = details.type === "main_frame" && details.tabId >= 0;
  if (!sampled && !page) return undefined;
  return api.webRequest
    .getSecurityInfo(details.requestId, { certificateChain: true, rawDER: true })
    .then((info) => {
      if (page) rememberTab(details.tabId, url.hostname, info);
      if (sampled) onSampledSecurityInfo(info, url.hostname).catch((e) => console.warn("ct-auditor:", e));
    })
    .catch((e) => console.warn("ct-auditor: getSecurityInfo:", e))
    .then(() => undefined);
}

// Blocking onHeadersReceived listener (getSecurityInfo only works there).
// Before the user agreed, and in private windows, it returns at once and
// touches nothing. An unsampled sub-resource returns at once too; a page
// load or a sampled request waits only for getSecurityInfo.
function onHeadersReceived(details) {
  if (details.incognito) return undefined;
  if (seen !== null && !isActive(liveConfig)) return undefined;
  const own = api.runtime.getURL("");
  if ((details.originUrl ?? "").startsWith(own) || (details.documentUrl ?? "").startsWith(own)) return undefined;
  let url;
  try {
    url = new URL(details.url);
  } catch (_) {
    return undefined;
  }
  if (seen === null) return stateReady.then(() => (isActive(liveConfig) ? handle(details, url) : undefined));
  return handle(details, url);
}

const CAN_READ_CONNECTIONS = typeof api.webRequest?.getSecurityInfo === "function";
if (CAN_READ_CONNECTIONS) {
  api.webRequest.onHeadersReceived.addListener(onHeadersReceived, { urls: ["https://*/*"] }, ["blocking"]);
}
api.tabs?.onRemoved?.addListener((tabId) => tabCerts.delete(tabId));

// ---- The auditor's state ------------------------------------------------

// The state of `auditor`. A different auditor than the stored state's
// starts clean: its own canaries, no NOT FOUND of the old auditor counts
// (the queue's first NOT FOUNDs are forgotten), no old manifest.
async function ensureAuditorState(auditor) {
  const { auditorState } = await api.storage.local.get("auditorState");
  if (auditorState && auditorState.auditor === auditor) return auditorState;
  const raw = await loadQueue();
  if (raw) {
    const q = JSON.parse(raw);
    for (const i of q.items) i.not_found_in = null;
    delete q.canaries;
    await api.storage.local.set({ queue: JSON.stringify(q) });
  }
  const fresh = {
    auditor,
    since: Date.now(),
    canaries: "",
    canaryCheck: null,
    rounds: 0,
    lastRoundAt: null,
    lastSuccessAt: null,
    retryUntil: null,
    lastError: null,
    nextRoundAt: null,
  };
  await api.storage.local.remove("manifest");
  await api.storage.local.set({ auditorState: fresh });
  return fresh;
}

async function saveAuditorState(st) {
  await api.storage.local.set({ auditorState: st });
}

// No round of this auditor has succeeded for STALL_HOURS (counted from its
// setup when none ever did).
function stalled(st, now) {
  if (!st) return false;
  return now - (st.lastSuccessAt ?? st.since) > STALL_HOURS * 3600 * 1000;
}

function flagged(st) {
  const v = st?.canaryCheck?.verdict;
  return v === "too_many_logged" || v === "too_few_logged";
}

// The badge: unsent reports (their number, red); else "!" (red) when the
// canaries flag the auditor, "?" (amber) when auditing has stalled.
async function updateBadge() {
  const got = await api.storage.local.get(["reports", "reportsSent", "auditorState", "config"]);
  const config = { ...DEFAULT_CONFIG, ...(got.config ?? {}) };
  const st = isActive(config) && got.auditorState?.auditor === auditorBase(config) ? got.auditorState : null;
  const unsent = (got.reports ?? []).filter((r) => !got.reportsSent?.[r.leaf_hash] || got.reportsSent[r.leaf_hash].error);
  let text = "";
  let color = "#c00000";
  let title = "Private CT auditor";
  if (unsent.length) {
    text = String(unsent.length);
    title = `${unsent.length} NOT FOUND twice: report ready to send`;
  } else if (flagged(st)) {
    text = "!";
    title = "The canaries flag the auditor: its answers cannot be trusted";
  } else if (st && stalled(st, Date.now())) {
    text = "?";
    color = "#b36b00";
    title = `No audit round has succeeded for ${STALL_HOURS} hours`;
  } else if (!isActive(config)) {
    title = "Private CT auditor: not set up (choose an auditor)";
  }
  await api.action.setBadgeText({ text });
  if (text) await api.action.setBadgeBackgroundColor({ color });
  if (typeof api.action.setTitle === "function") await api.action.setTitle({ title });
}

// ---- Rounds ---------------------------------------------------------------

// UTC day of a time, "YYYY-MM-DD".
function dayKey(ms) {
  return new Date(ms).toISOString().slice(0, 10);
}

async function addUsage(now, patch) {
  const { usage } = await api.storage.local.get("usage");
  const days = { ...(usage?.days ?? {}) };
  const d = { audits: 0, logged: 0, canaries: 0, manifests: 0, up: 0, down: 0, ...(days[dayKey(now)] ?? {}) };
  for (const [k, v] of Object.entries(patch)) d[k] += v;
  days[dayKey(now)] = d;
  const keep = Object.keys(days).sort().slice(-USAGE_DAYS);
  await api.storage.local.set({ usage: { days: Object.fromEntries(keep.map((k) => [k, days[k]])) } });
}

// The manifest; an overloaded auditor's Retry-After is kept in `st`.
async function fetchManifest(auditor, st) {
  let resp;
  try {
    resp = await fetchOk(`${auditor}/v1/manifest`, { cache: "no-cache" });
  } catch (e) {
    if (overloaded(e) && e.retryAfterMs !== null) st.retryUntil = Date.now() + e.retryAfterMs;
    throw e;
  }
  const bytes = new Uint8Array(await resp.arrayBuffer());
  const prober = new Prober(bytes); // Prober checks every manifest invariant
  const now = Date.now();
  await api.storage.local.set({ manifest: { auditor, fetchedAt: now, text: new TextDecoder().decode(bytes) } });
  await addUsage(now, { manifests: 1, down: bytes.length });
  return { bytes, prober };
}

// Sends one query for `leaf`, drawn afresh by `prober.prepare` for every
// attempt (a fresh random database, a fresh LWE secret), to its shard, once
// more at the shard a 421 names. When the query's group is unreachable,
// times out or answers 5xx (503 and 429 included), a fresh query is drawn
// and sent at once, at most browser-client's MAX_REDRAWS times (Fallback,
// docs/protocol.md §7.1). A group that said Retry-After is not asked again
// before it ends: a draw that lands there waits (if that is short and before
// the query's deadline) or is skipped. When every attempt failed, the last
// error is thrown; a Retry-After longer than RETRY_IN_ROUND_MAX_S on it ends
// the round (retryUntil). Returns the answered query (the caller frees it).
async function postQuery(prober, leaf, auditor) {
  const fb = new Fallback(performance.now());
  let prepareMs = 0;
  let lastSent = null; // the last error of an attempt that was sent
  try {
    for (;;) {
      const t0 = performance.now();
      const q = prober.prepare(leaf);
      prepareMs += performance.now() - t0;
      const group = q.group();
      let err;
      let wait = fb.beforeSend(group, performance.now());
      if (wait > 0) {
        await sleep(wait);
        wait = fb.beforeSend(group, performance.now());
      }
      if (wait < 0) {
        err = new Error(`${auditor}: the database's group asked for no requests now (Retry-After)`);
        err.kind = "resting";
      } else {
        const body = q.body();
        const signal = AbortSignal.timeout(fb.timeoutMs(performance.now()));
        const post = (url) =>
          fetchOk(url, { method: "POST", headers: { "content-type": "application/octet-stream" }, body, signal });
        try {
          const url = q.url(auditor);
          let resp;
          try {
            resp = await post(url);
          } catch (e) {
            const named = e.code === "wrong_shard" ? e.shardUrl : null;
            if (!named || !/^https?:\/\/[^/]/.test(named) || url.startsWith(`${named}/`)) throw e;
            resp = await post(`${named.replace(/\/+$/, "")}${q.path()}`);
          }
          const answer = new Uint8Array(await resp.arrayBuffer());
          return { q, answer, up: body.length, fallbacks: fb.failures(), prepareMs };
        } catch (e) {
          err = e;
          // fetchOk's errors carry a code or a status; one while reading
          // the body is the browser's own (a timeout, a reset connection).
          err.kind =
            e?.code === "timeout" || e?.name === "TimeoutError"
              ? "timeout"
              : e?.code === "network" || e instanceof TypeError
                ? "unreachable"
                : typeof e?.status === "number"
                  ? fallbackFailure(e.status)
                  : undefined;
        }
      }
      q.free();
      const retryAfter = err.retryAfterMs == null ? undefined : String(Math.ceil(err.retryAfterMs / 1000));
      if (!err.kind || !fb.failed(group, err.kind, retryAfter, performance.now())) {
        if (err.kind === "resting" && lastSent) err = lastSent;
        if (err.kind) err.message += ` (${fb.failures()} attempts failed: ${fb.reasons()})`;
        if (overloaded(err) && err.retryAfterMs != null && err.retryAfterMs > RETRY_IN_ROUND_MAX_S * 1000) {
          err.retryUntil = Date.now() + err.retryAfterMs;
        }
        throw err;
      }
      if (err.kind !== "resting") lastSent = err;
    }
  } finally {
    fb.free();
  }
}

// Records one audit: the day's usage, the recent audits and the running
// sums of the timings.
async function recordAudit(a) {
  await addUsage(a.at, { audits: 1, logged: a.logged ? 1 : 0, up: a.up, down: a.down });
  const { audits } = await api.storage.local.get("audits");
  await api.storage.local.set({ audits: [...(audits ?? []), a].slice(-RECENT_AUDITS) });
  const { status } = await api.storage.local.get("status");
  const p = status?.perf ?? { audits: 0, prepareMs: 0, fetchMs: 0, decodeMs: 0, up: 0, down: 0 };
  await updateStatus({
    perf: {
      audits: p.audits + 1,
      prepareMs: p.prepareMs + a.prepareMs,
      fetchMs: p.fetchMs + a.fetchMs,
      decodeMs: p.decodeMs + a.decodeMs,
      up: p.up + a.up,
      down: p.down + a.down,
    },
  });
}

// Drops queue entries older than QUEUE_MAX_AGE_DAYS; returns how many.
async function expireQueue(now) {
  const raw = await loadQueue();
  if (!raw) return 0;
  const q = JSON.parse(raw);
  const maxAge = QUEUE_MAX_AGE_DAYS * 86400 * 1000;
  const keep = q.items.filter((i) => now - i.queued_at_ms <= maxAge);
  const expired = q.items.length - keep.length;
  if (expired) {
    q.items = keep;
    await api.storage.local.set({ queue: JSON.stringify(q) });
    await addCounters({ expired });
    await saveSchedule();
  }
  return expired;
}

// One round against the current epoch: exactly ROUND_SIZE queries, audits
// that are due and canaries in random order (schedule.js). A query that
// fails (after its fallback attempts, postQuery) is counted and the round
// goes on; an overloaded auditor's long Retry-After ends it.
async function round(auditor, st, counts) {
  let m = await fetchManifest(auditor, st);
  counts.epoch = m.prober.epoch();
  let refetched = false;
  try {
    const now = Date.now();
    const raw = await loadQueue();
    const items = queueItems(raw);
    const { schedule } = await api.storage.local.get("schedule");
    const due = JSON.parse(queueReady(raw, m.bytes, now))
      .map((i) => items[i])
      .filter((i) => (schedule?.[itemKey(i)] ?? 0) <= now)
      .map(itemKey);
    for (const slot of roundSlots(due)) {
      const canary = slot.kind === "canary";
      const leaf = canary ? canaryLeaf() : slot.key.split("/")[0];
      const t1 = performance.now();
      counts.queries++;
      let q = null;
      try {
        const sent = await postQuery(m.prober, leaf, auditor);
        q = sent.q;
        if (sent.fallbacks) {
          counts.retried++;
          counts.fallbacks += sent.fallbacks;
        }
        const answer = sent.answer;
        const t2 = performance.now();
        const logged = q.decode(answer);
        const t3 = performance.now();
        const at = Date.now();
        if (canary) {
          st.canaries = canaryRecord(st.canaries, auditor, q.epoch(), m.prober.fillRatio(), logged);
          counts.canaries++;
          await addUsage(at, { canaries: 1, up: sent.up, down: answer.length });
          continue;
        }
        let queue = await loadQueue();
        const index = queueItems(queue).findIndex((i) => itemKey(i) === slot.key);
        if (index < 0) continue; // removed meanwhile (cleared, expired)
        const item = queueItems(queue)[index];
        const out = JSON.parse(queueRecord(queue, index, logged, q.epoch(), q.filter(), auditor, at));
        queue = out.queue;
        await api.storage.local.set({ queue });
        await recordAudit({
          at,
          auditor,
          epoch: q.epoch(),
          filter: q.filter(),
          leaf_hash: item.leaf_hash,
          logged,
          // browser-client's verdict.rs: LOGGED with its odds, NOT FOUND
          // certain for the epoch's filters, the log or the auditor at fault
          message: m.prober.verdict(logged, out.report?.not_found_in_epochs ?? []),
          fillRatio: m.prober.fillRatio(),
          fillRatioMeasured: m.prober.fillRatioMeasured(),
          recheck: item.not_found_in !== null && item.not_found_in !== undefined,
          report: !!out.report,
          prepareMs: sent.prepareMs,
          fetchMs: t2 - t1 - sent.prepareMs,
          decodeMs: t3 - t2,
          up: sent.up,
          down: answer.length,
        });
        counts.audited++;
        counts[logged ? "logged" : "notFound"]++;
        if (out.report) {
          const { reports } = await api.storage.local.get("reports");
          await api.storage.local.set({ reports: [...(reports ?? []), out.report] });
          counts.reports++;
        }
      } catch (e) {
        counts.failed++;
        counts.lastQueryError = message(e);
        if (e.retryUntil) {
          st.retryUntil = e.retryUntil;
          break;
        }
        if (e.code === "unknown_epoch" && !refetched) {
          // a new epoch was published since the manifest was fetched
          refetched = true;
          m.prober.free();
          m = await fetchManifest(auditor, st);
          counts.epoch = m.prober.epoch();
        }
      } finally {
        q?.free();
      }
    }
  } finally {
    m.prober.free();
  }
}

// Schedules the next round: a random gap from now, not before the
// auditor's Retry-After.
async function scheduleNextRound(st) {
  let when = Date.now() + roundGapMs();
  if (st.retryUntil && st.retryUntil > when) when = st.retryUntil + uniform() * 60 * 1000;
  st.nextRoundAt = when;
  await api.alarms.create("audit", { when });
}

// A round, from the alarm or the user (popup, options page). Returns the
// counts; throws when it could not run or every query failed.
async function runAudits() {
  await wasmReady;
  const config = await getConfig();
  if (!isActive(config)) throw new Error("not set up: choose an auditor and agree on the first-run page");
  const auditor = auditorBase(config);
  return serial(async () => {
    const st = await ensureAuditorState(auditor);
    const now = Date.now();
    const counts = {
      epoch: null, queries: 0, audited: 0, logged: 0, notFound: 0, reports: 0,
      canaries: 0, failed: 0, retried: 0, fallbacks: 0, lastQueryError: null,
    };
    let error = null;
    // Expiry does not wait for the auditor: an auditor that stays down
    // does not keep SCTs (and the sites they came from) for ever.
    await expireQueue(now);
    if (st.retryUntil && now < st.retryUntil) {
      error = `the auditor asked for no requests before ${iso(st.retryUntil)} (Retry-After): the next round waits`;
    } else {
      st.retryUntil = null;
      try {
        await round(auditor, st, counts);
      } catch (e) {
        error = message(e);
      }
    }
    const answered = counts.queries - counts.failed;
    if (!error && counts.failed) error = `${counts.failed} of ${counts.queries} queries failed; last: ${counts.lastQueryError}`;
    st.rounds++;
    st.lastRoundAt = Date.now();
    if (answered > 0) st.lastSuccessAt = st.lastRoundAt;
    st.lastError = error;
    st.canaryCheck = JSON.parse(canaryCheck(st.canaries));
    await scheduleNextRound(st);
    await saveAuditorState(st);
    const pending = queueItems(await loadQueue()).length;
    await addCounters({
      audited: counts.audited, logged: counts.logged, notFound: counts.notFound,
      reports: counts.reports, canaries: counts.canaries, failedQueries: counts.failed,
    });
    await updateStatus({ lastRunAt: st.lastRoundAt, lastEpoch: counts.epoch, lastRun: counts, pending, lastError: error });
    await saveHosts();
    await saveSchedule();
    await updateBadge();
    if (error && answered === 0) throw new Error(error);
    return counts;
  });
}

function runAuditsLogged() {
  runAudits().catch((e) => console.warn("ct-auditor:", e));
}

// ---- The popup ------------------------------------------------------------

// Why a queued item waits when there is no manifest to ask queueStatus.
function stateWithoutManifest(item, now) {
  const due = item.sct_timestamp_ms + item.mmd_s * 1000;
  return now < due ? { state: "mmd", due_ms: due } : { state: "no_manifest" };
}

// Base64 LogID -> the log list's description (messages name logs by it).
function logNames(text) {
  const names = {};
  try {
    for (const op of JSON.parse(text ?? "{}").operators ?? []) {
      for (const l of [...(op.logs ?? []), ...(op.tiled_logs ?? [])]) {
        if (typeof l.log_id === "string" && typeof l.description === "string") names[l.log_id] = l.description;
      }
    }
  } catch (_) {
    /* no names: messages use the LogIDs */
  }
  return names;
}

// The fill ratio the epoch states, and how many canaries flag an all-ones
// or all-zeros auditor at that ratio.
function confidenceOf(manifestText) {
  const prober = new Prober(new TextEncoder().encode(manifestText));
  try {
    const fillRatio = prober.fillRatio();
    return {
      epoch: prober.epoch(),
      fillRatio,
      stated: prober.fillRatioMeasured(),
      onesFlaggedAfter: canariesToFlag(fillRatio, true) ?? null,
      zerosFlaggedAfter: canariesToFlag(fillRatio, false) ?? null,
    };
  } finally {
    prober.free();
  }
}

// Where one SCT (by leaf hash) stands, from the queue, audits and reports.
function standing(leafHash, ctx) {
  const report = ctx.reports.find((r) => r.leaf_hash === leafHash);
  if (report) {
    const sent = ctx.reportsSent?.[leafHash];
    return sent && !sent.error
      ? { state: "reported", text: `NOT FOUND in epochs ${report.not_found_in_epochs.join(" and ")}: reported to ${sent.auditor} (${sent.result})` }
      : { state: "report_ready", text: `NOT FOUND in epochs ${report.not_found_in_epochs.join(" and ")}: the log or the auditor misbehaved; report ready to send (not sent)` };
  }
  const i = ctx.queue.findIndex((q) => q.leaf_hash === leafHash);
  if (i >= 0) return { state: ctx.queue[i].state, text: ctx.queue[i].message ?? ctx.queue[i].state };
  const audit = [...ctx.audits].reverse().find((a) => a.leaf_hash === leafHash);
  if (audit) return { state: audit.logged ? "logged" : "not_found", text: audit.message };
  return null;
}

// Everything the popup shows, in one answer; `tabId` selects the "this site" view.
async function popupState(tabId) {
  await wasmReady;
  const now = Date.now();
  const got = await api.storage.local.get([
    "config", "status", "reports", "reportsSent", "manifest", "usage", "audits", "hosts", "logList", "auditorState", "schedule",
  ]);
  const config = { ...DEFAULT_CONFIG, ...(got.config ?? {}) };
  const auditor = auditorBase(config);
  const active = isActive(config);
  const st = active && got.auditorState?.auditor === auditor ? got.auditorState : null;
  const raw = await loadQueue();
  const items = queueItems(raw);
  const manifest = got.manifest && got.manifest.auditor === auditor ? got.manifest : null;
  let states = null;
  let confidence = null;
  if (manifest) {
    try {
      confidence = confidenceOf(manifest.text);
      if (items.length) {
        const names = JSON.stringify(logNames(got.logList?.text));
        states = JSON.parse(queueStatus(raw, new TextEncoder().encode(manifest.text), now, names));
      }
    } catch (e) {
      console.warn("ct-auditor: queueStatus:", e);
    }
  }
  const hosts = got.hosts ?? {};
  const week = { audits: 0, logged: 0, canaries: 0, bytes: 0, since: dayKey(now - WEEK_MS + 86400 * 1000) };
  for (const [day, u] of Object.entries(got.usage?.days ?? {})) {
    if (day >= week.since) {
      week.audits += u.audits;
      week.logged += u.logged ?? 0;
      week.canaries += u.canaries ?? 0;
      week.bytes += u.up + u.down;
    }
  }
  const recent = (got.audits ?? []).filter((a) => now - a.at < WEEK_MS && a.auditor === auditor);
  const queue = items.map((it, i) => {
    const s = states?.[i] ?? stateWithoutManifest(it, now);
    const notBefore = got.schedule?.[itemKey(it)] ?? 0;
    // Ready against the epoch but inside its random delay from the visit.
    const delayed = s.state === "ready" && notBefore > now;
    return {
      host: hosts[it.leaf_hash] ?? null,
      leaf_hash: it.leaf_hash,
      log_id: it.log_id,
      sct_timestamp_ms: it.sct_timestamp_ms,
      queued_at_ms: it.queued_at_ms,
      not_found_in: it.not_found_in ?? null,
      not_before_ms: notBefore,
      ...s,
      ...(delayed
        ? { state: "delay", message: `pending: audited in a round after ${new Date(notBefore).toLocaleString()} (a random delay from the visit, so that the audit's time says nothing about it)` }
        : {}),
    };
  });
  const reports = (got.reports ?? []).map((r) => ({
    host: hosts[r.leaf_hash] ?? null,
    leaf_hash: r.leaf_hash,
    log_id: r.log_id,
    reported_at_ms: r.reported_at_ms,
    not_found_in_epochs: r.not_found_in_epochs,
    auditor: r.auditor,
    sent: got.reportsSent?.[r.leaf_hash] ?? null,
  }));
  let site = null;
  if (typeof tabId === "number") site = await siteState(tabId, { queue, audits: got.audits ?? [], reports: got.reports ?? [], reportsSent: got.reportsSent, active });
  return {
    active,
    auditor,
    epoch: confidence?.epoch ?? null,
    confidence,
    canaries: st?.canaryCheck ?? null,
    manifestFetchedAt: manifest?.fetchedAt ?? null,
    readsConnections: CAN_READ_CONNECTIONS,
    testingSampleAll: config.testingSampleAll === true,
    week,
    queue,
    notFound: recent.filter((a) => !a.logged).map((a) => ({ ...a, host: hosts[a.leaf_hash] ?? null })),
    reports,
    unauditable: {
      badSignature: got.status?.sctsBadSignature ?? 0,
      unknownLog: got.status?.sctsUnknownLog ?? 0,
      last: got.status?.lastUnauditable ?? null,
    },
    expired: got.status?.expired ?? 0,
    rounds: st?.rounds ?? 0,
    lastRunAt: st?.lastRoundAt ?? null,
    lastSuccessAt: st?.lastSuccessAt ?? null,
    since: st?.since ?? null,
    stalled: st ? stalled(st, now) : false,
    stallHours: STALL_HOURS,
    retryUntil: st?.retryUntil && st.retryUntil > now ? st.retryUntil : null,
    nextRoundAt: st?.nextRoundAt ?? null,
    lastError: st?.lastError ?? null,
    roundSize: ROUND_SIZE,
    site,
  };
}

// The "this site" view: the SCTs of the certificate the tab's page came
// with (read when the page loaded, kept in memory only) and where each
// stands.
async function siteState(tabId, ctx) {
  const tab = tabCerts.get(tabId);
  if (!tab) return { host: null, known: false };
  const out = { host: tab.host, known: true, scts: [] };
  if (!ctx.active) return out;
  let checked = [];
  try {
    checked = JSON.parse(inspect(new Uint8Array(tab.leaf), new Uint8Array(tab.issuer), await getLogList(), undefined));
  } catch (e) {
    out.error = message(e);
    return out;
  }
  for (const c of checked) {
    const where =
      c.signature?.status !== "valid"
        ? { state: "not_auditable", text: `not audited: ${c.signature?.message ?? c.signature?.status}` }
        : standing(c.leaf_hash, ctx) ?? {
            state: "not_sampled",
            text: "not audited: this visit was not among the connections sampled (1 in 1000)",
          };
    out.scts.push({ log: c.log_description ?? c.log_id, timestamp_ms: c.timestamp_ms, leaf_hash: c.leaf_hash, ...where });
  }
  return out;
}

// The fields of a report as POST /v1/reports takes it (audit-proto's
// MisbehaviourReport; the auditor refuses unknown fields).
const REPORT_FIELDS = [
  "version", "log_id", "sct_timestamp_ms", "mmd_s", "sct", "kind", "chain",
  "leaf_hash", "not_found_in_epochs", "auditor", "reported_at_ms",
];

// Whether the user granted the optional "browsingActivity" data collection
// (asked for at the popup's click); null where this browser has no data
// collection permissions (the click is then the consent).
async function browsingActivityGranted() {
  try {
    return await api.permissions.contains({ data_collection: ["browsingActivity"] });
  } catch (_) {
    return null;
  }
}

// Sends the stored report of `leafHash` to the auditor that made it, only
// when the user asked for it (`consent`: the popup's button) and granted
// the browsingActivity data collection: the report names the site's
// certificate, which an audit never reveals. Records the outcome in
// reportsSent.
async function sendReport(leafHash, consent) {
  if (consent !== true) throw new Error("a report is sent only when the user asks for it in the popup");
  if ((await browsingActivityGranted()) === false) {
    throw new Error("not sent: sending a report shares browsing activity, and that permission was not granted");
  }
  const { reports } = await api.storage.local.get("reports");
  const report = (reports ?? []).find((r) => r.leaf_hash === leafHash);
  if (!report) throw new Error(`no report for ${leafHash}`);
  const auditor = report.auditor.replace(/\/+$/, "");
  const body = {};
  for (const k of REPORT_FIELDS) body[k] = report[k];
  const url = `${auditor}/v1/reports`;
  let outcome;
  try {
    const resp = await fetchOk(url, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    const receipt = await resp.json();
    outcome = { at: Date.now(), auditor, result: receipt.duplicate ? "already reported" : "received" };
  } catch (e) {
    outcome = { at: Date.now(), auditor, error: message(e) };
  }
  await serial(async () => {
    const { reportsSent } = await api.storage.local.get("reportsSent");
    await api.storage.local.set({ reportsSent: { ...(reportsSent ?? {}), [leafHash]: outcome } });
  });
  await updateBadge();
  if (outcome.error) throw new Error(outcome.error);
  return outcome;
}

// ---- Events ---------------------------------------------------------------

api.alarms.onAlarm.addListener((alarm) => {
  if (alarm.name === "audit") runAuditsLogged();
});

// Keeps the next round scheduled while set up: at the stored time if it is
// still ahead, else at a random time within the next hour (a browser that
// was closed at round time does not start a round on every start).
async function ensureAlarm() {
  const config = await getConfig();
  if (!isActive(config)) {
    await api.alarms.clear("audit");
    return;
  }
  if (await api.alarms.get("audit")) return;
  await serial(async () => {
    const st = await ensureAuditorState(auditorBase(config));
    const now = Date.now();
    let when = st.nextRoundAt && st.nextRoundAt > now ? st.nextRoundAt : now + (5 + uniform() * 55) * 60 * 1000;
    if (st.retryUntil && st.retryUntil > when) when = st.retryUntil;
    st.nextRoundAt = when;
    await saveAuditorState(st);
    await api.alarms.create("audit", { when });
  });
}

api.runtime.onInstalled.addListener((details) => {
  // The first-run page: the user chooses the auditor and agrees there.
  if (details?.reason === "install") api.tabs?.create?.({ url: api.runtime.getURL("onboarding.html") });
  ensureAlarm();
});
api.runtime.onStartup.addListener(() => {
  ensureAlarm();
});

api.storage.onChanged.addListener((changes, area) => {
  if (area !== "local") return;
  if (changes.config) {
    liveConfig = { ...DEFAULT_CONFIG, ...(changes.config.newValue ?? {}) };
    ensureAlarm().catch((e) => console.warn("ct-auditor:", e));
    updateBadge().catch(() => {});
  }
  if (changes.reports || changes.reportsSent) updateBadge().catch(() => {});
});

function fromBase64(s) {
  return Uint8Array.from(atob(s), (c) => c.charCodeAt(0));
}

// Messages from the extension's pages.
api.runtime.onMessage.addListener((msg, _sender, sendResponse) => {
  const reply = (p) => {
    p.then(
      (value) => sendResponse({ ok: true, value }),
      (e) => sendResponse({ ok: false, error: message(e) }),
    );
    return true; // async response
  };
  switch (msg?.type) {
    case "capabilities":
      sendResponse({ ok: true, value: { readsConnections: CAN_READ_CONNECTIONS } });
      return false;
    case "run-audits":
      return reply(runAudits());
    case "popup-state":
      return reply(popupState(msg.tabId));
    case "send-report":
      // Only the popup's "Send report" button sends this, with consent:
      // true, after the user clicked it and granted browsingActivity.
      return reply(sendReport(msg.leaf_hash, msg.consent));
    case "add-certificate":
      // A certificate the user chose on the options page: all its auditable
      // embedded SCTs are queued.
      return reply(
        enqueueCertificate(fromBase64(msg.leaf), fromBase64(msg.issuer), Infinity, "manual", HOST_ADDED_BY_HAND),
      );
    default:
      return false;
  }
});

// Each start of the background (install, browser start, wake-up after the
// event page was unloaded) is counted once set up.
getConfig().then((c) => {
  if (isActive(c)) serial(() => addCounters({ backgroundStarts: 1 }));
});
ensureAlarm().catch((e) => console.warn("ct-auditor:", e));
updateBadge().catch(() => {});
