//! Prometheus metrics (`GET /metrics`).

use prometheus::{
    Encoder, Gauge, GaugeVec, Histogram, HistogramOpts, IntCounter, IntCounterVec, IntGauge, Opts,
    Registry, TextEncoder,
};

/// Every metric the server exports.
#[derive(Clone)]
pub struct Metrics {
    registry: Registry,
    /// Names of the registered metrics, in registration order.
    names: Vec<String>,
    /// Queries by outcome (`ok`, or the error code).
    pub queries: IntCounterVec,
    /// Query bytes received (accepted queries).
    pub bytes_in: IntCounter,
    /// Response bytes sent.
    pub bytes_out: IntCounter,
    /// Wall time of one answering pass (a whole batch).
    pub answer_seconds: Histogram,
    /// Time from request to response, for answered queries.
    pub request_seconds: Histogram,
    /// Queries per answering pass.
    pub batch_size: Histogram,
    /// Manifest requests.
    pub manifest_requests: IntCounter,
    /// The epoch currently served.
    pub epoch: IntGauge,
    /// Seconds since the current epoch was built.
    pub epoch_age_seconds: Gauge,
    /// |S| of the current epoch.
    pub epoch_entries: IntGauge,
    /// Seconds the last epoch build took.
    pub epoch_build_seconds: Gauge,
    /// Epochs published since start.
    pub epochs_published: IntCounter,
    /// Failed epoch builds or loads.
    pub epoch_failures: IntCounter,
    /// 1 if the entry store answered the last connection (a build, a
    /// report), 0 if it could not be reached.
    pub store_up: IntGauge,
    /// Per log: seconds between now and the epoch's ingested-until.
    pub ingest_lag_seconds: GaugeVec,
    /// Open HTTP connections.
    pub open_connections: IntGauge,
    /// Object-store mode: the newest epoch prepared in the object store.
    pub epoch_prepared: IntGauge,
    /// Object-store mode: shards that reported ready for it.
    pub epoch_ready_shards: IntGauge,
    /// Object-store mode: shards it is planned for.
    pub epoch_planned_shards: IntGauge,
    /// Object-store mode: the epoch this shard has built and reported
    /// ready, waiting to be published (0: none).
    pub epoch_staged: IntGauge,
    /// Object-store mode: prepared epochs `epoch publish` gave up on.
    pub epoch_publish_timeouts: IntCounter,
    /// Object-store mode: failed object store operations.
    pub object_store_errors: IntCounter,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}

fn hist(name: &str, help: &str, buckets: Vec<f64>) -> Histogram {
    // Names and buckets are constants: construction cannot fail.
    Histogram::with_opts(HistogramOpts::new(name, help).buckets(buckets))
        .unwrap_or_else(|e| unreachable!("histogram {name}: {e}"))
}

/// Every `outcome` label a query can end with: `ok` and each error code the
/// query route answers with (all but `not_found`, `method_not_allowed` and
/// `no_epoch`, which only other routes send).
pub(crate) fn query_outcomes() -> impl Iterator<Item = &'static str> {
    use audit_proto::api::ErrorCode;
    std::iter::once("ok").chain(
        ErrorCode::ALL
            .into_iter()
            .filter(|c| {
                !matches!(
                    c,
                    ErrorCode::NotFound | ErrorCode::MethodNotAllowed | ErrorCode::NoEpoch
                ) && !ErrorCode::REPORT_ONLY.contains(c)
            })
            .map(ErrorCode::as_str),
    )
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// A fresh registry with every metric registered.
    pub fn new() -> Metrics {
        let registry = Registry::new();
        let secs = vec![
            0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0,
        ];
        let mut m = Metrics {
            queries: IntCounterVec::new(
                Opts::new("auditor_queries_total", "PIR queries by outcome"),
                &["outcome"],
            )
            .unwrap_or_else(|e| unreachable!("{e}")),
            bytes_in: IntCounter::new("auditor_query_bytes_total", "Query bytes received")
                .unwrap_or_else(|e| unreachable!("{e}")),
            bytes_out: IntCounter::new("auditor_response_bytes_total", "Response bytes sent")
                .unwrap_or_else(|e| unreachable!("{e}")),
            answer_seconds: hist(
                "auditor_answer_seconds",
                "Wall time of one YPIR answering pass (one batch)",
                secs.clone(),
            ),
            request_seconds: hist(
                "auditor_request_seconds",
                "Query request latency (answered queries)",
                secs,
            ),
            batch_size: hist(
                "auditor_batch_size",
                "Queries answered per pass",
                vec![1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 16.0, 32.0, 64.0],
            ),
            manifest_requests: IntCounter::new(
                "auditor_manifest_requests_total",
                "Manifest requests",
            )
            .unwrap_or_else(|e| unreachable!("{e}")),
            epoch: IntGauge::new("auditor_epoch", "Epoch currently served")
                .unwrap_or_else(|e| unreachable!("{e}")),
            epoch_age_seconds: Gauge::new("auditor_epoch_age_seconds", "Age of the served epoch")
                .unwrap_or_else(|e| unreachable!("{e}")),
            epoch_entries: IntGauge::new(
                "auditor_epoch_entries",
                "Entries |S| in the served epoch",
            )
            .unwrap_or_else(|e| unreachable!("{e}")),
            epoch_build_seconds: Gauge::new(
                "auditor_epoch_build_seconds",
                "Duration of the served epoch's build",
            )
            .unwrap_or_else(|e| unreachable!("{e}")),
            epochs_published: IntCounter::new(
                "auditor_epochs_published_total",
                "Epochs swapped in",
            )
            .unwrap_or_else(|e| unreachable!("{e}")),
            epoch_failures: IntCounter::new(
                "auditor_epoch_failures_total",
                "Failed epoch builds or loads",
            )
            .unwrap_or_else(|e| unreachable!("{e}")),
            store_up: IntGauge::new(
                "auditor_store_up",
                "1 if the entry store answered the last connection (build or report), 0 if it could not be reached",
            )
            .unwrap_or_else(|e| unreachable!("{e}")),
            ingest_lag_seconds: GaugeVec::new(
                Opts::new(
                    "auditor_ingest_lag_seconds",
                    "Now minus the served epoch's ingested-until, per log",
                ),
                &["log_id"],
            )
            .unwrap_or_else(|e| unreachable!("{e}")),
            open_connections: IntGauge::new(
                "auditor_open_connections",
                "Open HTTP connections (at most [limits] max_connections)",
            )
            .unwrap_or_else(|e| unreachable!("{e}")),
            epoch_prepared: IntGauge::new(
                "auditor_epoch_prepared",
                "Newest epoch prepared in the object store (0: none seen)",
            )
            .unwrap_or_else(|e| unreachable!("{e}")),
            epoch_ready_shards: IntGauge::new(
                "auditor_epoch_ready_shards",
                "Shards that reported ready for the newest prepared epoch",
            )
            .unwrap_or_else(|e| unreachable!("{e}")),
            epoch_planned_shards: IntGauge::new(
                "auditor_epoch_planned_shards",
                "Shards the newest prepared epoch is planned for",
            )
            .unwrap_or_else(|e| unreachable!("{e}")),
            epoch_staged: IntGauge::new(
                "auditor_epoch_staged",
                "Epoch this shard has built and reported ready, not yet published (0: none)",
            )
            .unwrap_or_else(|e| unreachable!("{e}")),
            epoch_publish_timeouts: IntCounter::new(
                "auditor_epoch_publish_timeouts_total",
                "Prepared epochs the coordinator gave up publishing (not every shard ready)",
            )
            .unwrap_or_else(|e| unreachable!("{e}")),
            object_store_errors: IntCounter::new(
                "auditor_object_store_errors_total",
                "Failed object store operations",
            )
            .unwrap_or_else(|e| unreachable!("{e}")),
            registry,
            names: Vec::new(),
        };
        let collectors: Vec<Box<dyn prometheus::core::Collector>> = vec![
            Box::new(m.queries.clone()),
            Box::new(m.bytes_in.clone()),
            Box::new(m.bytes_out.clone()),
            Box::new(m.answer_seconds.clone()),
            Box::new(m.request_seconds.clone()),
            Box::new(m.batch_size.clone()),
            Box::new(m.manifest_requests.clone()),
            Box::new(m.epoch.clone()),
            Box::new(m.epoch_age_seconds.clone()),
            Box::new(m.epoch_entries.clone()),
            Box::new(m.epoch_build_seconds.clone()),
            Box::new(m.epochs_published.clone()),
            Box::new(m.epoch_failures.clone()),
            Box::new(m.store_up.clone()),
            Box::new(m.ingest_lag_seconds.clone()),
            Box::new(m.open_connections.clone()),
            Box::new(m.epoch_prepared.clone()),
            Box::new(m.epoch_ready_shards.clone()),
            Box::new(m.epoch_planned_shards.clone()),
            Box::new(m.epoch_staged.clone()),
            Box::new(m.epoch_publish_timeouts.clone()),
            Box::new(m.object_store_errors.clone()),
        ];
        for c in collectors {
            m.names.extend(c.desc().iter().map(|d| d.fq_name.clone()));
            // Distinct constant names: registration cannot fail.
            let _ = m.registry.register(c);
        }
        // Every outcome is exported from the start, at 0, so that a rate or
        // an alert on it does not wait for its first occurrence.
        for outcome in query_outcomes() {
            m.queries.with_label_values(&[outcome]);
        }
        m
    }

    /// Registers a further collector (e.g. [`crate::reports::ReportMetrics`])
    /// in this registry; its names join [`Metrics::names`].
    pub fn register(&mut self, c: Box<dyn prometheus::core::Collector>) {
        self.names
            .extend(c.desc().iter().map(|d| d.fq_name.clone()));
        // Callers register distinct constant names.
        let _ = self.registry.register(c);
    }

    /// Names of every registered metric (histograms by their base name),
    /// including labelled ones that have no series yet.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// Refreshes the time-dependent gauges from the served manifest.
    pub fn observe_epoch(&self, manifest: Option<&audit_proto::Manifest>, now_s: i64) {
        let Some(m) = manifest else { return };
        self.epoch.set(m.epoch as i64);
        self.epoch_entries.set(m.entries as i64);
        self.epoch_age_seconds.set((now_s - m.created_at) as f64);
        self.ingest_lag_seconds.reset();
        for l in &m.logs {
            let lag = now_s as f64 - l.ingested_until_ms as f64 / 1000.0;
            self.ingest_lag_seconds
                .with_label_values(&[l.log_id.to_string().as_str()])
                .set(lag);
        }
    }

    /// Prometheus text exposition.
    pub fn render(&self) -> String {
        let mut buf = Vec::new();
        let _ = TextEncoder::new().encode(&self.registry.gather(), &mut buf);
        String::from_utf8(buf).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_query_outcome_is_exported_at_zero_from_the_start() {
        let m = Metrics::new();
        let text = m.render();
        for o in query_outcomes() {
            let line = format!("auditor_queries_total{{outcome=\"{o}\"}} 0");
            assert!(text.contains(&line), "missing {line} in\n{text}");
        }
        assert!(text.contains("outcome=\"internal\""));
        assert!(!text.contains("outcome=\"not_found\""));
        m.queries.with_label_values(&["ok"]).inc();
        assert!(m
            .render()
            .contains("auditor_queries_total{outcome=\"ok\"} 1"));
    }

    #[test]
    fn names_cover_every_registered_metric() {
        let m = Metrics::new();
        let names = m.names();
        assert_eq!(names.len(), 22, "{names:?}");
        for n in [
            "auditor_queries_total",
            "auditor_answer_seconds",
            "auditor_manifest_requests_total",
            "auditor_open_connections",
            "auditor_ingest_lag_seconds",
        ] {
            assert!(names.iter().any(|x| x == n), "{n} not in {names:?}");
        }
        // a labelled gauge without series is not in the text, but is named
        assert!(!m.render().contains("auditor_ingest_lag_seconds"));
    }
}
