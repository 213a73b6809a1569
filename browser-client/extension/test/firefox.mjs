#!/usr/bin/env node
// The extension in a real Firefox (headless), driven through geckodriver's
// WebDriver HTTP API, against a real auditor:
//
//   node firefox.mjs --auditor URL --data DIR [--screenshot FILE] [--work DIR]
//                    [--epoch-timeout S] [--firefox BIN] [--geckodriver BIN]
//
// DIR is demo-server's output: log_list.json and https_sites.json (two
// certificates of the local test log with their keys: one whose embedded
// SCT was logged, one whose SCT the log signed and never logged). This
// script serves both over HTTPS on 127.0.0.1 (one port, picked by SNI),
// makes a fresh Firefox profile that trusts the test CA (certutil), keeps
// Firefox off the network (every host resolves to 127.0.0.1; everything but
// the test hosts goes to a loopback "proxy" that accepts and drops), installs
// the extension as a temporary add-on and sets it up through its own pages
// (moz-extension:// needs geckodriver --allow-system-access). Then:
//
//  * host access: <all_urls> is granted at install, the options page asks
//    for nothing;
//  * visiting both pages samples them (testingSampleAll): the queued chain's
//    leaf is the DER the server sent, the leaf hash is the one the log
//    computed;
//  * a reload of a page is the same connection; so is a visit after the
//    event page was unloaded (idle timeout lowered for the test);
//  * an audit round answers LOGGED for the first page and NOT FOUND for the
//    second, and the auditor's /metrics count the answered PIR queries;
//  * after a later epoch, the re-check yields a misbehaviour report for the
//    second page's certificate and the badge shows it;
//  * the popup shows all that (screenshot written to --screenshot).
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
    "report-screenshot": { type: "string" },
    work: { type: "string" },
    "epoch-timeout": { type: "string", default: "120" },
    firefox: { type: "string", default: process.env.FIREFOX ?? "firefox-esr" },
    geckodriver: { type: "string", default: process.env.GECKODRIVER ?? "geckodriver" },
  },
});
if (!args.auditor || !args.data) {
  console.error(
    "usage: firefox.mjs --auditor URL --data DIR [--screenshot FILE] [--report-screenshot FILE] [--work DIR] [--epoch-timeout S]",
  );
  process.exit(2);
}
const auditor = args.auditor.replace(/\/+$/, "");
const extensionDir = new URL("..", import.meta.url).pathname.replace(/\/$/, "");
const work = args.work ?? mkdtempSync(join(tmpdir(), "ct-extension-firefox."));
mkdirSync(work, { recursive: true });
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
const httpServer = http.createServer((req, res) => {
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
const httpsPort = await listen(httpsServer);
const httpPort = await listen(httpServer);
const proxyPort = await listen(deadProxy);
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
  { stdio: ["ignore", "pipe", "pipe"] },
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
async function popupText(ready) {
  await open(`${EXT}/popup.html`);
  return until(
    "the popup rendered",
    async () => {
      const t = await inPage(async () => document.body.innerText);
      return /audits? this week/.test(t) && ready(t) ? t : null;
    },
    20,
  );
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
  const addonId = await wd("POST", S("/moz/addon/install"), { path: extensionDir, temporary: true });
  check(addonId === EXTENSION_ID, `installed ${addonId}`);

  // Host access as Firefox grants it at install; the options page then asks
  // for nothing. Settings: the auditor, the log list, sample everything.
  await open(`${EXT}/options.html`);
  const access = await inPage(async (browser) => {
    for (let i = 0; i < 50 && document.getElementById("capabilities").textContent === ""; i++) {
      await new Promise((r) => setTimeout(r, 100));
    }
    return {
      allUrls: await browser.permissions.contains({ origins: ["<all_urls>"] }),
      notice: document.getElementById("access").textContent,
      capabilities: document.getElementById("capabilities").textContent,
    };
  });
  check(access.allUrls === true, "<all_urls> not granted at install");
  check(access.notice === "", `options page asks for host access: ${access.notice}`);
  check(/exposes connection certificates/.test(access.capabilities), `capabilities: ${access.capabilities}`);
  await inPage(
    async (browser, config) => browser.storage.local.set({ config }),
    { auditorUrl: auditor, logListUrl: `http://127.0.0.1:${httpPort}/log_list.json`, testingSampleAll: true },
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
    check(item?.chain[1] === s.issuer, `${name}: the queued issuer is not the test CA`);
    check(st.hosts?.[s.leaf_hash] === s.host, `${name}: host ${st.hosts?.[s.leaf_hash]}`);
  }
  check(!st.status.sampleErrors && !st.status.sampledWithoutChain, `sampling errors: ${JSON.stringify(st.status)}`);
  // The connection rule: a reload is the same connection.
  await sleep(1500); // counters are written at most once a second
  const before = (await extensionState()).status;
  check(before.connections === 2 && before.sampled === 2, `connections ${before.connections}, sampled ${before.sampled}`);
  result.sampled = { connections: before.connections, sampled: before.sampled, queued: before.queued };
  await open(siteUrl(sites.logged));
  await sleep(2500);
  st = await extensionState();
  check(st.status.connections === before.connections, `a reload counted as a new connection (${before.connections} → ${st.status.connections})`);

  // ... and so is a visit after Firefox unloaded the idle event page: the
  // idle timeout is lowered to 1 s (a message to the background restarts
  // its idle timer with the new value), then the test waits until Firefox
  // reports the background stopped.
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
  if (bgState.state === null) await sleep(5000); // no backgroundState here: the timeout is 1 s
  await open(siteUrl(sites.logged));
  // The visit woke the background (it counts its start); its decision on
  // the request is written with the counters within a second.
  await until(
    "the background woken by the visit",
    async () => (await extensionState()).status.backgroundStarts > st.status.backgroundStarts,
    30,
  ).catch(() => {});
  await sleep(3000);
  const afterUnload = await extensionState();
  await chrome('Services.prefs.clearUserPref("extensions.background.idle.timeout");');
  check(
    afterUnload.status.backgroundStarts > st.status.backgroundStarts,
    `the event page was not unloaded (starts ${st.status.backgroundStarts} → ${afterUnload.status.backgroundStarts})`,
  );
  check(
    afterUnload.status.connections === st.status.connections,
    `a visit after the unload counted as a new connection (${st.status.connections} → ${afterUnload.status.connections})`,
  );
  result.connection_rule = {
    background_starts: [st.status.backgroundStarts, afterUnload.status.backgroundStarts],
    connections: afterUnload.status.connections,
  };

  // First audit round: LOGGED for the logged site, and the auditor answered
  // the PIR queries (its /metrics).
  const firefoxChain = queueOf(st).find((i) => i.leaf_hash === sites.unlogged.leaf_hash)?.chain;
  const okBefore = await metric('auditor_queries_total{outcome="ok"}');
  const c1 = await auditRound();
  check(c1.audited === 2, `first round: ${JSON.stringify(c1)}`);
  const okAfter = await metric('auditor_queries_total{outcome="ok"}');
  check(okAfter - okBefore >= c1.audited, `auditor answered ${okAfter - okBefore} PIR queries, expected ${c1.audited}`);
  st = await extensionState();
  const byHash = (h) => (st.audits ?? []).filter((a) => a.leaf_hash === h);
  check(byHash(sites.logged.leaf_hash)[0]?.logged === true, "the logged site was not answered LOGGED");
  result.first_round = { epoch: st.status.lastEpoch, ...c1, auditor_queries_answered: okAfter - okBefore };

  // The unlogged site answers NOT FOUND, except for a Bloom filter false
  // positive (≈ 0.12 per audit, docs/protocol.md §1: the item is then
  // dropped as logged). Each audit reads a fresh random filter, so after a
  // false positive the test queues Firefox's chain again (as "add by hand")
  // and audits once more.
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
  check(
    queueOf(st).length === 1 && pending.not_found_in === st.status.lastEpoch,
    `queue after the first NOT FOUND: ${JSON.stringify(queueOf(st).map((i) => [i.leaf_hash, i.not_found_in]))}`,
  );

  // The popup (opened as a page: headless Firefox has no toolbar to click):
  // the week's audits, the NOT FOUND waiting for its re-check and why.
  await wd("POST", S("/window/rect"), { width: 520, height: 900 });
  const popup1 = await popupText((t) => /NOT FOUND:/.test(t) && /re-checked in a later epoch/.test(t));
  const counts1 = `${st.status.audited} audits this week`;
  const split1 = `${st.status.logged} LOGGED, ${st.status.audited - st.status.logged} NOT FOUND`;
  check(popup1.includes(counts1) && popup1.includes(split1), `popup: not "${counts1}" and "${split1}"`);
  check(popup1.includes(`epoch ${pending.not_found_in}`) && popup1.includes(sites.unlogged.host), "popup: epoch or host missing");
  check(/NOT FOUND in epoch \d+; re-checked in a later epoch/.test(popup1), "popup: the queue's reason is missing");
  check(
    /LOGGED is probabilistic: an SCT that was never logged passes one audit with probability 0\.\d{3} \(epoch \d+'s measured fill ratio\)/.test(popup1) &&
      /NOT FOUND is certain for its epoch/.test(popup1),
    "popup: what LOGGED and NOT FOUND mean is missing",
  );
  // The popup as rendered now, to `file` (the page's body).
  async function screenshot(file) {
    const body = await wd("POST", S("/element"), { using: "css selector", value: "body" });
    const png = await wd("GET", S(`/element/${Object.values(body)[0]}/screenshot`));
    writeFileSync(file, Buffer.from(png, "base64"));
  }
  if (args.screenshot) {
    await screenshot(args.screenshot);
    result.screenshot = args.screenshot;
  }

  // Re-check in a later epoch: a misbehaviour report, the badge. (A false
  // positive there drops the item: queue it again, NOT FOUND, next epoch.)
  let c2 = {};
  for (let attempt = 0; attempt < 5; attempt++) {
    log(`waiting for an epoch after ${pending.not_found_in}`);
    const after = pending.not_found_in;
    await until("a later epoch", async () => (await epochNow()) > after, Number(args["epoch-timeout"]));
    c2 = await auditRound();
    if (c2.reports) break;
    pending = await firstNotFound();
  }
  check(c2.audited === 1 && c2.notFound === 1 && c2.reports === 1, `re-check round: ${JSON.stringify(c2)}`);
  st = await extensionState();
  const report = (st.reports ?? [])[0];
  check(st.reports?.length === 1, `${st.reports?.length ?? 0} reports`);
  check(report?.chain?.[0] === sites.unlogged.cert, "the report does not carry the unlogged site's certificate");
  check(report?.leaf_hash === sites.unlogged.leaf_hash, "the report's leaf hash differs");
  const badge = await inPage(async (browser) => browser.action.getBadgeText({}));
  check(badge === "1", `badge "${badge}"`);
  result.second_round = { epoch: st.status.lastEpoch, ...c2 };
  result.bloom_false_positives = byHash(sites.unlogged.leaf_hash).filter((a) => a.logged).length;

  // The popup after the report.
  const popup2 = await popupText((t) => /REPORTED/.test(t));
  check(popup2.includes(`${st.status.audited} audits this week`), "popup: wrong number of audits");
  check(popup2.includes(`epoch ${st.status.lastEpoch}`), "popup: epoch missing");
  check(popup2.includes(`REPORTED: ${sites.unlogged.host}`), "popup: the reported host is missing");
  // Nothing is sent without the user: the report waits behind a button
  // that says what sending it reveals.
  check(
    popup2.includes("Send report to the auditor") && /auditor learns that you saw this site/.test(popup2),
    "popup: the report's send button or its consent text is missing",
  );
  if (args["report-screenshot"]) {
    await screenshot(args["report-screenshot"]);
    result.report_screenshot = args["report-screenshot"];
  }

  // What an audit costs inside Firefox (wasm query generation, the POST,
  // extraction of the bit from the answer).
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
}
// What tried to leave the machine (and was dropped), by request line.
result.proxied_requests = {};
for (const line of proxied) result.proxied_requests[line] = (result.proxied_requests[line] ?? 0) + 1;

const summary = {
  ok: failures.length === 0,
  harness: "headless Firefox via geckodriver; extension as a temporary add-on; real wasm, auditor and HTTPS sites",
  ...result,
  seconds: Math.round((Date.now() - t0) / 1000),
  work,
  failures,
};
console.log(JSON.stringify(summary, null, 2));
process.exit(summary.ok ? 0 : 1);
