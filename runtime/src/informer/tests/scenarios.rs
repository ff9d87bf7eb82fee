//! Fault-injection scenarios for list -> watch -> relist, through a whole informer and a
//! scripted fake apiserver, on paused tokio time. (Streaming lists: `streaming_scenarios.rs`.)

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
use tokio_util::sync::CancellationToken;

use super::fake::{FakeListWatch, Recorder, cm, eventually, status, undecodable};
use super::harness::{listing, run, start};
use crate::informer::{Config, Error, Informer};

const WAIT: Duration = Duration::from_secs(5);

#[tokio::test(start_paused = true)]
async fn initial_list_is_paginated_with_limit_500_and_continue() {
    let fake = FakeListWatch::default();
    fake.list_page(vec![cm("ns", "a", "1"), cm("ns", "b", "2")], "10", Some("token-1"));
    fake.list_page(vec![cm("ns", "c", "3")], "10", None);
    let _watch = fake.watch();
    let h = start(&fake, listing());
    h.informer.wait_for_sync(WAIT).await.unwrap();
    assert_eq!(h.sorted_keys(), ["ns/a", "ns/b", "ns/c"]);
    let lists = fake.list_calls();
    assert_eq!((lists[0].limit, lists[0].continue_token.as_deref()), (Some(500), None));
    assert_eq!((lists[1].limit, lists[1].continue_token.as_deref()), (Some(500), Some("token-1")));
    assert_eq!(lists[0].resource_version, None, "a consistent read");
    assert_eq!(h.events(3).await, ["add ns/a@1", "add ns/b@2", "add ns/c@3"]);
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn watch_starts_from_the_list_resource_version_with_bookmarks_and_a_random_timeout() {
    let fake = FakeListWatch::default();
    fake.list_page(vec![], "10", None);
    let _watch = fake.watch();
    let h = start(
        &fake,
        Config { label_selector: Some("app=db".into()), field_selector: Some("metadata.name=a".into()), ..listing() },
    );
    let (params, rv, _) = h.watch_calls(1).await.remove(0);
    assert_eq!(rv, "10");
    assert!(params.bookmarks && !params.send_initial_events);
    assert!((300..=600).contains(&params.timeout.unwrap()), "{:?}", params.timeout);
    assert_eq!(params.label_selector.as_deref(), Some("app=db"));
    assert_eq!(h.fake.list_calls()[0].field_selector.as_deref(), Some("metadata.name=a"));
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn watch_events_reach_the_store_and_the_handlers_in_order() {
    let fake = FakeListWatch::default();
    fake.list_page(vec![cm("ns", "a", "1")], "1", None);
    let watch = fake.watch();
    watch.added(cm("ns", "b", "2")).modified(cm("ns", "a", "3")).deleted(cm("ns", "b", "4"));
    let h = start(&fake, listing());
    assert_eq!(h.events(4).await, ["add ns/a@1", "add ns/b@2", "update ns/a@1->3", "delete ns/b@4"]);
    assert_eq!(h.recorder.initial_adds(), ["ns/a@1"], "the listed object is in the initial list, the watched one not");
    assert_eq!(h.sorted_keys(), ["ns/a"]);
    assert_eq!(h.informer.store().get("ns/a").unwrap().metadata.resource_version.as_deref(), Some("3"));
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn watch_resumes_from_the_last_resource_version_seen_and_bookmarks_advance_it() {
    let fake = FakeListWatch::default();
    fake.list_page(vec![], "10", None);
    let first = fake.watch();
    let second = fake.watch();
    let _third = fake.watch();
    let h = start(&fake, listing());
    first.added(cm("ns", "a", "12"));
    h.events(1).await;
    drop(first); // the server ended the watch (timeoutSeconds)
    assert_eq!(h.watch_calls(2).await[1].1, "12");
    second.bookmark("20");
    tokio::time::sleep(Duration::from_secs(2)).await;
    drop(second);
    let calls = h.watch_calls(3).await;
    assert_eq!(calls[2].1, "20", "the bookmark moved the resourceVersion");
    assert!(calls[2].2 - calls[1].2 < Duration::from_millis(2100), "a normal close re-watches at once");
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn gone_watch_error_relists_at_once_and_reports_what_changed_while_down() {
    let fake = FakeListWatch::default();
    fake.list_page(vec![cm("ns", "same", "1"), cm("ns", "changed", "1"), cm("ns", "vanished", "1")], "1", None);
    fake.watch().error(410, "Expired");
    fake.list_page(vec![cm("ns", "same", "1"), cm("ns", "changed", "5"), cm("ns", "new", "6")], "6", None);
    let _watch = fake.watch();
    let h = start(&fake, listing());
    let events = h.events(6).await;
    assert_eq!(events[3..], ["update ns/changed@1->5", "add ns/new@6", "delete ns/vanished@1"]);
    assert_eq!(h.recorder.initial_adds().len(), 3, "a relist's adds are not the initial list's");
    assert_eq!(h.sorted_keys(), ["ns/changed", "ns/new", "ns/same"]);
    let calls = h.watch_calls(2).await;
    assert_eq!(calls[1].1, "6");
    assert_eq!(calls[1].2, calls[0].2, "no backoff before a relist");
    // lists, list errors, watches, relists, watch errors
    assert_eq!(h.counters(), [2, 0, 2, 1, 1]);
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn http_410_when_opening_the_watch_relists_too() {
    let fake = FakeListWatch::default();
    fake.list_page(vec![cm("ns", "a", "1")], "1", None);
    fake.watch_error(Error::Api(status(410, "Gone")));
    fake.list_page(vec![], "9", None);
    let _watch = fake.watch();
    let h = start(&fake, listing());
    assert_eq!(h.watch_calls(2).await[1].1, "9");
    assert_eq!(h.events(2).await, ["add ns/a@1", "delete ns/a@1"]);
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn other_errors_back_off_800ms_doubling_with_jitter_and_keep_the_resource_version() {
    let fake = FakeListWatch::default();
    fake.list_page(vec![], "7", None);
    for _ in 0..5 {
        fake.watch_error(Error::Api(status(500, "InternalError")));
    }
    let _watch = fake.watch();
    let h = start(&fake, listing());
    let calls = h.watch_calls(6).await;
    for (i, base) in [0.8, 1.6, 3.2, 6.4, 12.8].into_iter().enumerate() {
        let gap = (calls[i + 1].2 - calls[i].2).as_secs_f64();
        assert!((base..base * 2.0).contains(&gap), "retry {i}: waited {gap}s, expected [{base}, {})", base * 2.0);
        assert_eq!(calls[i + 1].1, "7", "no relist on a non-410 error");
    }
    assert_eq!(h.counters(), [1, 0, 6, 0, 5]);
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn errors_on_an_open_stream_back_off_and_resume_where_they_left_off() {
    let fake = FakeListWatch::default();
    fake.list_page(vec![], "1", None);
    fake.watch().added(cm("ns", "a", "5")).error(500, "InternalError");
    let _watch = fake.watch();
    let h = start(&fake, listing());
    let calls = h.watch_calls(2).await;
    assert_eq!(calls[1].1, "5");
    assert!(calls[1].2 - calls[0].2 >= Duration::from_millis(800));
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_watch_closing_at_once_without_events_is_backed_off() {
    let fake = FakeListWatch::default();
    fake.list_page(vec![], "1", None);
    drop(fake.watch());
    let _watch = fake.watch();
    let h = start(&fake, listing());
    let calls = h.watch_calls(2).await;
    assert!(calls[1].2 - calls[0].2 >= Duration::from_millis(800));
    assert_eq!(h.counters()[4], 1, "counted as a watch error");
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn list_errors_are_backed_off_and_counted() {
    let fake = FakeListWatch::default();
    fake.list_error(Error::Api(status(403, "Forbidden")));
    fake.list_page(vec![], "1", None);
    let _watch = fake.watch();
    let h = start(&fake, listing());
    h.informer.wait_for_sync(WAIT).await.unwrap();
    assert_eq!(h.counters()[..2], [2, 1]);
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn the_default_transform_strips_managed_fields_before_caching() {
    let fake = FakeListWatch::default();
    let mut obj = cm("ns", "a", "1");
    obj.metadata.managed_fields =
        Some(vec![ManagedFieldsEntry { manager: Some("kubectl".into()), ..Default::default() }]);
    fake.list_page(vec![obj.clone()], "1", None);
    fake.watch().modified(cm("ns", "a", "2")).added(obj);
    let h = start(&fake, listing());
    h.events(3).await;
    assert!(h.informer.store().list().iter().all(|o| o.metadata.managed_fields.is_none()));
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_custom_transform_replaces_the_default() {
    let fake = FakeListWatch::default();
    fake.list_page(vec![cm("ns", "a", "1")], "1", None);
    let _watch = fake.watch();
    let informer = Informer::from_list_watch(fake, listing());
    informer.set_transform(Arc::new(|mut obj: ConfigMap| {
        obj.data = Some([("seen".to_string(), "yes".to_string())].into());
        obj
    }));
    let cancel = CancellationToken::new();
    let run = informer.run(cancel.clone());
    let check = async {
        informer.wait_for_sync(WAIT).await.unwrap();
        assert!(informer.store().get("ns/a").unwrap().data.as_ref().unwrap().contains_key("seen"));
        cancel.cancel();
    };
    tokio::join!(run, check);
}

#[tokio::test(start_paused = true)]
async fn resync_redelivers_every_cached_object_each_period() {
    let fake = FakeListWatch::default();
    fake.list_page(vec![cm("ns", "a", "1")], "1", None);
    let _watch = fake.watch();
    let h = start(&fake, Config { resync_period: Some(Duration::from_secs(60)), ..listing() });
    h.events(1).await;
    tokio::time::sleep(Duration::from_secs(59)).await;
    assert_eq!(h.recorder.events().len(), 1, "no resync before the period");
    assert_eq!(h.events(3).await, ["add ns/a@1", "update ns/a@1->1", "update ns/a@1->1"]);
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn handler_added_after_sync_gets_the_cache_as_adds_then_later_changes() {
    let fake = FakeListWatch::default();
    fake.list_page(vec![cm("ns", "a", "1")], "1", None);
    let watch = fake.watch();
    let h = start(&fake, listing());
    h.informer.wait_for_sync(WAIT).await.unwrap();
    let late = Recorder::new();
    h.informer.add_event_handler(late.clone());
    watch.added(cm("ns", "b", "2"));
    eventually("late handler calls", WAIT, || late.events().len() >= 2).await;
    assert_eq!(late.events(), ["add ns/a@1", "add ns/b@2"]);
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn wait_for_sync_times_out_with_a_clear_error_while_the_list_hangs() {
    let fake = FakeListWatch::default(); // nothing scripted: the list never answers
    let h = start(&fake, listing());
    let error = h.informer.wait_for_sync(Duration::from_secs(3)).await.unwrap_err();
    assert!(error.is_sync_timeout() && !h.informer.has_synced());
    assert!(error.to_string().contains("configmaps did not sync within 3s"), "{error}");
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn cancel_stops_run_and_the_store_keeps_its_contents() {
    let fake = FakeListWatch::default();
    fake.list_page(vec![cm("ns", "a", "1")], "1", None);
    let _watch = fake.watch();
    let h = start(&fake, listing());
    h.informer.wait_for_sync(WAIT).await.unwrap();
    let (informer, store) = (h.informer.clone(), h.informer.store());
    h.stop().await;
    assert!(informer.has_synced());
    assert_eq!(store.len(), 1);
}

#[tokio::test]
#[should_panic(expected = "called twice")]
async fn running_an_informer_twice_is_a_contract_violation() {
    let informer = Informer::from_list_watch(FakeListWatch::default(), listing());
    let cancel = CancellationToken::new();
    cancel.cancel();
    informer.run(cancel.clone()).await;
    informer.run(cancel).await;
}

#[tokio::test(start_paused = true)]
async fn a_list_item_that_does_not_decode_is_left_out_and_the_informer_syncs() {
    let fake = FakeListWatch::default();
    fake.list_page_with_undecodable(vec![cm("ns", "a", "1")], vec![undecodable("ns", "bad", "2")], "10", Some("t"));
    fake.list_page(vec![cm("ns", "c", "3")], "10", None);
    let _watch = fake.watch();
    let h = start(&fake, listing());
    h.informer.wait_for_sync(WAIT).await.unwrap();
    assert_eq!(h.sorted_keys(), ["ns/a", "ns/c"]);
    assert_eq!(h.undecodable(), 1);
    assert_eq!(h.counters()[1], 0, "not a failed list");
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_watch_event_that_does_not_decode_drops_the_object_and_the_watch_goes_on() {
    let fake = FakeListWatch::default();
    fake.list_page(vec![cm("ns", "a", "1"), cm("ns", "b", "2")], "2", None);
    let watch = fake.watch();
    let _next = fake.watch();
    let h = start(&fake, listing());
    h.events(2).await;
    // b is modified into something the type cannot hold, then c arrives on the same watch.
    watch.undecodable(undecodable("ns", "b", "5")).added(cm("ns", "c", "6"));
    assert_eq!(h.events(4).await[2..], ["delete ns/b@2", "add ns/c@6"]);
    assert_eq!(h.sorted_keys(), ["ns/a", "ns/c"]);
    assert_eq!(h.undecodable(), 1);
    assert_eq!(h.counters(), [1, 0, 1, 0, 0], "the watch was neither failed nor reopened");
    // When the watch ends, the next one starts after the bad event, not before it.
    drop(watch);
    assert_eq!(h.watch_calls(2).await[1].1, "6");
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn an_undecodable_event_advances_the_resource_version() {
    let fake = FakeListWatch::default();
    fake.list_page(vec![], "1", None);
    let watch = fake.watch();
    let _next = fake.watch();
    let h = start(&fake, listing());
    h.informer.wait_for_sync(WAIT).await.unwrap();
    watch.undecodable(undecodable("ns", "bad", "9"));
    eventually("the bad event to be counted", WAIT, || h.undecodable() == 1).await;
    drop(watch);
    assert_eq!(h.watch_calls(2).await[1].1, "9", "a rewatch never replays the bad event");
    assert!(h.recorder.events().is_empty(), "nothing was cached, so nothing was deleted");
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn an_expired_continue_token_falls_back_to_one_unpaginated_list() {
    let fake = FakeListWatch::default();
    fake.list_page(vec![cm("ns", "a", "1")], "10", Some("t"));
    fake.list_error(Error::Api(status(410, "Expired")));
    fake.list_page(vec![cm("ns", "a", "1"), cm("ns", "b", "11")], "12", None);
    let _watch = fake.watch();
    let h = start(&fake, listing());
    h.informer.wait_for_sync(WAIT).await.unwrap();
    assert_eq!(h.sorted_keys(), ["ns/a", "ns/b"]);
    let lists = h.fake.list_calls();
    assert_eq!(lists.len(), 3);
    assert_eq!((lists[2].limit, lists[2].continue_token.as_deref()), (None, None), "{:?}", lists[2]);
    assert_eq!(h.watch_calls(1).await[0].1, "12");
    assert_eq!(h.counters()[1], 0, "not a failed list");
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn an_informer_of_two_namespaces_syncs_when_both_have_and_relists_each_alone() {
    let (a, b) = (FakeListWatch::default(), FakeListWatch::default());
    a.list_page(vec![cm("a", "kept", "1"), cm("a", "vanished", "2")], "2", None);
    let watch_a = a.watch();
    // b's first list fails: it lists again after a backoff of at least 800 ms.
    b.list_error(Error::Api(status(500, "InternalError")));
    b.list_page(vec![cm("b", "one", "3")], "3", None);
    let _watch_b = b.watch();
    let (informer, recorder, cancel, task) = run(Informer::from_namespaced_list_watches(
        vec![("a".into(), Arc::new(a.clone())), ("b".into(), Arc::new(b.clone()))],
        listing(),
    ));
    // a has listed, b not yet: not synced.
    eventually("a's list in the store", Duration::from_millis(100), || informer.store().len() == 2).await;
    assert!(informer.wait_for_sync(Duration::from_millis(500)).await.is_err(), "synced before b listed");
    informer.wait_for_sync(WAIT).await.unwrap();
    assert_eq!(informer.store().len(), 3);
    assert_eq!(recorder.initial_adds().len(), 3, "each namespace's first list is an initial list");
    // a's watch expires: a relists, and b's object stays.
    watch_a.error(410, "Expired");
    a.list_page(vec![cm("a", "kept", "1")], "4", None);
    let _again = a.watch();
    eventually("a's relist", WAIT, || recorder.events().len() == 4).await;
    assert_eq!(recorder.events()[3], "delete a/vanished@2");
    let mut keys = informer.store().keys();
    keys.sort();
    assert_eq!(keys, ["a/kept", "b/one"]);
    assert_eq!((a.list_calls().len(), b.list_calls().len()), (2, 2), "b did not list again");
    cancel.cancel();
    task.await.unwrap();
}
