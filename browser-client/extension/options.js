// Options page: settings, status, misbehaviour reports, manual certificate import.
// (The toolbar button opens the popup, popup.html, for the daily view.)
import { DEFAULT_CONFIG, checkAuditorUrl, originPattern } from "./config.js";

const api = globalThis.browser ?? globalThis.chrome;
const $ = (id) => document.getElementById(id);

function send(msg) {
  return api.runtime.sendMessage(msg).then((r) => {
    if (!r?.ok) throw new Error(r?.error ?? "no answer from the background");
    return r.value;
  });
}

async function showAccess() {
  const el = $("access");
  el.textContent = "";
  const { config } = await api.storage.local.get("config");
  const c = { ...DEFAULT_CONFIG, ...(config ?? {}) };
  if (!c.consentedAt || !c.auditorUrl) {
    el.className = "warn";
    el.append("Not set up: nothing is sampled, stored or fetched. ");
    const b = document.createElement("button");
    b.textContent = "Set up…";
    b.onclick = () => api.tabs.create({ url: api.runtime.getURL("onboarding.html") });
    el.append(b);
    return;
  }
  const https = await api.permissions.contains({ origins: ["https://*/*"] });
  const auditor = await api.permissions.contains({ origins: [originPattern(c.auditorUrl)] });
  if (https && auditor) return;
  // Firefox grants the manifest's https://*/* at install unless the user
  // revoked it in about:addons; the auditor's origin is asked for at setup.
  el.className = "warn";
  el.append(
    (https ? "" : "Host access to HTTPS sites is not granted: no connection is read. ") +
      (auditor ? "" : `Access to the auditor (${new URL(c.auditorUrl).origin}) is not granted: no round can run. `),
  );
  const b = document.createElement("button");
  b.textContent = "Grant access";
  b.onclick = () => api.permissions.request({ origins: ["https://*/*", originPattern(c.auditorUrl)] }).then(showAccess);
  el.append(b);
}

async function loadSettings() {
  const { config } = await api.storage.local.get("config");
  const c = { ...DEFAULT_CONFIG, ...(config ?? {}) };
  $("auditorUrl").value = c.auditorUrl;
  $("logListUrl").value = c.logListUrl;
  $("testingSampleAll").checked = c.testingSampleAll === true;
  $("testingNoDelay").checked = c.testingNoDelay === true;
  $("testing").open = c.testingSampleAll === true || c.testingNoDelay === true;
}

$("settings").addEventListener("submit", (ev) => {
  ev.preventDefault();
  let auditorUrl;
  try {
    auditorUrl = checkAuditorUrl($("auditorUrl").value);
  } catch (e) {
    $("saved").textContent = e.message;
    return;
  }
  const logListUrl = $("logListUrl").value.trim() || DEFAULT_CONFIG.logListUrl;
  if (!originPattern(logListUrl)) {
    $("saved").textContent = `not a URL: ${logListUrl}`;
    return;
  }
  const testingSampleAll = $("testingSampleAll").checked;
  const testingNoDelay = $("testingNoDelay").checked;
  // The auditor's origin, asked for inside the click (user activation).
  api.permissions
    .request({ origins: [originPattern(auditorUrl)] })
    .then(async (granted) => {
      if (!granted) {
        $("saved").textContent = `not saved: access to ${new URL(auditorUrl).origin} was not granted`;
        return;
      }
      const { config } = await api.storage.local.get("config");
      const next = { ...(config ?? {}), auditorUrl, logListUrl, testingSampleAll, testingNoDelay };
      // Saving an auditor here is the same choice as on the first-run page.
      if (!next.consentedAt) next.consentedAt = Date.now();
      await api.storage.local.set({ config: next });
      $("saved").textContent = "saved";
      setTimeout(() => ($("saved").textContent = ""), 2000);
      showAccess();
    })
    .catch((e) => ($("saved").textContent = e.message));
});

$("withdraw").onclick = async () => {
  if (!confirm("Stop auditing and delete everything the extension stored (queue, reports, counters, settings)?")) return;
  await api.storage.local.clear();
  if (api.storage.session) await api.storage.session.clear();
  location.reload();
};

const STATUS_ROWS = [
  ["pending", "pending audits (waiting for the random delay, the MMD, coverage or a re-check, or from a log the auditor does not track)"],
  ["lastRunAt", "last round"],
  ["lastEpoch", "epoch of the last round"],
  ["lastRun", "last round: queries / audits / logged / not found / reports / canaries / failed"],
  ["lastError", "last error"],
  ["audited", "audits in total"],
  ["logged", "answered LOGGED (probabilistic: a never-logged SCT passes one audit with probability ≈ the epoch's fill ratio, ≈ 0.12; the popup shows the epoch's)"],
  ["notFound", "answered NOT FOUND (certain for that epoch's filters: the log or the auditor is at fault; re-checked in a later epoch)"],
  ["canaries", "canaries sent (random leaves no log holds: they check the auditor)"],
  ["failedQueries", "queries that failed (the round went on)"],
  ["expired", "queued SCTs expired unaudited (after 14 days)"],
  ["perf", "per audit (means): query generation / request / extraction; bytes up / down"],
  ["connections", "new connections (first request to an origin after 115 s without one)"],
  ["sampled", "connections sampled"],
  ["queued", "SCTs queued"],
  ["sampledWithoutEmbeddedScts", "sampled certificates without embedded SCTs (SCTs by TLS or OCSP: not auditable)"],
  ["addedWithoutEmbeddedScts", "certificates added by hand without embedded SCTs"],
  ["sctsBadSignature", "embedded SCTs not audited: signature does not verify"],
  ["sctsUnknownLog", "embedded SCTs not audited: log not in the log list"],
  ["lastUnauditable", "last SCT not audited"],
  ["sampleErrors", "sampled certificates that could not be processed"],
  ["sampledWithoutChain", "sampled connections without a certificate chain"],
  ["lastSampleError", "last sampling error"],
  ["backgroundStarts", "background starts (Firefox unloads it when idle)"],
];

function fmt(key, v) {
  if (v === undefined || v === null) return "—";
  if (key === "lastRunAt") return new Date(v).toLocaleString();
  if (key === "lastRun") {
    return `${v.queries ?? "—"} / ${v.audited} / ${v.logged} / ${v.notFound} / ${v.reports} / ${v.canaries ?? 0} / ${v.failed ?? 0}`;
  }
  if (key === "perf") {
    if (!v.audits) return "—";
    const ms = (x) => `${(x / v.audits).toFixed(0)} ms`;
    const kb = (x) => `${(x / v.audits / 1024).toFixed(1)} KiB`;
    return `${ms(v.prepareMs)} / ${ms(v.fetchMs)} / ${ms(v.decodeMs)}; ${kb(v.up)} / ${kb(v.down)} (${v.audits} audits)`;
  }
  if (key === "lastUnauditable") {
    return `${new Date(v.at).toLocaleString()}, ${v.host ?? "?"} (${v.source}): ${v.log}: ${v.reason}`;
  }
  return String(v);
}

async function showStatus() {
  const { status } = await api.storage.local.get("status");
  const t = $("status");
  t.textContent = "";
  for (const [key, label] of STATUS_ROWS) {
    const tr = t.insertRow();
    tr.insertCell().textContent = label;
    tr.insertCell().textContent = fmt(key, status?.[key]);
  }
}

async function showReports() {
  const { reports } = await api.storage.local.get("reports");
  const el = $("reports");
  el.textContent = "";
  if (!reports?.length) {
    el.textContent = "None.";
    return;
  }
  const t = document.createElement("table");
  const h = t.insertRow();
  for (const s of ["reported", "log id", "SCT time", "leaf hash", "not found in epochs", "auditor"]) {
    const th = document.createElement("th");
    th.textContent = s;
    h.append(th);
  }
  for (const r of reports) {
    const tr = t.insertRow();
    for (const v of [
      new Date(r.reported_at_ms).toLocaleString(),
      r.log_id,
      new Date(r.sct_timestamp_ms).toISOString(),
      r.leaf_hash,
      r.not_found_in_epochs.join(", "),
      r.auditor,
    ]) tr.insertCell().textContent = v;
  }
  el.append(t);
}

$("download").onclick = async () => {
  const { reports } = await api.storage.local.get("reports");
  const blob = new Blob([JSON.stringify(reports ?? [], null, 2)], { type: "application/json" });
  const a = document.createElement("a");
  a.href = URL.createObjectURL(blob);
  a.download = "ct-misbehaviour-reports.json";
  a.click();
  URL.revokeObjectURL(a.href);
};

$("clear").onclick = async () => {
  if (confirm("Delete all misbehaviour reports?")) await api.storage.local.set({ reports: [] });
};

$("runNow").onclick = async () => {
  $("runResult").textContent = "running…";
  try {
    const c = await send({ type: "run-audits" });
    $("runResult").textContent =
      `${c.queries} queries: ${c.audited} audits (${c.logged} LOGGED, ${c.notFound} NOT FOUND, ${c.reports} reports), ` +
      `${c.canaries} canaries, ${c.failed} failed`;
  } catch (e) {
    $("runResult").textContent = e.message;
  }
};

function pemOrDerToBase64(bytes) {
  const text = new TextDecoder("latin1").decode(bytes);
  const m = text.match(/-----BEGIN CERTIFICATE-----([\s\S]*?)-----END CERTIFICATE-----/);
  if (m) return m[1].replace(/\s+/g, "");
  let s = "";
  for (const b of bytes) s += String.fromCharCode(b);
  return btoa(s);
}

async function readFile(input) {
  const f = input.files?.[0];
  if (!f) throw new Error(`choose a file for “${input.previousElementSibling.textContent}”`);
  return pemOrDerToBase64(new Uint8Array(await f.arrayBuffer()));
}

$("addCert").onclick = async () => {
  const out = $("addResult");
  out.hidden = false;
  try {
    const leaf = await readFile($("leafFile"));
    // The issuer is needed only to rebuild the leaf of embedded SCTs; the
    // background says so if they need it.
    const issuer = $("issuerFile").files?.[0] ? await readFile($("issuerFile")) : "";
    const r = await send({ type: "add-certificate", leaf, issuer });
    const lines = r.checked.length
      ? r.checked.map((c) => `${c.log_description ?? c.log_id}: ${c.signature.message}`)
      : ["The certificate has no embedded SCTs: its SCTs, if any, come by TLS or OCSP, which extensions cannot read."];
    out.textContent = `queued ${r.queued} SCT(s)\n${lines.join("\n")}\n\n` + JSON.stringify(r.checked, null, 2);
  } catch (e) {
    out.textContent = e.message;
  }
};

async function showCapabilities() {
  const c = await send({ type: "capabilities" });
  $("capabilities").textContent = c.readsConnections
    ? "This browser exposes connection certificates (webRequest.getSecurityInfo): 1/1000 of new connections are sampled automatically."
    : "This browser does not expose connection certificates to extensions: only certificates added by hand below are audited.";
}

api.storage.onChanged.addListener((changes, area) => {
  if (area !== "local") return;
  if (changes.status) showStatus();
  if (changes.config) showAccess();
  if (changes.reports) showReports();
});

loadSettings();
showAccess();
showStatus();
showReports();
showCapabilities().catch((e) => ($("capabilities").textContent = e.message));
