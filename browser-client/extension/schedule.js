// When audits happen (docs/protocol.md §6.1): every constant and random
// draw of the extension's timing, in one module the tests import.
//
//  * An SCT seen on a visit waits a random delay from the visit, uniform in
//    [AUDIT_DELAY_MIN_H, AUDIT_DELAY_MAX_H] hours, and at least until the
//    log's maximum merge delay has passed since the SCT's timestamp.
//  * Rounds run at random times: the gap to the next round is uniform in
//    [ROUND_GAP_MIN_MIN, ROUND_GAP_MAX_MIN] minutes, drawn afresh after every
//    round, independent of visits.
//  * Every round sends exactly ROUND_SIZE queries: up to
//    ROUND_SIZE - MIN_CANARIES audits that are due (first audits and
//    re-checks alike), and canaries in every other slot. A canary queries a
//    random leaf in a random filter, hence a random database: to the auditor
//    and the network it is one more audit.

export const AUDIT_DELAY_MIN_H = 1;
export const AUDIT_DELAY_MAX_H = 25;
export const ROUND_GAP_MIN_MIN = 4 * 60;
export const ROUND_GAP_MAX_MIN = 12 * 60;
export const ROUND_SIZE = 4;
export const MIN_CANARIES = 2;
// Queue entries older than this are dropped (counted as expired): an SCT
// that could not be audited in two weeks (log not tracked, auditor down)
// is not kept for ever.
export const QUEUE_MAX_AGE_DAYS = 14;
// The badge and popup say so when no round has succeeded for this long.
export const STALL_HOURS = 48;
// A Retry-After of at most this many seconds is waited for inside the
// round (then the query is sent once more); a longer one ends the round,
// and no round starts before it has passed (at most RETRY_AFTER_MAX_S).
export const RETRY_IN_ROUND_MAX_S = 60;
export const RETRY_AFTER_MAX_S = 24 * 3600;

// Uniform in [0, 1) from 53 bits of the CSPRNG: nothing about the timing
// may be predictable by a server or the network.
export function uniform() {
  const w = crypto.getRandomValues(new Uint32Array(2));
  return ((w[0] >>> 5) * 67108864 + (w[1] >>> 6)) / 9007199254740992;
}

// Uniform integer in [0, n).
export function below(n) {
  return Math.min(n - 1, Math.floor(uniform() * n));
}

// Fisher-Yates with the CSPRNG.
export function shuffle(a) {
  for (let i = a.length - 1; i > 0; i--) {
    const j = below(i + 1);
    [a[i], a[j]] = [a[j], a[i]];
  }
  return a;
}

// The delay (ms) from a visit to the earliest round that may audit it.
export function auditDelayMs() {
  return (AUDIT_DELAY_MIN_H + uniform() * (AUDIT_DELAY_MAX_H - AUDIT_DELAY_MIN_H)) * 3600 * 1000;
}

// The gap (ms) from a round to the next.
export function roundGapMs() {
  return (ROUND_GAP_MIN_MIN + uniform() * (ROUND_GAP_MAX_MIN - ROUND_GAP_MIN_MIN)) * 60 * 1000;
}

// A round's slots: `due` audits (at most ROUND_SIZE - MIN_CANARIES are
// taken, chosen at random) and canaries in the rest, in random order.
// Returns [{kind: "audit", key} | {kind: "canary"}] of length ROUND_SIZE.
export function roundSlots(dueKeys) {
  const take = shuffle([...dueKeys]).slice(0, ROUND_SIZE - MIN_CANARIES);
  const slots = take.map((key) => ({ kind: "audit", key }));
  while (slots.length < ROUND_SIZE) slots.push({ kind: "canary" });
  return shuffle(slots);
}

// Retry-After (delta-seconds; an HTTP date is read too) in ms from now, or
// null when absent or unreadable; capped at RETRY_AFTER_MAX_S.
export function retryAfterMs(header, now = Date.now()) {
  if (header === null || header === undefined) return null;
  const v = String(header).trim();
  let ms = null;
  if (/^\d+$/.test(v)) ms = Number(v) * 1000;
  else if (v) {
    const t = Date.parse(v);
    if (Number.isFinite(t)) ms = Math.max(0, t - now);
  }
  return ms === null ? null : Math.min(ms, RETRY_AFTER_MAX_S * 1000);
}
