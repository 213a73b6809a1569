// Shared by background.js, the extension's pages and the tests.
export const DEFAULT_CONFIG = {
  // Base URL of the auditor-server (serves GET /v1/manifest), chosen by the
  // user on the first-run page. Empty: nothing is sampled, stored or fetched.
  auditorUrl: "",
  // When the user agreed on the first-run page (ms), or null: until then the
  // extension does nothing at all.
  consentedAt: null,
  // Chrome's log list v3: the SCT signatures are checked against its keys.
  logListUrl: "https://www.gstatic.com/ct/log_list/v3/log_list.json",
  // Testing only: sample every new connection instead of 1 in 1000, so that
  // a test can tell which connections are audited.
  testingSampleAll: false,
  // Testing only: audit at the next round instead of after the random delay
  // from the visit (see schedule.js).
  testingNoDelay: false,
};

// The auditor's origin as a host permission pattern (ports are not part of
// match patterns), or null for a URL that is not http(s).
export function originPattern(url) {
  try {
    const u = new URL(url);
    if (u.protocol !== "https:" && u.protocol !== "http:") return null;
    return `${u.protocol}//${u.hostname}/*`;
  } catch (_) {
    return null;
  }
}

// An auditor URL the extension accepts: https, or http on this machine
// (local test auditors); no query or fragment. Returns the URL without a
// trailing slash, or throws a sentence for people.
export function checkAuditorUrl(text) {
  const s = String(text ?? "").trim().replace(/\/+$/, "");
  let u;
  try {
    u = new URL(s);
  } catch (_) {
    throw new Error(`not a URL: ${s || "(empty)"}`);
  }
  const local = u.hostname === "127.0.0.1" || u.hostname === "localhost";
  if (u.protocol !== "https:" && !(u.protocol === "http:" && local)) {
    throw new Error("the auditor must be an https:// URL (http:// only for 127.0.0.1 or localhost)");
  }
  if (u.search || u.hash || u.username || u.password) throw new Error("the auditor URL takes no query, fragment or user name");
  return s;
}
