//! Fault-injection scenarios for streaming lists (`sendInitialEvents=true`) and the fallback to
//! paginated lists, through a whole informer and a scripted fake apiserver, on paused time.

use std::time::Duration;

use super::fake::{Call, FakeListWatch, cm, eventually, status, undecodable};
use super::harness::{listing, start};
use crate::informer::{Config, Error, InitialListMode};

const WAIT: Duration = Duration::from_secs(60);

/// The requests made, as `list` or `watch@rv` (`stream` for a streaming list).
fn requests(fake: &FakeListWatch) -> Vec<String> {
    let describe = |call: Call| match call {
        Call::List(..) => "list".to_string(),
        Call::Watch(params, _, _) if params.send_initial_events => "stream".to_string(),
        Call::Watch(_, rv, _) => format!("watch@{rv}"),
    };
    fake.calls().into_iter().map(describe).collect()
}

#[tokio::test(start_paused = true)]
async fn streaming_list_replaces_the_cache_at_the_end_bookmark_and_keeps_watching() {
    let fake = FakeListWatch::default();
    let stream = fake.watch();
    let h = start(&fake, Config::default());
    stream.added(cm("ns", "a", "1")).added(cm("ns", "b", "2")).bookmark("3");
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!h.informer.has_synced() && h.informer.store().is_empty(), "nothing is cached before the end bookmark");

    stream.initial_events_end("5");
    h.informer.wait_for_sync(WAIT).await.unwrap();
    assert_eq!(h.sorted_keys(), ["ns/a", "ns/b"]);
    stream.added(cm("ns", "c", "6"));
    assert_eq!(h.events(3).await, ["add ns/a@1", "add ns/b@2", "add ns/c@6"]);
    assert_eq!(h.recorder.initial_adds(), ["ns/a@1", "ns/b@2"], "the streamed list is the initial list");

    let (params, rv, _) = h.watch_calls(1).await.remove(0);
    assert!(params.send_initial_events && params.bookmarks);
    assert_eq!(rv, "", "a consistent read: as fresh as etcd");
    assert_eq!(requests(&fake), ["stream"], "one request: no list, the stream goes on as the watch");
    drop(stream);
    let calls = h.watch_calls(2).await;
    assert_eq!(calls[1].1, "6");
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn relist_after_gone_streams_again_and_reports_the_difference() {
    let fake = FakeListWatch::default();
    fake.watch().added(cm("ns", "a", "1")).added(cm("ns", "b", "1")).initial_events_end("1").error(410, "Expired");
    let second = fake.watch();
    second.added(cm("ns", "a", "1")).added(cm("ns", "c", "4")).initial_events_end("4");
    let h = start(&fake, Config::default());
    assert_eq!(h.events(4).await[2..], ["add ns/c@4", "delete ns/b@1"]);
    assert_eq!(requests(&fake), ["stream", "stream"]);
    // lists, list errors, watches, relists, watch errors
    assert_eq!(h.counters(), [2, 0, 2, 1, 1]);
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn auto_mode_falls_back_to_list_when_streaming_is_rejected_and_remembers() {
    let fake = FakeListWatch::default();
    fake.watch_error(Error::Api(status(422, "Invalid")));
    fake.list_page(vec![cm("ns", "a", "1")], "3", None);
    fake.watch().error(410, "Expired");
    fake.list_page(vec![cm("ns", "a", "1")], "4", None);
    let _watch = fake.watch();
    let h = start(&fake, Config::default());
    h.informer.wait_for_sync(WAIT).await.unwrap();
    h.watch_calls(3).await;
    assert_eq!(requests(&fake), ["stream", "list", "watch@3", "list", "watch@4"]);
    assert_eq!(h.counters()[..2], [3, 1], "the refused stream counts as a failed list");
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn auto_mode_falls_back_when_the_end_bookmark_never_comes() {
    let fake = FakeListWatch::default();
    // An apiserver that ignores sendInitialEvents: a plain watch, no end bookmark.
    let stream = fake.watch();
    stream.added(cm("ns", "a", "1"));
    fake.list_page(vec![cm("ns", "a", "1"), cm("ns", "b", "2")], "7", None);
    let _watch = fake.watch();
    let h = start(&fake, Config { initial_events_timeout: Duration::from_secs(10), ..Config::default() });
    h.informer.wait_for_sync(WAIT).await.unwrap();
    let calls = h.watch_calls(2).await;
    assert!(calls[1].2 - calls[0].2 >= Duration::from_secs(10), "gave up after 10s of quiet");
    assert_eq!(requests(&fake), ["stream", "list", "watch@7"]);
    assert_eq!(h.events(2).await, ["add ns/a@1", "add ns/b@2"], "nothing from the abandoned stream");
    h.stop().await;
}

/// The regression test of a quiet moment that turned streaming lists off for the informer's
/// lifetime: only an explicit refusal (400, 422) may do that.
#[tokio::test(start_paused = true)]
async fn a_quiet_stream_falls_back_for_one_sync_and_the_next_sync_streams_again() {
    let fake = FakeListWatch::default();
    let _quiet = fake.watch();
    fake.list_page(vec![cm("ns", "a", "1")], "7", None);
    fake.watch().error(410, "Expired");
    let stream = fake.watch();
    stream.added(cm("ns", "a", "1")).initial_events_end("8");
    let h = start(&fake, Config { initial_events_timeout: Duration::from_secs(10), ..Config::default() });
    h.informer.wait_for_sync(WAIT).await.unwrap();
    h.watch_calls(3).await;
    assert_eq!(requests(&fake), ["stream", "list", "watch@7", "stream"]);
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn auto_mode_falls_back_when_the_stream_ends_before_the_end_bookmark() {
    let fake = FakeListWatch::default();
    let stream = fake.watch();
    stream.added(cm("ns", "a", "1"));
    drop(stream);
    fake.list_page(vec![], "2", None);
    let _watch = fake.watch();
    let h = start(&fake, Config::default());
    h.watch_calls(2).await;
    assert_eq!(requests(&fake), ["stream", "list", "watch@2"]);
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn forced_streaming_backs_off_instead_of_falling_back() {
    let fake = FakeListWatch::default();
    fake.watch_error(Error::Api(status(422, "Invalid")));
    let stream = fake.watch();
    stream.added(cm("ns", "a", "1")).initial_events_end("1");
    let h = start(&fake, Config { initial_list: InitialListMode::Streaming, ..Config::default() });
    h.informer.wait_for_sync(WAIT).await.unwrap();
    let calls = h.watch_calls(2).await;
    assert!(calls[1].2 - calls[0].2 >= Duration::from_millis(800));
    assert_eq!(requests(&fake), ["stream", "stream"]);
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn list_mode_never_streams() {
    let fake = FakeListWatch::default();
    fake.list_page(vec![], "1", None);
    let _watch = fake.watch();
    let h = start(&fake, listing());
    eventually("a watch", WAIT, || fake.watch_calls().len() == 1).await;
    assert_eq!(requests(&fake), ["list", "watch@1"]);
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn an_initial_event_that_does_not_decode_is_left_out_of_the_streamed_list() {
    let fake = FakeListWatch::default();
    let stream = fake.watch();
    let h = start(&fake, Config::default());
    stream.added(cm("ns", "a", "1")).added(cm("ns", "bad", "2"));
    // The same object, modified into something the type cannot hold, before the end bookmark.
    stream.undecodable(undecodable("ns", "bad", "3")).added(cm("ns", "c", "4")).initial_events_end("5");
    h.informer.wait_for_sync(WAIT).await.unwrap();
    assert_eq!(h.sorted_keys(), ["ns/a", "ns/c"]);
    assert_eq!(h.undecodable(), 1);
    assert_eq!(requests(&fake), ["stream"], "the stream was not given up");
    h.stop().await;
}
