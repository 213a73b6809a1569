// Shared by background.js, options.js and popup.js.
export const DEFAULT_CONFIG = {
  // Base URL of the auditor-server (serves GET /v1/manifest). Empty: no audits.
  auditorUrl: "",
  // Chrome's log list v3: the SCT signatures are checked against its keys.
  logListUrl: "https://www.gstatic.com/ct/log_list/v3/log_list.json",
  // Testing only: sample every new connection instead of 1 in 1000, so that
  // a test can tell which connections are audited. Each sampled connection
  // costs up to two audits (≈ 0.5 MB up each).
  testingSampleAll: false,
};
