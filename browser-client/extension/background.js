// Background of the private CT auditor extension (Chromium: module service
// worker; Firefox: module event page). All CT and PIR work is done by the
// wasm build of browser-client (pkg/, made by build.sh); this file does the
// I/O: storage, fetch, alarms, badge, and — where the browser allows it —
// reading the certificate chain of a connection.
//
// Storage (storage.local):
//   config      {auditorUrl, logListUrl}
//   queue       pending audits, the JSON string of browser-client's PendingQueue
//   reports     misbehaviour reports (array of objects)
//   logList     {url, fetchedAt, text}: cached log list (refreshed daily)
//   status      what the options page shows (last run, counters, last error)

import init, { inspect, queueAdd, queueReady, queueRecord, Prober } from "./pkg/browser_client.js";
import { DEFAULT_CONFIG } from "./config.js";

const api = globalThis.browser ?? globalThis.chrome;
// browser-client/src/policy.rs AuditPolicy::default(): 1/1000 of the
// connections are sampled, 2 SCTs of each are audited.
const SAMPLED_FRACTION = 1 / 1000;
const AUDITS_PER_SAMPLE = 2;
const MANIFEST_PERIOD_MINUTES = 60;
const LOG_LIST_MAX_AGE_MS = 24 * 3600 * 1000;
// Firefox's default HTTP keep-alive timeout (network.http.keep-alive.timeout,
// 115 s): a request to an origin idle for longer most likely opened a new
// TLS connection. webRequest has no notion of connections; see README.
const CONNECTION_IDLE_MS = 115 * 1000;

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

async function updateStatus(patch) {
  const { status } = await api.storage.local.get("status");
  const next = { ...(status ?? {}), ...patch };
  await api.storage.local.set({ status: next });
  return next;
}

function bump(status, key, by = 1) {
  return { [key]: (status?.[key] ?? 0) + by };
}

async function addCounters(counters) {
  const { status } = await api.storage.local.get("status");
  const patch = {};
  for (const [k, v] of Object.entries(counters)) Object.assign(patch, bump(status, k, v));
  return updateStatus(patch);
}

// Per-request counters stay in memory and are written at most every 10 s
// (one storage write per new origin would be wasteful).
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
    }, 10000);
  }
}

// Uniform in [0, 1) from 53 bits of the CSPRNG: which connections are
// audited must not be predictable by a server.
function uniform() {
  const w = crypto.getRandomValues(new Uint32Array(2));
  return ((w[0] >>> 5) * 67108864 + (w[1] >>> 6)) / 9007199254740992;
}

async function fetchOk(url, init) {
  const resp = await fetch(url, init);
  if (!resp.ok) {
    let detail = "";
    try {
      detail = (await resp.json()).error ?? "";
    } catch (_) {
      /* not a JSON error body */
    }
    const e = new Error(`${url}: HTTP ${resp.status} ${detail}`.trim());
    e.status = resp.status;
    e.code = detail;
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

// Adds the auditable embedded SCTs of a certificate to the pending queue:
// at most `limit` of them, chosen uniformly by the wasm side (which also
// deduplicates and caps the queue). Returns the inspect() result for display.
async function enqueueCertificate(leafDer, issuerDer, limit) {
  await wasmReady;
  const logList = await getLogList();
  const checked = JSON.parse(inspect(leafDer, issuerDer, logList, undefined));
  if (checked.length === 0) {
    // No SCT list extension: the site delivers its SCTs by TLS or OCSP,
    // which no extension API exposes.
    await serial(() => addCounters({ sampledWithoutEmbeddedScts: 1 }));
    return { checked, queued: 0 };
  }
  let queued = 0;
  await serial(async () => {
    const raw = await loadQueue();
    const before = raw ? JSON.parse(raw).items.length : 0;
    const next = queueAdd(raw, leafDer, issuerDer, logList, Date.now(), Math.min(limit, 0xffffffff));
    const after = JSON.parse(next).items.length;
    queued = Math.max(0, after - before);
    await api.storage.local.set({ queue: next });
    await addCounters({ queued });
    await updateStatus({ pending: after });
  });
  return { checked, queued };
}

// ---- Reading connections (Firefox only) ---------------------------------

const lastSeen = new Map(); // origin -> last request time (ms)

function isNewConnection(origin, now) {
  const last = lastSeen.get(origin);
  lastSeen.set(origin, now);
  if (lastSeen.size > 5000) {
    for (const [o, t] of lastSeen) if (now - t > CONNECTION_IDLE_MS) lastSeen.delete(o);
  }
  return last === undefined || now - last > CONNECTION_IDLE_MS;
}

async function onSampledSecurityInfo(info) {
  if ((info.state !== "secure" && info.state !== "weak") || !info.certificates || info.certificates.length < 2) {
    await serial(() => addCounters({ sampledWithoutChain: 1 }));
    return;
  }
  const leaf = new Uint8Array(info.certificates[0].rawDER);
  const issuer = new Uint8Array(info.certificates[1].rawDER);
  try {
    await enqueueCertificate(leaf, issuer, AUDITS_PER_SAMPLE);
  } catch (e) {
    const msg = String(e?.message ?? e);
    await serial(async () => (await addCounters({ sampleErrors: 1 }), updateStatus({ lastSampleError: msg })));
  }
}

// Blocking onHeadersReceived listener: getSecurityInfo only works there. For
// the 999/1000 unsampled connections it returns at once; a sampled request
// waits only for getSecurityInfo, the wasm work runs afterwards.
function onHeadersReceived(details) {
  const own = api.runtime.getURL("");
  if ((details.originUrl ?? "").startsWith(own) || (details.documentUrl ?? "").startsWith(own)) return undefined;
  let origin;
  try {
    origin = new URL(details.url).origin;
  } catch (_) {
    return undefined;
  }
  if (!isNewConnection(origin, Date.now())) return undefined;
  countLater("connections");
  if (uniform() >= SAMPLED_FRACTION) return undefined;
  countLater("sampled");
  return api.webRequest
    .getSecurityInfo(details.requestId, { certificateChain: true, rawDER: true })
    .then((info) => {
      onSampledSecurityInfo(info).catch((e) => console.warn("ct-auditor:", e));
    })
    .catch((e) => console.warn("ct-auditor: getSecurityInfo:", e))
    .then(() => undefined);
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

async function fetchManifest(auditor) {
  const resp = await fetchOk(`${auditor}/v1/manifest`, { cache: "no-cache" });
  const bytes = new Uint8Array(await resp.arrayBuffer());
  return { bytes, prober: new Prober(bytes) }; // Prober checks every manifest invariant
}

// One audit round: fetch the manifest, run every ready audit (last index
// first, as queueReady requires), record results, keep reports. The outcome
// (or the error) goes to status for the options page.
async function runAudits() {
  await wasmReady;
  const { auditorUrl } = await getConfig();
  return serial(async () => {
    const counts = { audited: 0, logged: 0, notFound: 0, reports: 0 };
    let epoch = null;
    let error = null;
    try {
      if (!auditorUrl) throw new Error("no auditor URL configured");
      await auditRound(auditorUrl.replace(/\/+$/, ""), counts, (e) => (epoch = e));
    } catch (e) {
      error = String(e?.message ?? e);
    }
    const pending = JSON.parse((await loadQueue()) || '{"items":[]}').items.length;
    await addCounters(counts);
    await updateStatus({ lastRunAt: Date.now(), lastEpoch: epoch, lastRun: counts, pending, lastError: error });
    if (error) throw new Error(error);
    return counts;
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
        const q = m.prober.prepare(item.leaf_hash);
        try {
          let resp;
          try {
            // The database's shard (manifest shard map), else the auditor.
            resp = await fetchOk(q.url(auditor), {
              method: "POST",
              headers: { "content-type": "application/octet-stream" },
              body: q.body(),
            });
          } catch (e) {
            if (e.code !== "unknown_epoch") throw e;
            stale = true; // a new epoch was published since the manifest was fetched
            break;
          }
          const logged = q.decode(new Uint8Array(await resp.arrayBuffer()));
          const out = JSON.parse(queueRecord(queue, i, logged, q.epoch(), q.filter(), auditor, Date.now()));
          queue = out.queue;
          await api.storage.local.set({ queue });
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

api.action.onClicked.addListener(() => api.runtime.openOptionsPage());

api.storage.onChanged.addListener((changes, area) => {
  if (area === "local" && changes.reports) setBadge(changes.reports.newValue ?? []);
});

function fromBase64(s) {
  return Uint8Array.from(atob(s), (c) => c.charCodeAt(0));
}

// Messages from the options page.
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
    case "add-certificate":
      // A certificate the user chose on the options page: all its auditable
      // embedded SCTs are queued.
      return reply(enqueueCertificate(fromBase64(msg.leaf), fromBase64(msg.issuer), Infinity));
    default:
      return false;
  }
});

ensureAlarm();
