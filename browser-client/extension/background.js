// Background of the private CT auditor extension (Chromium: module service
// worker; Firefox: module event page). All CT and PIR work is done by the
// wasm build of browser-client (pkg/, made by build.sh); this file does the
// I/O: storage, fetch, alarms, badge, and — where the browser allows it —
// reading the certificate chain of a connection.
//
// Storage (storage.local):
//   config      {auditorUrl, logListUrl, testingSampleAll}
//   queue       pending audits, the JSON string of browser-client's PendingQueue
//   reports     misbehaviour reports (array of objects, the wire form of
//               POST /v1/reports)
//   reportsSent leaf hash -> {at, auditor, result} for reports the user chose
//               to send (popup button), or {at, auditor, error}
//   logList     {url, fetchedAt, text}: cached log list (refreshed daily)
//   manifest    {auditor, fetchedAt, text}: the last manifest (for the popup)
//   usage       {days: {"YYYY-MM-DD": {audits, logged, manifests, up, down}}}: the last 8 days
//   audits      the last audits (time, epoch, result and its sentence with the
//               epoch's fill ratio, timings, bytes)
//   hosts       leaf hash -> host name it was seen on (for the popup)
//   status      what the options page shows (last run, counters, last error)
// Storage (storage.session, kept while the browser runs, across unloads of
// the event page):
//   seen        origin -> time of its last request (the connection rule)

import init, { inspect, queueAdd, queueReady, queueRecord, queueStatus, Prober } from "./pkg/browser_client.js";
import { DEFAULT_CONFIG } from "./config.js";

const api = globalThis.browser ?? globalThis.chrome;
// browser-client/src/policy.rs AuditPolicy::default(): 1/1000 of the
// connections are sampled, 2 SCTs of each are audited.
const SAMPLED_FRACTION = 1 / 1000;
const AUDITS_PER_SAMPLE = 2;
const MANIFEST_PERIOD_MINUTES = 60;
const LOG_LIST_MAX_AGE_MS = 24 * 3600 * 1000;
// The connection rule: a request to an origin that had no request for
// 115 s (Firefox's default HTTP keep-alive timeout,
// network.http.keep-alive.timeout) most likely opened a new TLS connection.
// webRequest has no notion of connections; see README ("Sampling") for what
// this really counts.
const CONNECTION_IDLE_MS = 115 * 1000;
const SEEN_MAX = 5000;
// Per-request state is written at most once a second: often enough that an
// unload of the event page (after 30 s idle by default) loses nothing.
const FLUSH_MS = 1000;
const RECENT_AUDITS = 50;
const USAGE_DAYS = 8;
const WEEK_MS = 7 * 86400 * 1000;
const HOST_ADDED_BY_HAND = "(added by hand)";

// No top-level await: Chromium refuses it in service workers.
const wasmReady = init();

// Every read-modify-write of the queue, reports and status goes through
// this chain, so that audits and new connections never interleave.
let chain = Promise.resolve();
function serial(fn) {
  const p = chain.then(fn);
  chain = p.catch(() => {});
  return p;
}

async function getConfig() {
  const { config } = await api.storage.local.get("config");
  return { ...DEFAULT_CONFIG, ...(config ?? {}) };
}

function auditorBase(config) {
  return (config.auditorUrl ?? "").replace(/\/+$/, "");
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

// Per-request counters stay in memory and are written at most every
// FLUSH_MS (one storage write per request would be wasteful).
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

// Uniform in [0, 1) from 53 bits of the CSPRNG: which connections are
// audited must not be predictable by a server.
function uniform() {
  const w = crypto.getRandomValues(new Uint32Array(2));
  return ((w[0] >>> 5) * 67108864 + (w[1] >>> 6)) / 9007199254740992;
}

// A fetch that failed before any response (refused, unreachable, blocked):
// the browser's message names nothing ("NetworkError when attempting to
// fetch resource."), so the error says which URL and what to check.
async function networkError(url, e) {
  let hint = "check that the server runs and is reachable from this browser";
  try {
    const origin = new URL(url).origin;
    if (/^https?:$/.test(new URL(url).protocol) && typeof api.permissions?.contains === "function") {
      const granted = await api.permissions.contains({ origins: [`${origin}/*`] });
      if (!granted) {
        hint =
          `the extension has no host access to ${origin}: grant it on the options page ` +
          "or in about:addons → Private CT auditor → Permissions";
      }
    }
  } catch (_) {
    /* keep the generic hint */
  }
  const err = new Error(`${url}: network error (${String(e?.message ?? e).trim()}); ${hint}`);
  err.code = "network";
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
    throw e;
  }
  return resp;
}

// The log list, cached for a day (the SCT signatures are checked against it).
async function getLogList() {
  const config = await getConfig();
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

// Keeps the host names of the leaf hashes still in the queue, in a report
// or among the recent audits; adds `more` (a name already known stays: a
// certificate seen on a site and later added by hand keeps the site).
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

// Inspects a certificate's embedded SCTs and adds the auditable ones to the
// pending queue: at most `limit` of them, chosen uniformly by the wasm side
// (which also deduplicates and caps the queue). `source` is "sampled" (a
// connection) or "manual" (the options page); `host` names where it was
// seen. SCTs that cannot be audited (signature does not verify, log not in
// the log list) are counted and the last one kept in the status. Returns
// the inspect() result and the number queued.
async function enqueueCertificate(leafDer, issuerDer, limit, source, host) {
  await wasmReady;
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
      // browser-client's sentence for people (sct.rs, Signature)
      reason: c.signature?.message ?? (unknown ? "the log is not in the log list" : "the signature does not verify"),
    };
  }
  let queued = 0;
  await serial(async () => {
    if (checked.some((c) => c.signature?.status === "valid")) {
      const raw = await loadQueue();
      const before = queueItems(raw);
      const next = queueAdd(raw, leafDer, issuerDer, logList, Date.now(), Math.min(limit, 0xffffffff));
      const after = queueItems(next);
      const known = new Set(before.map((i) => i.leaf_hash));
      const added = after.filter((i) => !known.has(i.leaf_hash));
      queued = added.length;
      await api.storage.local.set({ queue: next });
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
// origin, the time of its last request. The latter lives in
// storage.session, so that it survives the event page being unloaded when
// idle (it is lost when the browser quits, like the connections).
let liveConfig = { ...DEFAULT_CONFIG };
let seen = null; // Map origin -> ms, most recent last; null until loaded
const sessionArea = api.storage.session ?? null;
const stateReady = (async () => {
  let stored = {};
  try {
    liveConfig = await getConfig();
    if (sessionArea) stored = (await sessionArea.get("seen")).seen ?? {};
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
    const msg = `${host}: ${String(e?.message ?? e)}`;
    await serial(async () => (await addCounters({ sampleErrors: 1 }), updateStatus({ lastSampleError: msg })));
  }
}

function decide(details, url) {
  if (!isNewConnection(url.origin, Date.now())) return undefined;
  countLater("connections");
  // testingSampleAll (options page, "Testing"): every new connection is
  // sampled, for tests that need a deterministic draw.
  const fraction = liveConfig.testingSampleAll === true ? 1 : SAMPLED_FRACTION;
  if (uniform() >= fraction) return undefined;
  countLater("sampled");
  return api.webRequest
    .getSecurityInfo(details.requestId, { certificateChain: true, rawDER: true })
    .then((info) => {
      onSampledSecurityInfo(info, url.hostname).catch((e) => console.warn("ct-auditor:", e));
    })
    .catch((e) => console.warn("ct-auditor: getSecurityInfo:", e))
    .then(() => undefined);
}

// Blocking onHeadersReceived listener: getSecurityInfo only works there. For
// the 999/1000 unsampled connections it returns at once (after a wake-up,
// the first requests wait for the state to load from storage.session); a
// sampled request waits only for getSecurityInfo, the wasm work runs
// afterwards.
function onHeadersReceived(details) {
  const own = api.runtime.getURL("");
  if ((details.originUrl ?? "").startsWith(own) || (details.documentUrl ?? "").startsWith(own)) return undefined;
  let url;
  try {
    url = new URL(details.url);
  } catch (_) {
    return undefined;
  }
  if (seen === null) return stateReady.then(() => decide(details, url));
  return decide(details, url);
}

const CAN_READ_CONNECTIONS = typeof api.webRequest?.getSecurityInfo === "function";
if (CAN_READ_CONNECTIONS) {
  api.webRequest.onHeadersReceived.addListener(onHeadersReceived, { urls: ["https://*/*"] }, ["blocking"]);
}

// ---- Audits -------------------------------------------------------------

async function setBadge(reports) {
  const n = reports.length;
  await api.action.setBadgeText({ text: n ? String(n) : "" });
  if (n) await api.action.setBadgeBackgroundColor({ color: "#c00000" });
}

// UTC day of a time, "YYYY-MM-DD".
function dayKey(ms) {
  return new Date(ms).toISOString().slice(0, 10);
}

async function addUsage(now, patch) {
  const { usage } = await api.storage.local.get("usage");
  const days = { ...(usage?.days ?? {}) };
  const d = { audits: 0, logged: 0, manifests: 0, up: 0, down: 0, ...(days[dayKey(now)] ?? {}) };
  for (const [k, v] of Object.entries(patch)) d[k] += v;
  days[dayKey(now)] = d;
  const keep = Object.keys(days).sort().slice(-USAGE_DAYS);
  await api.storage.local.set({ usage: { days: Object.fromEntries(keep.map((k) => [k, days[k]])) } });
}

async function fetchManifest(auditor) {
  const resp = await fetchOk(`${auditor}/v1/manifest`, { cache: "no-cache" });
  const bytes = new Uint8Array(await resp.arrayBuffer());
  const prober = new Prober(bytes); // Prober checks every manifest invariant
  const now = Date.now();
  await api.storage.local.set({ manifest: { auditor, fetchedAt: now, text: new TextDecoder().decode(bytes) } });
  await addUsage(now, { manifests: 1, down: bytes.length });
  return { bytes, prober };
}

// One audit round: fetch the manifest, run every ready audit (last index
// first, as queueReady requires), record results, keep reports. The outcome
// (or the error) goes to status for the options page and the popup.
async function runAudits() {
  await wasmReady;
  const auditor = auditorBase(await getConfig());
  return serial(async () => {
    const counts = { audited: 0, logged: 0, notFound: 0, reports: 0 };
    let epoch = null;
    let error = null;
    try {
      if (!auditor) throw new Error("no auditor URL configured (options page)");
      await auditRound(auditor, counts, (e) => (epoch = e));
    } catch (e) {
      error = String(e?.message ?? e);
    }
    const pending = queueItems(await loadQueue()).length;
    await addCounters(counts);
    await updateStatus({ lastRunAt: Date.now(), lastEpoch: epoch, lastRun: counts, pending, lastError: error });
    await saveHosts();
    if (error) throw new Error(error);
    return counts;
  });
}

// Records one audit: counters, the day's usage, the recent audits and the
// running sums of the timings (for the means on the options page).
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

async function auditRound(auditor, counts, setEpoch) {
  for (let attempt = 0; attempt < 2; attempt++) {
    const m = await fetchManifest(auditor);
    let stale = false;
    try {
      setEpoch(m.prober.epoch());
      let queue = await loadQueue();
      const ready = JSON.parse(queueReady(queue, m.bytes, Date.now()));
      for (const i of ready.reverse()) {
        const item = JSON.parse(queue).items[i];
        const t0 = performance.now();
        const q = m.prober.prepare(item.leaf_hash);
        const t1 = performance.now();
        try {
          const body = q.body();
          let resp;
          const post = (url) =>
            fetchOk(url, {
              method: "POST",
              headers: { "content-type": "application/octet-stream" },
              body,
            });
          try {
            // The database's shard (manifest shard map), else the auditor.
            const url = q.url(auditor);
            try {
              resp = await post(url);
            } catch (e) {
              // 421 wrong_shard: once more at the shard the answer names.
              const named = e.code === "wrong_shard" ? e.shardUrl : null;
              if (!named || !/^https?:\/\/[^/]/.test(named) || url.startsWith(`${named}/`)) throw e;
              resp = await post(`${named.replace(/\/+$/, "")}${q.path()}`);
            }
          } catch (e) {
            if (e.code !== "unknown_epoch") throw e;
            stale = true; // a new epoch was published since the manifest was fetched
            break;
          }
          const answer = new Uint8Array(await resp.arrayBuffer());
          const t2 = performance.now();
          const logged = q.decode(answer);
          const t3 = performance.now();
          const now = Date.now();
          const out = JSON.parse(queueRecord(queue, i, logged, q.epoch(), q.filter(), auditor, now));
          queue = out.queue;
          // What the answer means, with its odds (LOGGED) or its certainty
          // (NOT FOUND): browser-client's verdict.rs.
          const message = m.prober.verdict(logged, out.report?.not_found_in_epochs ?? []);
          await api.storage.local.set({ queue });
          await recordAudit({
            at: now,
            epoch: q.epoch(),
            filter: q.filter(),
            leaf_hash: item.leaf_hash,
            logged,
            message,
            fillRatio: m.prober.fillRatio(),
            fillRatioMeasured: m.prober.fillRatioMeasured(),
            recheck: item.not_found_in !== null && item.not_found_in !== undefined,
            report: !!out.report,
            prepareMs: t1 - t0,
            fetchMs: t2 - t1,
            decodeMs: t3 - t2,
            up: body.length,
            down: answer.length,
          });
          counts.audited++;
          counts[logged ? "logged" : "notFound"]++;
          if (out.report) {
            const { reports } = await api.storage.local.get("reports");
            const all = [...(reports ?? []), out.report];
            await api.storage.local.set({ reports: all });
            await setBadge(all);
            counts.reports++;
          }
        } finally {
          q.free();
        }
      }
    } finally {
      m.prober.free();
    }
    if (!stale) return;
  }
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

// Base64 LogID -> the log list's description, from the cached log list
// (messages name logs by it).
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

// How far a LOGGED answer of the epoch in `manifestText` can be trusted:
// the probability that a never-logged SCT passes one audit.
function confidenceOf(manifestText) {
  const prober = new Prober(new TextEncoder().encode(manifestText));
  try {
    return { epoch: prober.epoch(), fillRatio: prober.fillRatio(), measured: prober.fillRatioMeasured() };
  } finally {
    prober.free();
  }
}

// Everything the popup shows, in one answer.
async function popupState() {
  await wasmReady;
  const now = Date.now();
  const got = await api.storage.local.get([
    "config", "status", "reports", "reportsSent", "manifest", "usage", "audits", "hosts", "logList",
  ]);
  const config = { ...DEFAULT_CONFIG, ...(got.config ?? {}) };
  const auditor = auditorBase(config);
  const raw = await loadQueue();
  const items = queueItems(raw);
  const manifest = got.manifest && got.manifest.auditor === auditor ? got.manifest : null;
  let states = null;
  let epoch = null;
  let confidence = null;
  if (manifest) {
    try {
      epoch = JSON.parse(manifest.text).epoch ?? null;
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
  const week = { audits: 0, logged: 0, bytes: 0, since: dayKey(now - WEEK_MS + 86400 * 1000) };
  for (const [day, u] of Object.entries(got.usage?.days ?? {})) {
    if (day >= week.since) {
      week.audits += u.audits;
      week.logged += u.logged ?? 0;
      week.bytes += u.up + u.down;
    }
  }
  const recent = (got.audits ?? []).filter((a) => now - a.at < WEEK_MS);
  return {
    auditor,
    epoch,
    confidence,
    manifestFetchedAt: manifest?.fetchedAt ?? null,
    readsConnections: CAN_READ_CONNECTIONS,
    testingSampleAll: config.testingSampleAll === true,
    week,
    queue: items.map((it, i) => ({
      host: hosts[it.leaf_hash] ?? null,
      leaf_hash: it.leaf_hash,
      log_id: it.log_id,
      sct_timestamp_ms: it.sct_timestamp_ms,
      queued_at_ms: it.queued_at_ms,
      not_found_in: it.not_found_in ?? null,
      ...(states?.[i] ?? stateWithoutManifest(it, now)),
    })),
    notFound: recent.filter((a) => !a.logged).map((a) => ({ ...a, host: hosts[a.leaf_hash] ?? null })),
    reports: (got.reports ?? []).map((r) => ({
      host: hosts[r.leaf_hash] ?? null,
      leaf_hash: r.leaf_hash,
      log_id: r.log_id,
      reported_at_ms: r.reported_at_ms,
      not_found_in_epochs: r.not_found_in_epochs,
      sent: got.reportsSent?.[r.leaf_hash] ?? null,
    })),
    unauditable: {
      badSignature: got.status?.sctsBadSignature ?? 0,
      unknownLog: got.status?.sctsUnknownLog ?? 0,
      last: got.status?.lastUnauditable ?? null,
    },
    lastRunAt: got.status?.lastRunAt ?? null,
    lastError: got.status?.lastError ?? null,
  };
}

// The fields of a report as POST /v1/reports takes it (audit-proto's
// MisbehaviourReport; the auditor refuses unknown fields).
const REPORT_FIELDS = [
  "version", "log_id", "sct_timestamp_ms", "mmd_s", "sct", "kind", "chain",
  "leaf_hash", "not_found_in_epochs", "auditor", "reported_at_ms",
];

// Sends the stored report of `leafHash` to the auditor, only when the user
// asked for it (`consent`: the popup's button): the report names the
// site's certificate, which an audit never reveals. Records the outcome in
// reportsSent.
async function sendReport(leafHash, consent) {
  if (consent !== true) throw new Error("a report is sent only when the user asks for it in the popup");
  const config = await getConfig();
  const auditor = auditorBase(config);
  if (!auditor) throw new Error("no auditor configured");
  const { reports } = await api.storage.local.get("reports");
  const report = (reports ?? []).find((r) => r.leaf_hash === leafHash);
  if (!report) throw new Error(`no report for ${leafHash}`);
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
    outcome = { at: Date.now(), auditor, error: String(e?.message ?? e) };
  }
  await serial(async () => {
    const { reportsSent } = await api.storage.local.get("reportsSent");
    await api.storage.local.set({ reportsSent: { ...(reportsSent ?? {}), [leafHash]: outcome } });
  });
  if (outcome.error) throw new Error(outcome.error);
  return outcome;
}

// ---- Events ---------------------------------------------------------------

api.alarms.onAlarm.addListener((alarm) => {
  if (alarm.name === "audit") runAuditsLogged();
});

async function ensureAlarm() {
  const a = await api.alarms.get("audit");
  if (!a) api.alarms.create("audit", { delayInMinutes: 1, periodInMinutes: MANIFEST_PERIOD_MINUTES });
}

api.runtime.onInstalled.addListener(() => {
  ensureAlarm();
});
api.runtime.onStartup.addListener(() => {
  ensureAlarm();
});

api.storage.onChanged.addListener((changes, area) => {
  if (area !== "local") return;
  if (changes.reports) setBadge(changes.reports.newValue ?? []);
  if (changes.config) liveConfig = { ...DEFAULT_CONFIG, ...(changes.config.newValue ?? {}) };
});

function fromBase64(s) {
  return Uint8Array.from(atob(s), (c) => c.charCodeAt(0));
}

// Messages from the options page and the popup.
api.runtime.onMessage.addListener((msg, _sender, sendResponse) => {
  const reply = (p) => {
    p.then(
      (value) => sendResponse({ ok: true, value }),
      (e) => sendResponse({ ok: false, error: String(e?.message ?? e) }),
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
      return reply(popupState());
    case "send-report":
      // Only the popup's "Send report to the auditor" button sends this,
      // with consent: true, after the user clicked it.
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
// event page was unloaded) is counted: the options page shows it.
serial(() => addCounters({ backgroundStarts: 1 }));
ensureAlarm();
