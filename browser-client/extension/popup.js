// Toolbar popup: whether the extension is set up, this week's audits and
// bytes, the auditor's honesty (the canaries' measured fill ratio beside
// the one it states), the current tab's SCTs, anything NOT FOUND or ready to
// report (with the button that sends a report, the only way one is ever
// sent), the pending queue and why each item waits. The background
// computes it all ("popup-state"); settings are on the options page.

const api = globalThis.browser ?? globalThis.chrome;
const $ = (id) => document.getElementById(id);

function send(msg) {
  return api.runtime.sendMessage(msg).then((r) => {
    if (!r?.ok) throw new Error(r?.error ?? "no answer from the background");
    return r.value;
  });
}

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined) e.textContent = text;
  if (cls) e.className = cls;
  return e;
}

function bytes(n) {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1024 / 1024).toFixed(1)} MiB`;
}

const time = (ms) => new Date(ms).toLocaleString();
const short = (hex) => `${hex.slice(0, 12)}…`;
const plural = (n, one, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;

function why(item) {
  // browser-client's sentence (policy.rs, WaitReason), naming the log
  if (item.message) return item.message;
  switch (item.state) {
    case "mmd":
      return `younger than the log's maximum merge delay: not before ${time(item.due_ms)}`;
    case "no_manifest":
      return "waits for the auditor's manifest (fetched at the next round)";
    default:
      return `cannot be audited: ${item.detail ?? item.state}`;
  }
}

// The tab the popup is about: ?tab=ID (the tests open the popup as a page),
// else the active tab of this window.
async function currentTabId() {
  const fromUrl = new URLSearchParams(location.search).get("tab");
  if (fromUrl !== null && /^\d+$/.test(fromUrl)) return Number(fromUrl);
  try {
    const [tab] = await api.tabs.query({ active: true, currentWindow: true });
    return tab?.id;
  } catch (_) {
    return undefined;
  }
}

function renderSetup(s) {
  $("setup").hidden = s.active;
  $("setup").textContent = "";
  if (s.active) return;
  $("setup").append(el("div", "Not set up: nothing is sampled, stored or sent until you choose an auditor.", "bad"));
  const b = el("button", "Set up…");
  b.onclick = () => {
    api.tabs.create({ url: api.runtime.getURL("onboarding.html") });
    window.close();
  };
  $("setup").append(b);
}

function renderWeek(s) {
  const week = $("week");
  week.textContent = "";
  if (!s.active) return;
  if (s.week.audits === 0) {
    week.append(el("div", s.rounds === 0 ? "No audits yet" : "No audits yet this week", "big"));
  } else {
    week.append(el("div", `${plural(s.week.audits, "audit")} this week`, "big"));
    week.append(el("div", `${s.week.logged} LOGGED, ${s.week.audits - s.week.logged} NOT FOUND`));
  }
  week.append(
    el(
      "div",
      `${bytes(s.week.bytes)} used since ${s.week.since} (audits, ${plural(s.week.canaries, "canary", "canaries")}, manifests; ` +
        `every round sends ${s.roundSize} queries)`,
      "muted",
    ),
  );
  if (s.confidence && s.week.audits) {
    const c = s.confidence;
    week.append(
      el(
        "div",
        `LOGGED is probabilistic: an SCT that was never logged passes one audit with probability ` +
          `${c.fillRatio.toFixed(3)} (the fill ratio epoch ${c.epoch} ${c.stated ? "states" : "is expected to have"}), ` +
          "at most ½ against a log that chooses its certificates adversarially. NOT FOUND is certain for the epoch's filters.",
        "muted",
      ),
    );
  }
}

function renderAuditor(s) {
  $("auditor").textContent = !s.active
    ? ""
    : `Auditor ${s.auditor}, epoch ${s.epoch ?? "—"}; ` +
      (s.lastRunAt ? `last round ${time(s.lastRunAt)}` : "no round yet") +
      (s.lastSuccessAt && s.lastSuccessAt !== s.lastRunAt ? `, last successful round ${time(s.lastSuccessAt)}` : "") +
      (s.nextRoundAt ? `; next round ${time(s.nextRoundAt)}` : "");
  $("stall").hidden = !s.stalled;
  $("stall").textContent = s.stalled
    ? `Auditing has stalled: no round has succeeded for more than ${s.stallHours} hours ` +
      `(${s.lastSuccessAt ? `last success ${time(s.lastSuccessAt)}` : `none since the auditor was set on ${time(s.since)}`}).`
    : "";
  const errors = [];
  if (s.retryUntil) errors.push(`The auditor is overloaded and asked for no requests before ${time(s.retryUntil)} (Retry-After); the next round waits.`);
  if (s.lastError) errors.push(`Last round: ${s.lastError}`);
  $("error").hidden = errors.length === 0;
  $("error").textContent = errors.join(" ");
}

function renderCheck(s) {
  const box = $("check");
  box.textContent = "";
  if (!s.active) return;
  const c = s.canaries;
  const stated = s.confidence ? s.confidence.fillRatio.toFixed(3) : "—";
  const measured = c?.measured !== null && c?.measured !== undefined ? c.measured.toFixed(3) : "—";
  const t = el("table");
  const row = (a, b, cls) => {
    const tr = t.insertRow();
    tr.insertCell().textContent = a;
    const td = tr.insertCell();
    td.textContent = b;
    if (cls) td.className = cls;
  };
  row("fill ratio the auditor states", s.confidence ? `${stated} (epoch ${s.confidence.epoch})` : "— (no manifest yet)");
  row("fill ratio its canaries measured", c?.probes ? `${measured} (${c.logged} of ${c.probes} canaries LOGGED)` : "— (no canaries yet)");
  box.append(t);
  const flagged = c?.verdict === "too_many_logged" || c?.verdict === "too_few_logged";
  box.append(el("div", c?.message ?? "no canary probes yet: the auditor's honesty is not checked yet", flagged ? "bad" : "muted"));
  if (s.confidence?.onesFlaggedAfter && s.confidence?.zerosFlaggedAfter) {
    box.append(
      el(
        "div",
        `Canaries are random leaves no log holds, sent with every round. At this ratio, an auditor that answers LOGGED ` +
          `to everything is flagged after ${s.confidence.onesFlaggedAfter} canaries, one that answers NOT FOUND to ` +
          `everything after ${s.confidence.zerosFlaggedAfter}.`,
        "muted",
      ),
    );
  }
}

function renderSite(s) {
  const box = $("site");
  box.textContent = "";
  const site = s.site;
  if (!s.active) {
    box.append(el("div", "Not set up.", "muted"));
  } else if (!site?.known) {
    box.append(el("div", "No certificate known for this tab: reload the page (certificates are kept in memory only, per tab).", "muted"));
  } else if (site.error) {
    box.append(el("div", `${site.host}: ${site.error}`, "bad"));
  } else if (!site.scts.length) {
    box.append(el("div", `${site.host}: the certificate has no embedded SCTs (its SCTs, if any, come by TLS or OCSP, which extensions cannot read).`, "muted"));
  } else {
    box.append(el("div", `${site.host}: ${plural(site.scts.length, "embedded SCT")}`));
    const t = el("table");
    for (const c of site.scts) {
      const tr = t.insertRow();
      tr.insertCell().textContent = `${c.log}, ${new Date(c.timestamp_ms).toISOString().slice(0, 10)}`;
      const td = tr.insertCell();
      td.textContent = c.text;
      if (c.state === "report_ready" || c.state === "reported" || c.state === "not_found" || c.state === "later_epoch") td.className = "bad";
      else if (c.state === "logged") td.className = "ok";
    }
    box.append(t);
  }
}

function renderProblems(s) {
  const p = $("problems");
  p.textContent = "";
  if (!s.active) return;
  const ul = el("ul");
  for (const r of s.reports) {
    const sent = r.sent && !r.sent.error;
    const li = el(
      "li",
      sent
        ? `Reported: ${r.host ?? short(r.leaf_hash)}: NOT FOUND in epochs ${r.not_found_in_epochs.join(" and ")}; ` +
            `sent to ${r.sent.auditor} on ${time(r.sent.at)} (${r.sent.result})`
        : `NOT FOUND twice: ${r.host ?? short(r.leaf_hash)} in epochs ${r.not_found_in_epochs.join(" and ")} ` +
            `(${time(r.reported_at_ms)}): the log or the auditor misbehaved. Report ready, not sent.`,
      "bad",
    );
    if (!sent) li.append(reportControls(r));
    ul.append(li);
  }
  // NOT FOUND answers still waiting for their re-check: the latest per
  // certificate (a second NOT FOUND is a report, listed above).
  const waiting = new Set(s.queue.map((i) => i.leaf_hash));
  const latest = new Map();
  for (const a of s.notFound) if (waiting.has(a.leaf_hash)) latest.set(a.leaf_hash, a);
  for (const a of latest.values()) {
    ul.append(
      el(
        "li",
        `NOT FOUND: ${a.host ?? short(a.leaf_hash)} in epoch ${a.epoch} (${time(a.at)}): the entry is not in the auditor's ` +
          "filters for that epoch; either the log has not published it (yet) or the auditor's data is wrong. " +
          "Re-checked in a later epoch before anything is reported.",
        "bad",
      ),
    );
  }
  const u = s.unauditable;
  if (u.badSignature || u.unknownLog) {
    const li = el(
      "li",
      `${u.badSignature} SCT(s) with a signature that does not verify, ${u.unknownLog} from logs not in the log list: not audited`,
      "bad",
    );
    if (u.last) li.append(el("div", `last: ${u.last.host ?? "?"}: ${u.last.reason}`, "muted"));
    ul.append(li);
  }
  if (s.expired) ul.append(el("li", `${s.expired} queued SCT(s) expired unaudited (kept at most 14 days)`, "muted"));
  if (ul.children.length) p.append(ul);
  else if (s.week.audits === 0 && s.rounds === 0) p.append(el("div", "None so far (no audits yet).", "muted"));
  else p.append(el("div", "None: every audit so far answered LOGGED.", "ok"));
}

function renderQueue(s) {
  const q = $("queue");
  q.textContent = "";
  if (!s.active) return;
  if (!s.queue.length) {
    q.append(el("div", "None.", "muted"));
  } else {
    const t = el("table");
    for (const item of s.queue) {
      const tr = t.insertRow();
      tr.insertCell().textContent = item.host ?? short(item.leaf_hash);
      tr.insertCell().textContent = why(item);
    }
    q.append(t);
  }
  if (!s.readsConnections) {
    q.append(el("div", "This browser does not expose connection certificates: only certificates added by hand are audited.", "muted"));
  } else if (s.testingSampleAll) {
    q.append(el("div", "Testing: every new connection is sampled.", "muted"));
  }
}

function render(s) {
  renderSetup(s);
  renderWeek(s);
  renderAuditor(s);
  renderCheck(s);
  renderSite(s);
  renderProblems(s);
  renderQueue(s);
  $("run").disabled = !s.active;
}

// Sending a report is the user's decision: it tells the auditor which
// site's certificate this is (an audit never does). The click asks Firefox
// for the optional "browsingActivity" data collection; nothing is sent
// unless it is granted.
function reportControls(r) {
  const box = el("div");
  box.append(
    el(
      "div",
      "Sending the report lets the auditor check it and take it to the log's operator, but it names this site's " +
        "certificate, so the auditor learns that you saw this site. Nothing is sent unless you click.",
      "muted",
    ),
  );
  if (r.sent?.error) box.append(el("div", `Sending failed: ${r.sent.error}`, "bad"));
  const b = el("button", "Send report to the auditor");
  b.className = "send-report";
  b.dataset.leaf = r.leaf_hash;
  b.onclick = async () => {
    let granted = true;
    try {
      // Must be the first thing the click does (user activation).
      granted = await api.permissions.request({ data_collection: ["browsingActivity"] });
    } catch (_) {
      /* this browser has no data collection permissions: the click is the consent */
    }
    if (!granted) {
      box.append(el("div", "Not sent: the permission to share browsing activity was declined.", "bad"));
      return;
    }
    b.disabled = true;
    b.textContent = "sending…";
    try {
      await send({ type: "send-report", leaf_hash: r.leaf_hash, consent: true });
    } catch (_) {
      /* recorded in reportsSent; refresh shows it */
    }
    refresh();
  };
  box.append(b);
  return box;
}

let tabId;
async function refresh() {
  try {
    render(await send({ type: "popup-state", tabId }));
  } catch (e) {
    $("error").hidden = false;
    $("error").textContent = e.message;
  }
}

$("settings").onclick = () => {
  api.runtime.openOptionsPage();
  window.close();
};

$("run").onclick = async () => {
  $("runResult").textContent = "running…";
  try {
    const c = await send({ type: "run-audits" });
    $("runResult").textContent =
      `${c.queries} queries: ${c.audited} audits (${c.logged} LOGGED, ${c.notFound} NOT FOUND), ${c.canaries} canaries` +
      (c.failed ? `, ${c.failed} failed` : "");
  } catch (e) {
    $("runResult").textContent = "failed (see above)";
  }
  refresh();
};

api.storage.onChanged.addListener((_changes, area) => {
  if (area === "local") refresh();
});

currentTabId().then((id) => {
  tabId = id;
  refresh();
});
