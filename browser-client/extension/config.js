// Shared by background.js and options.js.
export const DEFAULT_CONFIG = {
  // Base URL of the auditor-server (serves GET /v1/manifest). Empty: no audits.
  auditorUrl: "",
  // Chrome's log list v3: the SCT signatures are checked against its keys.
  logListUrl: "https://www.gstatic.com/ct/log_list/v3/log_list.json",
};
