//! wasm-bindgen exports: exactly what a browser extension needs.
//!
//! The extension does the I/O (`fetch`, storage, reading the connection's
//! certificates) and calls these for the rest:
//!
//! ```js
//! const scts = JSON.parse(inspect(certDer, issuerDer, logListJson));       // rebuild + verify
//! // For a sampled connection (1/1000, drawn with crypto.getRandomValues):
//! let queue = queueAdd(queue, certDer, issuerDer, logListJson, Date.now(), 2); // ≤ 2 SCTs
//! const prober = new Prober(manifestBytes);                                 // GET /v1/manifest
//! for (const i of JSON.parse(queueReady(queue, manifestBytes, Date.now()))) {
//!   const q = prober.prepare(JSON.parse(queue).items[i].leaf_hash);        // random filter, YPIR query
//!   const resp = await fetch(q.url(server), {method: "POST", body: q.body(),
//!                            headers: {"content-type": "application/octet-stream"}});
//!   const logged = q.decode(new Uint8Array(await resp.arrayBuffer()));
//!   const out = JSON.parse(queueRecord(queue, i, logged, q.epoch(), q.filter(), server, Date.now()));
//!   queue = out.queue;                        // persist in extension storage
//!   // what the answer means: LOGGED with the epoch's fill ratio, NOT FOUND certain
//!   const text = prober.verdict(logged, out.report?.not_found_in_epochs ?? []);
//!   if (out.report) { /* show / submit the misbehaviour report */ }
//! }
//! // Canaries (the extension pads every round with them): a random leaf no
//! // log holds, probed like any other; the tally tests the auditor.
//! const c = prober.prepare(canaryLeaf());
//! // … POST c.body() as above, then:
//! tally = canaryRecord(tally, server, c.epoch(), prober.fillRatio(), c.decode(answer));
//! const check = JSON.parse(canaryCheck(tally));   // verdict, measured vs stated fill ratio
//! ```
//! Indices returned by `queueReady` must be processed from the last to the
//! first (recording a result may remove an item).
//!
//! A query whose group fails (network error, timeout, 5xx, 503/429) is
//! not sent again: [`Fallback`] says whether to draw a fresh query
//! (`prober.prepare` again: a fresh random database and LWE secret) and
//! when a resting group may be asked (docs/protocol.md §7.1):
//!
//! ```js
//! const fb = new Fallback(performance.now());
//! for (;;) {
//!   const q = prober.prepare(leafHex);
//!   let wait = fb.beforeSend(q.group(), performance.now());  // ms; -1: skip
//!   if (wait > 0) { await sleep(wait); wait = fb.beforeSend(q.group(), performance.now()); }
//!   if (wait < 0) { if (!fb.failed(q.group(), "resting", undefined, performance.now())) throw …; continue; }
//!   try { resp = await fetch(q.url(server), {…, signal: AbortSignal.timeout(fb.timeoutMs(performance.now()))}); }
//!   catch (e) { kind = e.name === "TimeoutError" ? "timeout" : "unreachable"; }
//!   // else kind = fallbackFailure(resp.status) (undefined: not a failure the fallback handles)
//!   if (kind && fb.failed(q.group(), kind, resp?.headers.get("retry-after"), performance.now())) continue;
//!   …
//! }
//! ```
//!
//! Secrets (the YPIR query key) never leave the [`Query`] object and come
//! from the browser's CSPRNG (getrandom's `js` backend).

use std::sync::Arc;

use audit_proto::Manifest;
use wasm_bindgen::prelude::*;

use crate::canary::{self, CanaryProbe, CanaryTally};
use crate::fallback::{self, FallbackPolicy, Step};
use crate::policy::{wait_reason, AuditResult, PendingQueue, Recorded};
use crate::probe::{PreparedQuery, Prober as InnerProber};
use crate::sct;
use crate::verdict::{self, Confidence};

fn js(e: impl std::fmt::Display) -> JsError {
    JsError::new(&e.to_string())
}

/// JSON array of the certificate's SCTs: log, timestamp, extensions,
/// rebuilt leaf hash, signature status (with `signature.message`, the
/// sentence for people). `issuer_der` may be empty when `tls_sct` (a
/// TLS-delivered SCT) is given, or for a certificate without embedded SCTs.
#[wasm_bindgen]
pub fn inspect(
    cert_der: &[u8],
    issuer_der: &[u8],
    log_list_json: &[u8],
    tls_sct: Option<Vec<u8>>,
) -> Result<String, JsError> {
    let list = sct::parse_log_list(log_list_json).map_err(js)?;
    let checked = match tls_sct {
        Some(s) => vec![sct::delivered_sct(cert_der, &s, &list).map_err(js)?],
        None => embedded_scts(cert_der, issuer_der, &list)?,
    };
    serde_json::to_string(&checked).map_err(js)
}

/// [`sct::embedded_scts`], saying so when the certificate has embedded
/// SCTs but `issuer_der` is empty (a certificate without them needs no
/// issuer: it has none to check).
fn embedded_scts(
    cert_der: &[u8],
    issuer_der: &[u8],
    list: &ct_core::loglist::LogList,
) -> Result<Vec<sct::CheckedSct>, JsError> {
    if issuer_der.is_empty() && sct::has_embedded_scts(cert_der).map_err(js)? {
        return Err(js(
            "the certificate's embedded SCTs need the issuer certificate to rebuild their leaf",
        ));
    }
    sct::embedded_scts(cert_der, issuer_der, list).map_err(js)
}

/// Adds up to `max_scts` of the auditable embedded SCTs of a certificate,
/// chosen uniformly (the policy audits 2 per sampled connection), to the
/// pending queue (JSON in, JSON out; `""` is an
/// empty queue; deduplicated and capped). A certificate without embedded
/// SCTs adds nothing.
#[wasm_bindgen(js_name = queueAdd)]
pub fn queue_add(
    queue_json: &str,
    cert_der: &[u8],
    issuer_der: &[u8],
    log_list_json: &[u8],
    now_ms: f64,
    max_scts: u32,
) -> Result<String, JsError> {
    let list = sct::parse_log_list(log_list_json).map_err(js)?;
    let chain = [cert_der.to_vec(), issuer_der.to_vec()];
    let checked = embedded_scts(cert_der, issuer_der, &list)?;
    add_pending(queue_json, &checked, &chain, now_ms, max_scts)
}

fn add_pending(
    queue_json: &str,
    checked: &[sct::CheckedSct],
    chain: &[Vec<u8>],
    now_ms: f64,
    max: u32,
) -> Result<String, JsError> {
    let mut q = parse_queue(queue_json)?;
    let mut candidates: Vec<_> = checked
        .iter()
        .filter_map(|c| c.to_pending(chain, now_ms as u64))
        .collect();
    let mut taken = 0;
    while taken < max && !candidates.is_empty() {
        // Uniform choice among the remaining SCTs (rejection sampling).
        let i = crate::probe::choose_filter(candidates.len() as u32).map_err(js)? as usize;
        q.push(candidates.swap_remove(i));
        taken += 1;
    }
    Ok(q.to_json())
}

/// JSON array of the indices of pending audits ready against the manifest.
#[wasm_bindgen(js_name = queueReady)]
pub fn queue_ready(queue_json: &str, manifest_json: &[u8], now_ms: f64) -> Result<String, JsError> {
    let q = parse_queue(queue_json)?;
    let m = Manifest::from_json(manifest_json).map_err(js)?;
    serde_json::to_string(&q.ready(&m, now_ms as u64)).map_err(js)
}

/// Why each pending audit waits, against the manifest: a JSON array with
/// one object per queue item, in queue order, `{"state": S, "message": M}`
/// where `M` is the sentence for people and `S` is `"ready"`, `"mmd"` (the
/// SCT is younger than the log's MMD; `due_ms` says until when),
/// `"coverage"` (the epoch's data of the log ends before the SCT),
/// `"log_not_tracked"` (this auditor does not track the log at all, so the
/// SCT cannot be audited here; `log_id` names it), `"later_epoch"` (a
/// re-check after a first NOT FOUND in epoch `not_found_in`, waiting for a
/// later epoch) or `"invalid"` (`detail` says why). `log_names_json` maps
/// base64 LogIDs to the names messages use (absent, `""` or `"{}"`: the
/// LogIDs).
#[wasm_bindgen(js_name = queueStatus)]
pub fn queue_status(
    queue_json: &str,
    manifest_json: &[u8],
    now_ms: f64,
    log_names_json: Option<String>,
) -> Result<String, JsError> {
    let q = parse_queue(queue_json)?;
    let m = Manifest::from_json(manifest_json).map_err(js)?;
    let names: std::collections::HashMap<String, String> = match log_names_json.as_deref() {
        Some(j) if !j.trim().is_empty() => serde_json::from_str(j).map_err(js)?,
        _ => Default::default(),
    };
    let states: Vec<serde_json::Value> = q
        .items
        .iter()
        .map(|p| match wait_reason(p, &m, now_ms as u64) {
            Ok(None) => serde_json::json!({
                "state": "ready",
                "message": "ready: audited in the next round",
            }),
            Ok(Some(reason)) => {
                let name = names.get(&p.log_id.to_string()).map(String::as_str);
                let mut v = serde_json::to_value(&reason).unwrap_or_default();
                v["message"] = reason.message(name).into();
                v
            }
            Err(e) => serde_json::json!({
                "state": "invalid",
                "detail": e.to_string(),
                "message": format!("cannot be audited: {e}"),
            }),
        })
        .collect();
    serde_json::to_string(&states).map_err(js)
}

/// Records the result of auditing item `index`; returns
/// `{"queue": <queue JSON>, "report": <misbehaviour report or null>}`.
#[wasm_bindgen(js_name = queueRecord)]
pub fn queue_record(
    queue_json: &str,
    index: usize,
    logged: bool,
    epoch: f64,
    filter: u32,
    auditor: &str,
    now_ms: f64,
) -> Result<String, JsError> {
    let mut q = parse_queue(queue_json)?;
    let epoch = epoch as u64;
    let result = if logged {
        AuditResult::Logged { epoch, filter }
    } else {
        AuditResult::NotFound { epoch, filter }
    };
    let report = match q
        .record(index, result, auditor, now_ms as u64)
        .map_err(js)?
    {
        Recorded::Report(r) => Some(r),
        _ => None,
    };
    serde_json::to_string(&serde_json::json!({ "queue": q.to_json(), "report": report }))
        .map_err(js)
}

fn parse_queue(s: &str) -> Result<PendingQueue, JsError> {
    if s.trim().is_empty() {
        Ok(PendingQueue::new())
    } else {
        PendingQueue::from_json(s.as_bytes()).map_err(js)
    }
}

/// A canary's leaf hash (64 hex digits): 32 random bytes from the
/// browser's CSPRNG, which no log holds. Probed like any leaf
/// (`prober.prepare(canaryLeaf())`), it reads 1 with the epoch's fill ratio.
#[wasm_bindgen(js_name = canaryLeaf)]
pub fn canary_leaf() -> Result<String, JsError> {
    Ok(audit_proto::hex::encode(
        &canary::canary_leaf().map_err(js)?,
    ))
}

/// Records a canary's answer in the tally of `auditor` (JSON in, JSON out;
/// `""` is an empty tally; a tally of another auditor starts clean).
/// `claimed` is the epoch's stated fill ratio ([`Prober::fill_ratio`]).
#[wasm_bindgen(js_name = canaryRecord)]
pub fn canary_record(
    tally_json: &str,
    auditor: &str,
    epoch: f64,
    claimed: f64,
    logged: bool,
) -> Result<String, JsError> {
    let mut t = parse_tally(tally_json, auditor)?;
    t.record(
        auditor,
        CanaryProbe {
            epoch: epoch as u64,
            claimed,
            logged,
        },
    )
    .map_err(js)?;
    serde_json::to_string(&t).map_err(js)
}

/// The binomial test of the tally (JSON): `probes`, `logged`, `measured`
/// (the fill ratio the canaries measured, or null), `claimed` (the mean
/// stated ratio, or null), `p_at_least`, `p_at_most`, `verdict`
/// (`"consistent"`, `"too_many_logged"`, `"too_few_logged"`) and
/// `message`, the sentence for people.
#[wasm_bindgen(js_name = canaryCheck)]
pub fn canary_check(tally_json: &str) -> Result<String, JsError> {
    let t = parse_tally(tally_json, "")?;
    serde_json::to_string(&t.check()).map_err(js)
}

/// How many canaries, all answering LOGGED (`ones`) or all NOT FOUND, flag
/// an auditor that states fill ratio `p` (`undefined`: none can).
#[wasm_bindgen(js_name = canariesToFlag)]
pub fn canaries_to_flag(p: f64, ones: bool) -> Option<u32> {
    canary::canaries_to_flag(p, ones).map(|n| n as u32)
}

fn parse_tally(s: &str, auditor: &str) -> Result<CanaryTally, JsError> {
    if s.trim().is_empty() {
        return Ok(CanaryTally::new(auditor));
    }
    if s.len() > 1 << 20 {
        return Err(js("canary tally too large"));
    }
    serde_json::from_str(s).map_err(js)
}

/// Builds private queries for one epoch.
#[wasm_bindgen]
pub struct Prober(InnerProber);

#[wasm_bindgen]
impl Prober {
    /// From the manifest bytes (`GET /v1/manifest`), fully checked.
    #[wasm_bindgen(constructor)]
    pub fn new(manifest_json: &[u8]) -> Result<Prober, JsError> {
        let m = Manifest::from_json(manifest_json).map_err(js)?;
        Ok(Prober(InnerProber::new(Arc::new(m))))
    }

    /// The epoch.
    pub fn epoch(&self) -> f64 {
        self.0.manifest().epoch as f64
    }

    /// The probability that one audit of a never-logged SCT answers
    /// LOGGED in this epoch: its fill ratio, measured (the manifest's
    /// `fill_ratio`) or expected from |S| and k·N
    /// ([`Prober::fill_ratio_measured`]).
    #[wasm_bindgen(js_name = fillRatio)]
    pub fn fill_ratio(&self) -> f64 {
        Confidence::of(self.0.manifest()).false_positive_rate
    }

    /// Whether [`Prober::fill_ratio`] was measured when the epoch was built.
    #[wasm_bindgen(js_name = fillRatioMeasured)]
    pub fn fill_ratio_measured(&self) -> bool {
        Confidence::of(self.0.manifest()).measured
    }

    /// What an answer of this epoch means, for people: LOGGED with its
    /// odds, NOT FOUND with its certainty; `report_epochs` (a misbehaviour
    /// report's `not_found_in_epochs`, or empty) makes it the report's
    /// sentence.
    pub fn verdict(&self, logged: bool, report_epochs: Vec<f64>) -> String {
        let m = self.0.manifest();
        if logged {
            verdict::logged(m.epoch, Confidence::of(m))
        } else if report_epochs.is_empty() {
            verdict::not_found(m.epoch)
        } else {
            let epochs: Vec<u64> = report_epochs.iter().map(|&e| e as u64).collect();
            verdict::misbehaviour(&epochs)
        }
    }

    /// A query for the leaf hash (hex) in a uniformly random filter.
    pub fn prepare(&self, leaf_hash_hex: &str) -> Result<Query, JsError> {
        let leaf = audit_proto::hex::decode_array::<32>(leaf_hash_hex)
            .ok_or_else(|| js("leaf hash must be 64 hex digits"))?;
        Ok(Query(self.0.prepare(&leaf).map_err(js)?))
    }
}

/// One prepared query; holds its secret key.
#[wasm_bindgen]
pub struct Query(PreparedQuery);

#[wasm_bindgen]
impl Query {
    /// Path to POST to.
    pub fn path(&self) -> String {
        self.0.path.clone()
    }
    /// URL to POST to: the path on the shard the manifest names for this
    /// database, or on `auditor` (the base URL the manifest was fetched
    /// from) when the epoch is not sharded.
    pub fn url(&self, auditor: &str) -> String {
        self.0.url(auditor)
    }
    /// Body to POST.
    pub fn body(&self) -> Vec<u8> {
        self.0.body.clone()
    }
    /// Epoch queried.
    pub fn epoch(&self) -> f64 {
        self.0.epoch as f64
    }
    /// Filter probed.
    pub fn filter(&self) -> u32 {
        self.0.filter
    }
    /// The group serving its database (its shard; 0 unsharded): what
    /// [`Fallback`] rests.
    pub fn group(&self) -> u32 {
        self.0.group
    }
    /// The bit from the response body.
    pub fn decode(&self, response: &[u8]) -> Result<bool, JsError> {
        self.0.decode(response).map_err(js)
    }
}

/// The failure an HTTP status is for the fallback: `"overloaded"` (503,
/// 429), `"server_error"` (other 5xx), or `undefined` (answered, or an
/// error the fallback does not handle).
#[wasm_bindgen(js_name = fallbackFailure)]
pub fn fallback_failure(status: u16) -> Option<String> {
    fallback::Failure::of_status(status).map(|f| f.name().to_owned())
}

/// The fallback state of one query (all its attempts), with the default
/// policy (at most `fallback::MAX_REDRAWS` redraws, a deadline, rests as
/// `Retry-After` says). Times are any monotonic milliseconds
/// (`performance.now()`).
#[wasm_bindgen]
pub struct Fallback(fallback::Fallback);

#[wasm_bindgen]
impl Fallback {
    /// A query started at `now_ms`.
    #[wasm_bindgen(constructor)]
    pub fn new(now_ms: f64) -> Fallback {
        Fallback(fallback::Fallback::new(
            FallbackPolicy::default(),
            ms(now_ms),
        ))
    }

    /// Before sending a query just drawn for `group`: 0 send now; > 0 its
    /// group rests, wait that many ms and ask again; -1 do not send it
    /// (report `failed(group, "resting", …)` and draw again).
    #[wasm_bindgen(js_name = beforeSend)]
    pub fn before_send(&mut self, group: u32, now_ms: f64) -> f64 {
        match self.0.before_send(group, ms(now_ms)) {
            Step::Send { .. } => 0.0,
            Step::Wait { ms } => ms as f64,
            Step::Skip => -1.0,
        }
    }

    /// The timeout of an attempt sent at `now_ms` (ms).
    #[wasm_bindgen(js_name = timeoutMs)]
    pub fn timeout_ms(&self, now_ms: f64) -> f64 {
        self.0.timeout_ms(ms(now_ms)) as f64
    }

    /// Records a failed attempt at `group`: `kind` is `"unreachable"`,
    /// `"timeout"`, `"server_error"`, `"overloaded"` or `"resting"`;
    /// `retry_after` the answer's `Retry-After` header. Returns whether to
    /// draw again (false: give up, the bound or the deadline is reached).
    pub fn failed(
        &mut self,
        group: u32,
        kind: &str,
        retry_after: Option<String>,
        now_ms: f64,
    ) -> Result<bool, JsError> {
        let f = fallback::Failure::from_name(kind)
            .ok_or_else(|| js(format!("unknown failure kind {kind:?}")))?;
        Ok(self.0.failed(group, f, retry_after.as_deref(), ms(now_ms)))
    }

    /// Failed attempts so far.
    pub fn failures(&self) -> u32 {
        self.0.failures().len() as u32
    }

    /// The failed attempts by reason, for people (`unreachable ×2, …`).
    pub fn reasons(&self) -> String {
        fallback::FallbackStats::reasons(self.0.failures())
    }

    /// Time spent waiting for resting groups (ms).
    #[wasm_bindgen(js_name = waitedMs)]
    pub fn waited_ms(&self) -> f64 {
        self.0.waited_ms() as f64
    }
}

/// Milliseconds from JS (non-negative, finite).
fn ms(v: f64) -> u64 {
    if v.is_finite() && v > 0.0 {
        v as u64
    } else {
        0
    }
}
