//! How an informer lists, watches and resyncs.

use std::time::Duration;

use super::Metrics;

/// How the informer gets the initial state (and the state after a `410 Gone`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum InitialListMode {
    /// Try a streaming list first. When the apiserver refuses it (400 / 422), use paginated
    /// lists for the informer's lifetime; when the bookmark that ends the initial events does
    /// not come in time (see [`Config::initial_events_timeout`]), a paginated list this once,
    /// and a streaming list again at the next sync (a quiet moment is not a missing feature).
    #[default]
    Auto,
    /// Always a streaming list (`sendInitialEvents=true`): a watch that starts with the current
    /// objects and marks their end with a bookmark. Needs Kubernetes 1.27+ with the `WatchList`
    /// feature gate on; failures are retried with backoff, never fall back.
    Streaming,
    /// Always a paginated list (`limit` + `continue`), then a watch.
    List,
}

/// Settings of one informer (or of every informer of a [`Factory`](super::Factory)).
///
/// ```
/// use std::time::Duration;
/// use operator_runtime::informer::{Config, InitialListMode};
///
/// let config = Config { resync_period: Some(Duration::from_secs(600)), initial_list: InitialListMode::List, ..Config::default() };
/// assert_eq!(config.page_size, 500);
/// ```
#[derive(Clone, Debug)]
pub struct Config {
    /// How often every cached object is re-delivered to the handlers as `on_update(obj, obj)`,
    /// so a controller re-checks the world it already saw. `None` or zero: never.
    pub resync_period: Option<Duration>,
    /// Only objects matching this label selector (`app=db,tier!=cache`) are listed and watched.
    pub label_selector: Option<String>,
    /// Only objects matching this field selector (`metadata.name=x`) are listed and watched.
    pub field_selector: Option<String>,
    /// Objects per list page (`limit`); 0 lists everything in one response. Default 500, the
    /// page size of client-go's pager.
    pub page_size: u32,
    /// Streaming list, paginated list, or try one then the other.
    pub initial_list: InitialListMode,
    /// In [`InitialListMode::Auto`], how long a streaming list may go without any event before
    /// the informer decides the end bookmark is not coming and falls back to a paginated list.
    /// Default 10 s, the interval at which client-go warns about a missing end bookmark.
    pub initial_events_timeout: Duration,
    /// Counters to keep, labelled with the resource; `None` keeps none.
    pub metrics: Option<Metrics>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            resync_period: None,
            label_selector: None,
            field_selector: None,
            page_size: 500,
            initial_list: InitialListMode::Auto,
            initial_events_timeout: Duration::from_secs(10),
            metrics: None,
        }
    }
}
