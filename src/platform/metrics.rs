//! The process-wide Prometheus recorder (`ops` renders it at `/metrics`).

use std::sync::OnceLock;

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

/// One recorder per process (tests run several apps in one process).
pub fn handle() -> PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new()
                .set_buckets(&[0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0])
                .expect("static buckets")
                .build_recorder();
            let handle = recorder.handle();
            // Another recorder may already be installed (e.g. by a test harness): keep ours
            // rendering what it records either way.
            let _ = metrics::set_global_recorder(recorder);
            handle
        })
        .clone()
}
