#!/usr/bin/env node
// The extension in a real Firefox ESR (headless), driven through
// geckodriver's WebDriver HTTP API, against a real auditor:
//
//   node firefox.mjs --auditor URL --data DIR --xpi FILE [--screenshot FILE]
//                    [--report-screenshot FILE] [--work DIR] [--epoch-timeout S]
//                    [--firefox BIN] [--geckodriver BIN]
//
// DIR is demo-server's output: log_list.json and https_sites.json (two
// certificates of the local test log with their keys: one whose embedded
// SCT was logged, one whose SCT the log signed and never logged). This
// script serves both over HTTPS on 127.0.0.1 (one port, picked by SNI),
// makes a fresh Firefox profile that trusts the test CA (certutil), keeps
// Firefox off the network (every host resolves to 127.0.0.1; everything but
// the test hosts and loopback goes to a "proxy" that accepts, records and
// drops), and puts two recording proxies in front of the auditor (A on
// 127.0.0.1, B on localhost: two origins). It installs the built XPI as a
// user of Firefox ESR with signature checks off would (a permanent install,
// xpinstall.signatures.required = false), and then:
//
//  * the first-run page opens; before the user agrees, a visit stores and
//    fetches nothing; the user chooses auditor A and agrees (the page asks
//    for A's origin); host access is HTTPS only;
//  * visiting both pages samples them (testingSampleAll): the queued chain's
//    leaf is the DER the server sent, the leaf hash is the one the log
//    computed; a reload is the same connection, so is a visit after the
//    event page was unloaded;
//  * a round of exactly 4 queries (2 audits, 2 canaries) answers LOGGED for
//    the first page and NOT FOUND for the second; the auditor's /metrics
//    count the answered queries; a 503 with Retry-After: 1 on a query is
//    waited for and the query sent again;
//  * after a later epoch, the re-check yields a misbehaviour report ("ready,
//    not sent": badge 1); the popup (screenshot on every run) shows the
//    auditor's stated and measured fill ratio and the page's SCTs;
//  * changing the auditor to B on the options page asks for B's origin, and
//    B's state starts clean (no canaries of A);
//  * no request left the machine, and the extension talked to nothing but
//    the auditor (and the local log list).
//
// Prints one JSON summary with the timings and bytes measured inside
// Firefox; exits non-zero on any failure.

import { execFileSync, spawn } from "node:child_process";
import { createWriteStream, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import http from "node:http";
import https from "node:https";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import tls from "node:tls";
import { X509Certificate } from "node:crypto";
import { parseArgs } from "node:util";

const { values: args } = parseArgs({
  options: {
    auditor: { type: "string" },
    data: { type: "string" },
    screenshot: { type: "string" },
    xpi: { type: "string" },
    "report-screenshot": { type: "string" },
    work: { type: "string" },
    "epoch-timeout": { type: "string", default: "120" },
    firefox: { type: "string", default: process.env.FIREFOX ?? "firefox-esr" },
    geckodriver: { type: "string", default: process.env.GECKODRIVER ?? "geckodriver" },
  },
});
if (!args.auditor || !args.data || !args.xpi) {
  console.error(
    "usage: firefox.mjs --auditor URL --data DIR --xpi FILE [--screenshot FILE] [--report-screenshot FILE] [--work DIR] [--epoch-timeout S]",
  );
  process.exit(2);
}
const auditor = args.auditor.replace(/\/+$/, "");
const extensionDir = new URL("..", import.meta.url).pathname.replace(/\/$/, "");
const work = args.work ?? mkdtempSync(join(tmpdir(), "ct-extension-firefox."));
mkdirSync(work, { recursive: true });
// The popup's screenshot is taken on every run.
const screenshotFile = args.screenshot ?? join(work, "popup.png");
const EXTENSION_ID = JSON.parse(readFileSync(join(extensionDir, "manifest.json"), "utf8")).browser_specific_settings
  .gecko.id;
// Fixed through extensions.webextensions.uuids, so the test knows the
// extension's origin.
const EXTENSION_UUID = "5f0c7a52-8d3e-4b6a-9c1f-3e2d7b8a9c10";
const EXT = `moz-extension://${EXTENSION_UUID}`;

const failures = [];
const check = (c, what) => (c ? true : (failures.push(what), false));
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const t0 = Date.now();
const log = (...a) => console.error(`firefox.mjs [${((Date.now() - t0) / 1000).toFixed(1)} s]:`, ...a);

// ---- the two HTTPS sites ---------------------------------------------------
const sites = JSON.parse(readFileSync(join(args.data, "https_sites.json"), "utf8"));
const pem = (label, b64) => `-----BEGIN ${label}-----\n${b64.match(/.{1,64}/g).join("\n")}\n-----END ${label}-----\n`;
for (const s of Object.values(sites)) {
  const san = new X509Certificate(Buffer.from(s.cert, "base64")).subjectAltName ?? "";
  s.host = /DNS:([^,\s]+)/.exec(san)?.[1];
  if (!s.host) throw new Error(`no DNS name in ${san}`);
  s.context = tls.createSecureContext({
    cert: pem("CERTIFICATE", s.cert) + pem("CERTIFICATE", s.issuer),
    key: pem("PRIVATE KEY", s.key),
  });
}
const caPem = pem("CERTIFICATE", sites.logged.issuer);
const servedTo = []; // SNI names of the TLS handshakes
const page = (title) => `<!doctype html><meta charset="utf-8"><title>${title}</title><p>${title}</p>`;
const httpsServer = https.createServer(
  {
    cert: pem("CERTIFICATE", sites.logged.cert) + caPem,
    key: pem("PRIVATE KEY", sites.logged.key),
    SNICallback: (name, cb) => {
      servedTo.push(name);
      const s = Object.values(sites).find((x) => x.host === name);
      cb(null, s?.context ?? sites.logged.context);
    },
  },
  (req, res) => {
    const s = Object.values(sites).find((x) => req.headers.host?.startsWith(`${x.host}:`));
    res.writeHead(s ? 200 : 404, { "content-type": "text/html; charset=utf-8", "cache-control": "no-store" });
    res.end(page(s ? `site ${s.host}` : "unknown host"));
  },
);
// Plain HTTP on loopback: the log list.
const logListText = readFileSync(join(args.data, "log_list.json"));
const logListRequests = [];
const httpServer = http.createServer((req, res) => {
  logListRequests.push(`${req.method} ${req.url}`);
  if (req.url === "/log_list.json") {
    res.writeHead(200, { "content-type": "application/json" });
    res.end(logListText);
  } else {
    res.writeHead(404);
    res.end();
  }
});
// The proxy Firefox must not need: it accepts and drops; what reaches it is
// counted (traffic that would have left the machine).
const proxied = [];
const deadProxy = net.createServer((sock) => {
  sock.once("data", (d) => proxied.push(String(d).split("\r\n")[0]));
  setTimeout(() => sock.destroy(), 50);
});
const listen = (srv) => new Promise((r) => srv.listen(0, "127.0.0.1", () => r(srv.address().port)));

// Recording proxies in front of the auditor: every request the extension
// sends it, with its time; `failNext` answers the next query with a status
// and Retry-After instead of forwarding it.
function auditorProxy(name) {
  const p = { name, requests: [], failNext: [] };
  p.server = http.createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", async () => {
      const at = Date.now();
      p.requests.push({ method: req.method, path: req.url, at });
      if (/\/query$/.test(req.url) && p.failNext.length) {
        const f = p.failNext.shift();
        res.writeHead(f.status, { "content-type": "application/json", "retry-after": String(f.retryAfter) });
        res.end(JSON.stringify({ error: "overloaded", message: "test proxy" }));
        return;
      }
      try {
        const body = chunks.length ? Buffer.concat(chunks) : undefined;
        const headers = {};
        if (req.headers["content-type"]) headers["content-type"] = req.headers["content-type"];
        const r = await fetch(`${auditor}${req.url}`, { method: req.method, headers, body });
        const out = Buffer.from(await r.arrayBuffer());
        const h = { "content-type": r.headers.get("content-type") ?? "application/octet-stream" };
        for (const k of ["retry-after", "etag", "cache-control"]) if (r.headers.get(k)) h[k] = r.headers.get(k);
        res.writeHead(r.status, h);
        res.end(out);
      } catch (e) {
        res.writeHead(502);
        res.end(String(e));
      }
    });
  });
  return p;
}
const proxyA = auditorProxy("A");
const proxyB = auditorProxy("B");
const httpsPort = await listen(httpsServer);
const httpPort = await listen(httpServer);
const proxyPort = await listen(deadProxy);
const auditorA = `http://127.0.0.1:${await listen(proxyA.server)}`;
const auditorB = `http://localhost:${await listen(proxyB.server)}`;
const siteUrl = (s) => `https://${s.host}:${httpsPort}/`;

// ---- profile and geckodriver --------------------------------------------------
const profile = join(work, "profile");
mkdirSync(profile, { recursive: true });
writeFileSync(join(work, "test-ca.pem"), caPem);
execFileSync("certutil", ["-N", "-d", `sql:${profile}`, "--empty-password"]);
execFileSync("certutil", ["-A", "-d", `sql:${profile}`, "-n", "ct-ingest test CA", "-t", "C,,", "-a", "-i", join(work, "test-ca.pem")]);

const prefs = {
  // Off the network: every name resolves to 127.0.0.1, and everything but
  // the test hosts and loopback goes to the dropping proxy.
  "network.dns.forceResolve": "127.0.0.1",
  "network.trr.mode": 5,
  "network.proxy.type": 1,
  "network.proxy.http": "127.0.0.1",
  "network.proxy.http_port": proxyPort,
  "network.proxy.ssl": "127.0.0.1",
  "network.proxy.ssl_port": proxyPort,
  "network.proxy.share_proxy_settings": false,
  "network.proxy.no_proxies_on": "localhost, 127.0.0.1, .testlog.example",
  "network.captive-portal-service.enabled": false,
  "network.connectivity-service.enabled": false,
  "security.OCSP.enabled": 0,
  "browser.safebrowsing.malware.enabled": false,
  "browser.safebrowsing.phishing.enabled": false,
  "browser.safebrowsing.downloads.enabled": false,
  "datareporting.policy.dataSubmissionEnabled": false,
  "toolkit.telemetry.enabled": false,
  "app.update.enabled": false,
  "extensions.update.enabled": false,
  "extensions.getAddons.cache.enabled": false,
  "browser.newtabpage.enabled": false,
  "browser.startup.page": 0,
  "extensions.webextensions.uuids": JSON.stringify({ [EXTENSION_ID]: EXTENSION_UUID }),
  // Firefox ESR with signature checks off, as a user installing the
  // unsigned XPI would set it; optional permission requests are granted
  // without the doorhanger a headless browser cannot click.
  "xpinstall.signatures.required": false,
  "extensions.webextOptionalPermissionPrompts": false,
  // Firefox's own background traffic, which would otherwise reach the
  // dropping proxy.
  "browser.region.network.url": "",
  "browser.region.update.enabled": false,
  "browser.search.geoip.url": "",
  "browser.aboutHomeSnippets.updateUrl": "",
  "extensions.systemAddon.update.enabled": false,
  "extensions.blocklist.enabled": false,
  "services.settings.server": "http://127.0.0.1:9/v1",
  "network.connectivity-service.IPv4.url": "",
  "network.connectivity-service.IPv6.url": "",
  "browser.ping-centre.telemetry": false,
  "toolkit.telemetry.server": "",
  "app.normandy.enabled": false,
  "app.shield.optoutstudies.enabled": false,
  "browser.discovery.enabled": false,
  "media.gmp-manager.url": "",
  "media.gmp-gmpopenh264.enabled": false,
  "browser.contentblocking.report.monitor.url": "",
  "identity.fxaccounts.enabled": false,
  "network.prefetch-next": false,
  "network.dns.disablePrefetch": true,
  "network.http.speculative-parallel-limit": 0,
};

async function pickPort() {
  const srv = net.createServer();
  const p = await listen(srv);
  await new Promise((r) => srv.close(r));
  return p;
}
const driverPort = await pickPort();
const marionettePort = await pickPort();
const driverLog = createWriteStream(join(work, "geckodriver.log"));
const driver = spawn(
  args.geckodriver,
  ["--port", String(driverPort), "--marionette-port", String(marionettePort), "--allow-system-access", "--log", "info"],
  // MOZ_REMOTE_SETTINGS_DEVTOOLS lets services.settings.server (above)
  // point Firefox's own remote settings at a closed loopback port instead of
  // the network (Firefox inherits geckodriver's environment).
  { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, MOZ_REMOTE_SETTINGS_DEVTOOLS: "1" } },
);
driver.stdout.pipe(driverLog);
driver.stderr.pipe(driverLog);
let driverExited = false;
driver.on("exit", () => (driverExited = true));

const base = `http://127.0.0.1:${driverPort}`;
async function wd(method, path, body) {
  const r = await fetch(base + path, {
    method,
    headers: { "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const j = await r.json();
  if (!r.ok) throw new Error(`${method} ${path}: ${j.value?.error}: ${j.value?.message}`);
  return j.value;
}

let session = null;
const S = (p) => `/session/${session}${p}`;

// Runs `fn` (an async function of plain-JSON arguments, serialised) in the
// extension page currently loaded, with its `browser` API.
async function inPage(fn, ...fnArgs) {
  const script = `const done = arguments[arguments.length - 1];
    const browser = globalThis.browser ?? window.wrappedJSObject?.browser;
    (${fn.toString()})(browser, ...Array.from(arguments).slice(0, -1)).then(
      (v) => done({ ok: true, v }), (e) => done({ ok: false, e: String(e?.stack ?? e) }));`;
  const r = await wd("POST", S("/execute/async"), { script, args: fnArgs });
  if (!r?.ok) throw new Error(`in ${EXT}: ${r?.e}`);
  return r.v;
}
async function open(url) {
  await wd("POST", S("/url"), { url });
}
async function extensionState() {
  await open(`${EXT}/options.html`);
  return inPage(async (browser) => browser.storage.local.get(null));
}
async function until(what, cond, seconds) {
  const end = Date.now() + seconds * 1000;
  let last;
  while (Date.now() < end) {
    last = await cond();
    if (last) return last;
    await sleep(500);
  }
  throw new Error(`timed out: ${what}`);
}
async function metric(name) {
  const text = await (await fetch(`${auditor}/metrics`)).text();
  let sum = 0;
  for (const line of text.split("\n")) if (line.startsWith(name)) sum += Number(line.split(" ").pop());
  return sum;
}
// Runs a script in Firefox's parent process (chrome context).
async function chrome(script) {
  await wd("POST", S("/moz/context"), { context: "chrome" });
  try {
    return await wd("POST", S("/execute/sync"), { script, args: [] });
  } finally {
    await wd("POST", S("/moz/context"), { context: "content" });
  }
}
async function epochNow() {
  return (await (await fetch(`${auditor}/v1/manifest`)).json()).epoch;
}
// One audit round, started from the options page as its button does.
async function auditRound() {
  await open(`${EXT}/options.html`);
  const r = await inPage(async (browser) => browser.runtime.sendMessage({ type: "run-audits" }));
  if (!r?.ok) throw new Error(`audit round: ${r?.error}`);
  return r.value;
}
// The popup (opened as a page: headless Firefox has no toolbar to click)
// about tab `tab`.
async function popupText(ready, tab) {
  await open(`${EXT}/popup.html${tab === undefined ? "" : `?tab=${tab}`}`);
  return until(
    "the popup rendered",
    async () => {
      const t = await inPage(async () => document.body.innerText);
      return /audits? this week|No audits yet/.test(t) && ready(t) ? t : null;
    },
    20,
  );
}
// Clicks the element `css` of the current page (a real click: user input).
async function click(css) {
  const e = await wd("POST", S("/element"), { using: "css selector", value: css });
  await wd("POST", S(`/element/${Object.values(e)[0]}/click`), {});
}
async function type(css, text) {
  const e = await wd("POST", S("/element"), { using: "css selector", value: css });
  const id = Object.values(e)[0];
  await wd("POST", S(`/element/${id}/clear`), {});
  await wd("POST", S(`/element/${id}/value`), { text });
}
// The popup as rendered now, to `file` (the page's body).
async function screenshot(file) {
  const body = await wd("POST", S("/element"), { using: "css selector", value: "body" });
  const png = await wd("GET", S(`/element/${Object.values(body)[0]}/screenshot`));
  writeFileSync(file, Buffer.from(png, "base64"));
}
const queueOf = (st) => (st.queue ? JSON.parse(st.queue).items : []);

const result = {};
try {
  for (let i = 0; ; i++) {
    try {
      await wd("GET", "/status");
      break;
    } catch (e) {
      if (driverExited || i > 100) throw new Error(`geckodriver did not start (log in ${work}/geckodriver.log)`);
      await sleep(100);
    }
  }
  const created = await wd("POST", "/session", {
    capabilities: {
      alwaysMatch: {
        browserName: "firefox",
        acceptInsecureCerts: false,
        "moz:firefoxOptions": {
          binary: args.firefox,
          args: ["-headless", "-profile", profile],
          prefs,
          log: { level: "info" },
        },
      },
    },
  });
  session = created.sessionId;
  result.browser = `${created.capabilities.browserName} ${created.capabilities.browserVersion}`;
  log(`${result.browser} started`);
  await wd("POST", S("/timeouts"), { script: 180000, pageLoad: 30000 });
  // The built XPI, installed for good (not as a temporary add-on).
  const addonId = await wd("POST", S("/moz/addon/install"), { path: args.xpi, temporary: false });
  check(addonId === EXTENSION_ID, `installed ${addonId}`);
  const installed = await chrome(
    `const p = WebExtensionPolicy.getByID(${JSON.stringify(EXTENSION_ID)});
     return p ? { temporary: p.temporarilyInstalled, private: p.privateBrowsingAllowed } : null;`,
  );
  check(installed && installed.temporary === false, `not a permanent install: ${JSON.stringify(installed)}`);
  check(installed?.private === false, "the extension runs in private windows");

  // The first-run page opened at install.
  const handles = await until("the first-run page", async () => {
    for (const h of await wd("GET", S("/window/handles"))) {
      await wd("POST", S("/window"), { handle: h });
      if ((await wd("GET", S("/url"))).startsWith(`${EXT}/onboarding.html`)) return h;
    }
    return null;
  }, 20);
  result.first_run_page = Boolean(handles);

  // Before the user agrees: a visit samples, stores and fetches nothing.
  await open(siteUrl(sites.logged));
  await sleep(2000);
  await open(`${EXT}/options.html`);
  const before = await inPage(async (browser) => browser.storage.local.get(null));
  check(Object.keys(before).length === 0, `stored before consent: ${JSON.stringify(Object.keys(before))}`);
  check(proxyA.requests.length === 0 && logListRequests.length === 0, "fetched before consent");

  // The user chooses auditor A and agrees, with real clicks.
  await open(`${EXT}/onboarding.html`);
  await type("#auditorUrl", auditorA);
  await click("#agree");
  await click("#start");
  const setUp = await until("the first-run page done", async () => {
    const t = await inPage(async () => document.getElementById("done").textContent);
    return /^Set up on/.test(t) ? t : null;
  }, 20);
  check(setUp.includes(auditorA), `first-run page: ${setUp}`);
  const access = await inPage(async (browser, a) => ({
    https: await browser.permissions.contains({ origins: ["https://*/*"] }),
    auditor: await browser.permissions.contains({ origins: [`${new URL(a).protocol}//${new URL(a).hostname}/*`] }),
    all: await browser.permissions.getAll(),
  }), auditorA);
  check(access.https && access.auditor, `host access: ${JSON.stringify(access)}`);
  check(!access.all.origins.includes("<all_urls>") && access.all.origins.every((o) => o.startsWith("https://") || o === "http://127.0.0.1/*"),
    `origins granted: ${JSON.stringify(access.all.origins)}`);
  result.origins_granted = access.all.origins;
  // Test settings: the local log list, every connection sampled, no delay.
  await inPage(
    async (browser, patch) => {
      const { config } = await browser.storage.local.get("config");
      await browser.storage.local.set({ config: { ...config, ...patch } });
    },
    { logListUrl: `http://127.0.0.1:${httpPort}/log_list.json`, testingSampleAll: true, testingNoDelay: true },
  );

  // Visit both sites; each is a new connection, sampled, queued.
  for (const s of [sites.logged, sites.unlogged]) {
    await open(siteUrl(s));
    const title = await wd("GET", S("/title"));
    check(title === `site ${s.host}`, `${s.host}: page title "${title}" (certificate not trusted?)`);
  }
  let st = await until(
    "both sites' SCTs queued (Firefox delivered the chains)",
    async () => {
      const x = await extensionState();
      return queueOf(x).length >= 2 ? x : null;
    },
    60,
  ).catch(async (e) => {
    const x = await extensionState();
    throw new Error(`${e.message}; status ${JSON.stringify(x.status)}`);
  });
  const items = queueOf(st);
  for (const [name, s] of Object.entries(sites)) {
    const item = items.find((i) => i.leaf_hash === s.leaf_hash);
    check(item !== undefined, `${name}: no queued SCT with the log's leaf hash ${s.leaf_hash}`);
    check(item?.chain[0] === s.cert, `${name}: the queued leaf is not the certificate the server sent`);
    check(st.hosts?.[s.leaf_hash] === s.host, `${name}: host ${st.hosts?.[s.leaf_hash]}`);
  }
  check(!st.status.sampleErrors && !st.status.sampledWithoutChain, `sampling errors: ${JSON.stringify(st.status)}`);
  // The connection rule: a reload is the same connection.
  await sleep(1500); // counters are written at most once a second
  const counted = (await extensionState()).status;
  check(counted.connections === 2 && counted.sampled === 2, `connections ${counted.connections}, sampled ${counted.sampled}`);
  result.sampled = { connections: counted.connections, sampled: counted.sampled, queued: counted.queued };
  await open(siteUrl(sites.logged));
  await sleep(2500);
  st = await extensionState();
  check(st.status.connections === counted.connections, `a reload counted as a new connection (${counted.connections} → ${st.status.connections})`);

  // ... and so is a visit after Firefox unloaded the idle event page.
  await chrome('Services.prefs.setIntPref("extensions.background.idle.timeout", 1000);');
  await open(`${EXT}/options.html`);
  await inPage(async (browser) => browser.runtime.sendMessage({ type: "capabilities" }));
  await open("about:blank");
  const stateScript = `return WebExtensionPolicy.getByID(${JSON.stringify(EXTENSION_ID)})?.extension?.backgroundState ?? null;`;
  const bgState = await until(
    "the event page unloaded",
    async () => {
      const state = await chrome(stateScript);
      return state === "stopped" || state === null ? { state } : null;
    },
    60,
  );
  if (bgState.state === null) await sleep(5000);
  await open(siteUrl(sites.logged));
  await until(
    "the background woken by the visit",
    async () => ((await extensionState()).status.backgroundStarts ?? 0) > (st.status.backgroundStarts ?? 0),
    30,
  ).catch(() => {});
  await sleep(3000);
  const afterUnload = await extensionState();
  await chrome('Services.prefs.clearUserPref("extensions.background.idle.timeout");');
  check(
    (afterUnload.status.backgroundStarts ?? 0) > (st.status.backgroundStarts ?? 0),
    `the event page was not unloaded (starts ${st.status.backgroundStarts} → ${afterUnload.status.backgroundStarts})`,
  );
  check(afterUnload.status.connections === st.status.connections, "a visit after the unload counted as a new connection");

  // First round: 4 queries (both audits and 2 canaries); the first query is
  // answered 503 with Retry-After: 1, which the extension waits for.
  const firefoxChain = queueOf(st).find((i) => i.leaf_hash === sites.unlogged.leaf_hash)?.chain;
  const okBefore = await metric('auditor_queries_total{outcome="ok"}');
  proxyA.failNext.push({ status: 503, retryAfter: 1 });
  const nA = proxyA.requests.length;
  const c1 = await auditRound();
  const q1 = proxyA.requests.slice(nA).filter((r) => /\/query$/.test(r.path));
  check(c1.queries === 4 && c1.audited === 2 && c1.canaries === 2 && c1.failed === 0 && c1.retried === 1, `first round: ${JSON.stringify(c1)}`);
  check(q1.length === 5 && q1[1].at - q1[0].at >= 950, `503 Retry-After: 1 not waited for: ${JSON.stringify(q1.map((r) => r.at - q1[0].at))}`);
  const okAfter = await metric('auditor_queries_total{outcome="ok"}');
  check(okAfter - okBefore >= c1.queries, `auditor answered ${okAfter - okBefore} PIR queries, expected ${c1.queries}`);
  st = await extensionState();
  const byHash = (h) => (st.audits ?? []).filter((a) => a.leaf_hash === h);
  check(byHash(sites.logged.leaf_hash)[0]?.logged === true, "the logged site was not answered LOGGED");
  result.first_round = { epoch: c1.epoch, ...c1, auditor_queries_answered: okAfter - okBefore, retry_wait_ms: q1[1].at - q1[0].at };

  // The unlogged site answers NOT FOUND, except for a Bloom filter false
  // positive (≈ 0.12 per audit): then it is queued again by hand.
  async function firstNotFound() {
    for (let attempt = 0; attempt < 8; attempt++) {
      st = await extensionState();
      const item = queueOf(st).find((i) => i.leaf_hash === sites.unlogged.leaf_hash);
      if (item && item.not_found_in !== null && item.not_found_in !== undefined) return item;
      if (!item) {
        const add = await inPage(
          async (browser, leaf, issuer) => browser.runtime.sendMessage({ type: "add-certificate", leaf, issuer }),
          firefoxChain[0],
          firefoxChain[1],
        );
        check(add?.ok && add.value.queued === 1, `queueing the unlogged site again: ${JSON.stringify(add)}`);
      }
      await auditRound();
    }
    throw new Error("the unlogged site never answered NOT FOUND");
  }
  let pending = await firstNotFound();

  // Re-check in a later epoch: a misbehaviour report, ready but not sent.
  let c2 = {};
  for (let attempt = 0; attempt < 5; attempt++) {
    log(`waiting for an epoch after ${pending.not_found_in}`);
    const after = pending.not_found_in;
    await until("a later epoch", async () => (await epochNow()) > after, Number(args["epoch-timeout"]));
    c2 = await auditRound();
    if (c2.reports) break;
    pending = await firstNotFound();
  }
  check(c2.queries === 4 && c2.audited === 1 && c2.notFound === 1 && c2.reports === 1, `re-check round: ${JSON.stringify(c2)}`);
  st = await extensionState();
  const report = (st.reports ?? [])[0];
  check(st.reports?.length === 1 && report?.chain?.[0] === sites.unlogged.cert, "the report does not carry the unlogged site's certificate");
  check(st.reportsSent === undefined && !proxyA.requests.some((r) => r.path === "/v1/reports"), "a report was sent without a click");
  const badge = await inPage(async (browser) => browser.action.getBadgeText({}));
  check(badge === "1", `badge "${badge}"`);
  result.second_round = { epoch: c2.epoch, ...c2 };
  result.bloom_false_positives = byHash(sites.unlogged.leaf_hash).filter((a) => a.logged).length;

  // The popup about the unlogged site's tab (visited again: the page
  // certificates are kept in memory only).
  await open(siteUrl(sites.unlogged));
  await open(`${EXT}/options.html`);
  const tabId = await inPage(async (browser) => (await browser.tabs.getCurrent()).id);
  await wd("POST", S("/window/rect"), { width: 560, height: 1100 });
  const popup = await popupText((t) => /NOT FOUND twice/.test(t) && /this site|embedded SCT/.test(t), tabId);
  await screenshot(screenshotFile);
  result.screenshot = screenshotFile;
  if (args["report-screenshot"]) await screenshot(args["report-screenshot"]);
  check(popup.includes(`${st.status.audited} audits this week`), "popup: wrong number of audits");
  check(/the log or the auditor misbehaved\. Report ready, not sent\./.test(popup), "popup: the report's words");
  check(!/Reported:/.test(popup), "popup: 'Reported' before anything was sent");
  check(/fill ratio the auditor states\s+0\.\d{3} \(epoch \d+\)/.test(popup), "popup: the stated fill ratio");
  check(/fill ratio its canaries measured\s+\d\.\d{3} \(\d+ of \d+ canaries LOGGED\)/.test(popup), "popup: the measured fill ratio");
  check(popup.includes(`${sites.unlogged.host}: 1 embedded SCT`) && /report ready to send/.test(popup), "popup: this site's SCT and where it stands");
  check(popup.includes("Send report to the auditor") && /auditor learns that you saw this site/.test(popup), "popup: the send button or its words");
  // The click asks for browsingActivity (granted: prompts off) and sends.
  await click("button.send-report");
  await until("the report sent", async () => {
    const t = await inPage(async () => document.body.innerText);
    return /Reported: /.test(t) ? t : null;
  }, 30);
  const dc = await inPage(async (browser) => browser.permissions.contains({ data_collection: ["browsingActivity"] }));
  check(dc === true, "browsingActivity not granted by the click");
  check(proxyA.requests.filter((r) => r.path === "/v1/reports").length === 1, "the report did not reach the auditor once");

  // A change of auditor, on the options page: B's origin is asked for, its
  // state starts clean.
  await open(`${EXT}/options.html`);
  await type("#auditorUrl", auditorB);
  await click("#settings button[type=submit]");
  await until("auditor B saved", async () => (await inPage(async (browser) => (await browser.storage.local.get("config")).config.auditorUrl)) === auditorB, 20);
  const nA2 = proxyA.requests.length;
  const c3 = await auditRound();
  st = await extensionState();
  check(c3.queries === 4 && st.auditorState.auditor === auditorB, `round with auditor B: ${JSON.stringify(c3)}`);
  check(JSON.parse(st.auditorState.canaries).recent.length === c3.canaries, "auditor B's canaries include A's");
  check(proxyA.requests.length === nA2 && proxyB.requests.filter((r) => /\/query$/.test(r.path)).length === 4, "the round did not go to B only");
  const bGranted = await inPage(async (browser) => browser.permissions.contains({ origins: ["http://localhost/*"] }));
  check(bGranted, "B's origin was not granted");
  result.change_of_auditor = { round: c3, canaries_after: JSON.parse(st.auditorState.canaries).recent.length };

  // What an audit costs inside Firefox.
  const perf = st.status.perf;
  const mean = (x) => Math.round((x / perf.audits) * 10) / 10;
  result.per_audit = {
    audits: perf.audits,
    query_generation_ms: mean(perf.prepareMs),
    request_ms: mean(perf.fetchMs),
    extraction_ms: mean(perf.decodeMs),
    upload_bytes: mean(perf.up),
    download_bytes: mean(perf.down),
  };
  result.https_handshakes = servedTo.length;
} catch (e) {
  failures.push(`exception: ${e?.stack ?? e}`);
} finally {
  if (session) await wd("DELETE", S("")).catch(() => {});
  driver.kill("SIGTERM");
  httpsServer.close();
  httpServer.close();
  deadProxy.close();
  proxyA.server.close();
  proxyB.server.close();
}
// Nothing left the machine: the dropping proxy saw no request. The
// extension talked only to the auditor (A, then B) and the local log list.
result.proxied_requests = {};
for (const line of proxied) result.proxied_requests[line] = (result.proxied_requests[line] ?? 0) + 1;
check(proxied.length === 0, `requests that would have left the machine: ${JSON.stringify(result.proxied_requests)}`);
const auditorPaths = [...proxyA.requests, ...proxyB.requests].map((r) => r.path);
check(
  auditorPaths.every((p) => p === "/v1/manifest" || p === "/v1/reports" || /^\/v1\/epochs\/\d+\/dbs\/\d+\/query$/.test(p)),
  `unexpected auditor requests: ${JSON.stringify(auditorPaths)}`,
);
check(logListRequests.every((r) => r === "GET /log_list.json"), `log list server: ${JSON.stringify(logListRequests)}`);
result.auditor_requests = { A: proxyA.requests.length, B: proxyB.requests.length, log_list: logListRequests.length };

const summary = {
  ok: failures.length === 0,
  harness: "headless Firefox ESR via geckodriver; the built XPI installed with signature checks off; real wasm, auditor and HTTPS sites",
  ...result,
  seconds: Math.round((Date.now() - t0) / 1000),
  work,
  failures,
};
console.log(JSON.stringify(summary, null, 2));
process.exit(summary.ok ? 0 : 1);
