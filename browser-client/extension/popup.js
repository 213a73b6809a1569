// Toolbar popup: this week's audits and bytes, the pending queue and why
// each item waits, anything NOT FOUND or reported (with a button that
// sends a report to the auditor, the only way one is ever sent), the
// auditor and epoch.
// The background computes it all ("popup-state"); settings stay on the
// options page.

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

function why(item) {
  // browser-client's sentence (policy.rs, WaitReason), naming the log
  if (item.message) return item.message;
  switch (item.state) {
    case "ready":
      return "ready: audited in the next round";
    case "mmd":
      return `younger than the log's maximum merge delay: not before ${time(item.due_ms)}`;
    case "coverage":
      return "the auditor's epoch does not cover the SCT yet: waits for a later epoch";
    case "log_not_tracked":
      return `not auditable here: this auditor does not track log ${item.log_id}`;
    case "later_epoch":
      return `NOT FOUND in epoch ${item.not_found_in}: re-checked in a later epoch`;
    case "no_manifest":
      return "waits for the auditor's manifest (fetched hourly)";
    default:
      return `cannot be audited: ${item.detail ?? item.state}`;
  }
}

function render(s) {
  const week = $("week");
  week.textContent = "";
  week.append(el("div", `${s.week.audits} audit${s.week.audits === 1 ? "" : "s"} this week`, "big"));
  if (s.week.audits) {
    week.append(el("div", `${s.week.logged} LOGGED, ${s.week.audits - s.week.logged} NOT FOUND`));
  }
  week.append(el("div", `${bytes(s.week.bytes)} used (queries, answers and manifests since ${s.week.since})`, "muted"));
  if (s.confidence) {
    const c = s.confidence;
    week.append(
      el(
        "div",
        `LOGGED is probabilistic: an SCT that was never logged passes one audit with probability ` +
          `${c.fillRatio.toFixed(3)} (epoch ${c.epoch}'s ${c.measured ? "measured" : "expected"} fill ratio), ` +
          "at most ½ against a log that chooses its certificates adversarially. NOT FOUND is certain for its epoch.",
        "muted",
      ),
    );
  }

  $("auditor").textContent = s.auditor
    ? `Auditor ${s.auditor}, epoch ${s.epoch ?? "—"}` +
      (s.lastRunAt ? `; last round ${time(s.lastRunAt)}` : "; no round yet")
    : "No auditor configured: open Settings.";
  $("error").hidden = !s.lastError;
  $("error").textContent = s.lastError ? `Last round failed: ${s.lastError}` : "";

  const p = $("problems");
  p.textContent = "";
  const ul = el("ul");
  for (const r of s.reports) {
    const li = el(
      "li",
      `REPORTED: ${r.host ?? short(r.leaf_hash)}: not found in epochs ${r.not_found_in_epochs.join(", ")} ` +
        `(${time(r.reported_at_ms)}; details and download in Settings)`,
      "bad",
    );
    li.append(reportControls(r));
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
        `NOT FOUND: ${a.host ?? short(a.leaf_hash)} in epoch ${a.epoch} (${time(a.at)}): certain for that epoch; ` +
          "re-checked in a later epoch before anything is reported",
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
  if (ul.children.length) p.append(ul);
  else p.append(el("div", "None: every audit so far answered LOGGED.", "ok"));

  const q = $("queue");
  q.textContent = "";
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

// Sending a report is the user's decision: it tells the auditor which
// site's certificate this is (an audit never does). Nothing is sent until
// the button is clicked.
function reportControls(r) {
  const box = el("div");
  if (r.sent && !r.sent.error) {
    box.append(el("div", `Sent to ${r.sent.auditor} on ${time(r.sent.at)}: ${r.sent.result}.`, "muted"));
    return box;
  }
  box.append(
    el(
      "div",
      "The log promised to publish this certificate and did not. Sending the report lets the " +
        "auditor check it and take it to the log's operator, but it names this site's " +
        "certificate, so the auditor learns that you saw this site. Nothing is sent unless you click.",
      "muted",
    ),
  );
  if (r.sent?.error) box.append(el("div", `Sending failed: ${r.sent.error}`, "bad"));
  const b = el("button", "Send report to the auditor");
  b.className = "send-report";
  b.dataset.leaf = r.leaf_hash;
  b.onclick = async () => {
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

async function refresh() {
  try {
    render(await send({ type: "popup-state" }));
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
    $("runResult").textContent = `${c.audited} audited: ${c.logged} logged, ${c.notFound} not found`;
  } catch (e) {
    $("runResult").textContent = "failed (see above)";
  }
  refresh();
};

api.storage.onChanged.addListener((_changes, area) => {
  if (area === "local") refresh();
});

refresh();
