// First-run page: the user chooses the auditor and agrees. Only then is
// anything sampled, stored or fetched (background.js, isActive).
import { checkAuditorUrl, originPattern } from "./config.js";

const api = globalThis.browser ?? globalThis.chrome;
const $ = (id) => document.getElementById(id);

async function show() {
  const { config } = await api.storage.local.get("config");
  if (config?.auditorUrl) $("auditorUrl").value = config.auditorUrl;
  if (config?.consentedAt) {
    $("done").hidden = false;
    $("done").textContent = `Set up on ${new Date(config.consentedAt).toLocaleString()} with ${config.auditorUrl}. ` +
      "You can change the auditor on the options page.";
  }
}

$("setup").addEventListener("submit", (ev) => {
  ev.preventDefault();
  let auditorUrl;
  try {
    auditorUrl = checkAuditorUrl($("auditorUrl").value);
  } catch (e) {
    $("result").textContent = e.message;
    return;
  }
  if (!$("agree").checked) {
    $("result").textContent = "please read the privacy notice and tick the box";
    return;
  }
  // Asked inside the click (user activation), before anything else.
  api.permissions
    .request({ origins: [originPattern(auditorUrl)] })
    .then(async (granted) => {
      if (!granted) {
        $("result").textContent = `not set up: the extension needs access to ${new URL(auditorUrl).origin} to ask the auditor`;
        return;
      }
      const { config } = await api.storage.local.get("config");
      await api.storage.local.set({ config: { ...(config ?? {}), auditorUrl, consentedAt: Date.now() } });
      $("result").textContent = "";
      await show();
    })
    .catch((e) => ($("result").textContent = e.message));
});

show();
