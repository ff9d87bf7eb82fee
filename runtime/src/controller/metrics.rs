//! Reconcile metrics, with controller-runtime's names and counting so existing dashboards work:
//! `controller_runtime_reconcile_total{controller,result}` (result: success, error,
//! requeue_after), `controller_runtime_reconcile_errors_total{controller}`,
//! `controller_runtime_reconcile_panics_total{controller}`,
//! `controller_runtime_reconcile_time_seconds{controller}` and
//! `controller_runtime_active_workers{controller}`. A recovered panic is an error as
//! controller-runtime counts it: in the panics, and in the errors and under `result="error"`.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ControllerLabel {
    controller: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ResultLabels {
    controller: String,
    result: &'static str,
}

/// The reconcile metric families, registered once and shared by every controller.
#[derive(Debug, Clone)]
pub struct Metrics {
    total: Family<ResultLabels, Counter>,
    errors: Family<ControllerLabel, Counter>,
    panics: Family<ControllerLabel, Counter>,
    time: Family<ControllerLabel, Histogram>,
    active_workers: Family<ControllerLabel, Gauge>,
}

impl Metrics {
    /// Registers the families in `registry`.
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = Self {
            total: Family::default(),
            errors: Family::default(),
            panics: Family::default(),
            // controller-runtime's buckets span 5 ms to 60 s; these span 1 ms to ~65 s.
            time: Family::new_with_constructor(|| Histogram::new(exponential_buckets(0.001, 2.0, 17))),
            active_workers: Family::default(),
        };
        registry.register(
            "controller_runtime_reconcile",
            "Total number of reconciliations per controller",
            metrics.total.clone(),
        );
        registry.register(
            "controller_runtime_reconcile_errors",
            "Total number of reconciliation errors per controller",
            metrics.errors.clone(),
        );
        registry.register(
            "controller_runtime_reconcile_panics",
            "Total number of reconciliation panics per controller",
            metrics.panics.clone(),
        );
        registry.register(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            metrics.time.clone(),
        );
        registry.register(
            "controller_runtime_active_workers",
            "Number of currently used workers per controller",
            metrics.active_workers.clone(),
        );
        metrics
    }

    pub(crate) fn for_controller(&self, controller: &str) -> ControllerMetrics {
        let label = ControllerLabel { controller: controller.to_string() };
        let result =
            |result| self.total.get_or_create(&ResultLabels { controller: controller.to_string(), result }).clone();
        ControllerMetrics {
            success: result("success"),
            error: result("error"),
            requeue_after: result("requeue_after"),
            errors: self.errors.get_or_create(&label).clone(),
            panics: self.panics.get_or_create(&label).clone(),
            time: self.time.get_or_create(&label).clone(),
            active_workers: self.active_workers.get_or_create(&label).clone(),
        }
    }
}

/// One controller's series, resolved once so the hot path does no label lookups.
#[derive(Debug, Clone)]
pub(crate) struct ControllerMetrics {
    pub(crate) success: Counter,
    pub(crate) error: Counter,
    pub(crate) requeue_after: Counter,
    pub(crate) errors: Counter,
    pub(crate) panics: Counter,
    pub(crate) time: Histogram,
    pub(crate) active_workers: Gauge,
}
