//! ImagePullBackOff in the pure core (kubelet `imagePuller` + `flowcontrol.Backoff` keyed by
//! `<pod uid>_<image>`): a failed pull (`ErrImagePull`) starts the pod's image backoff at
//! 10 s and doubles it up to 300 s; while it runs, the next plan's start carries the
//! `Back-off pulling image` message (the shell then fails the start with `ImagePullBackOff`
//! instead of pulling); the status shows the reasons; other pods are not affected.

mod support;

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use ledgerlet::core::command::{Command, ContainerKind, ContainerStart};
use ledgerlet::core::record::event::{
    ActionOutcome, RuntimeAction, RuntimeActionFinished, SyncOutcome,
};
use ledgerlet::core::record::Event;
use ledgerlet::core::timers::TimerKey;
use support::core_harness::{pod, uid, Harness};

const IMAGE: &str = "registry.invalid/app:1";

fn with_image(p: Arc<Pod>, image: &str) -> Arc<Pod> {
    let mut p = (*p).clone();
    let c = &mut p.spec.as_mut().unwrap().containers[0];
    c.image = Some(image.into());
    c.image_pull_policy = Some("Always".into());
    Arc::new(p)
}

/// Adds a static pod through the file source (the pod manager then has it for retries).
fn add(h: &mut Harness, p: &Arc<Pod>) -> Vec<Command> {
    h.submit(Event::PodAdded(
        ledgerlet::core::record::event::PodConfigChange {
            source: ledgerlet::core::config::PodSource::File,
            pod: p.clone(),
        },
    ))
}

/// The container starts of the last SyncPod of `u`.
fn starts(cmds: &[Command], u: &str) -> Option<Vec<ContainerStart>> {
    cmds.iter().rev().find_map(|c| match c {
        Command::SyncPod(s) if s.uid.as_str() == u => Some(s.plan.start.clone()),
        _ => None,
    })
}

fn pull_failed(h: &mut Harness, u: &str, reason: &str, message: &str) {
    let (sync_id, _) = h.syncing(u).expect("a running sync");
    h.submit(Event::RuntimeActionFinished(RuntimeActionFinished {
        uid: uid(u),
        sync_id,
        action: RuntimeAction::PullImage {
            container: "main".into(),
            image: IMAGE.into(),
        },
        outcome: ActionOutcome::Failed {
            reason: reason.into(),
            message: message.into(),
            detail: None,
        },
        duration_ms: 1,
    }));
    h.finish(
        u,
        SyncOutcome::Failed {
            message: message.into(),
        },
    );
}

fn waiting_reason(h: &Harness, u: &str) -> Option<String> {
    let s = h.node().statuses.get(&uid(u))?;
    s.status
        .container_statuses
        .as_ref()?
        .first()?
        .state
        .as_ref()?
        .waiting
        .as_ref()?
        .reason
        .clone()
}

/// Runs the pod worker's retry of `u` (the sync error backoff timer) and returns its starts.
fn retry(h: &mut Harness, u: &str) -> Vec<ContainerStart> {
    let mut cmds = h.fire(TimerKey::PodWork { uid: uid(u) });
    if h.awaiting_status(u) {
        cmds.extend(h.respond(u));
    }
    starts(&cmds, u).unwrap_or_else(|| panic!("no SyncPod: {cmds:#?}"))
}

#[test]
fn err_image_pull_then_image_pull_back_off_doubling_per_pod_and_image() {
    let mut h = Harness::with_file_source();
    let a = with_image(pod("a", "app", "default").static_pod().build(), IMAGE);
    let b = with_image(pod("b", "other", "default").static_pod().build(), IMAGE);
    let mut cmds = add(&mut h, &a);
    cmds.extend(h.respond("a"));
    let first = starts(&cmds, "a").expect("first SyncPod");
    assert_eq!(first.len(), 1);
    assert_eq!(first[0].kind, ContainerKind::Regular);
    assert_eq!(
        first[0].image_pull_backoff, None,
        "no backoff before a failure"
    );

    // t=0: the pull fails
    let msg = "connection refused".to_string();
    pull_failed(&mut h, "a", "ErrImagePull", &msg);
    let key = format!("a_{IMAGE}");
    assert_eq!(h.node().image_pull_backoff.get_ms(&key), 10_000);

    // t=5 s: within the 10 s backoff, the start carries it; the status generated at the
    // start of that sync shows the failed pull
    h.advance(5_000);
    let s = retry(&mut h, "a");
    assert_eq!(waiting_reason(&h, "a").as_deref(), Some("ErrImagePull"));
    assert_eq!(
        s[0].image_pull_backoff.as_deref(),
        Some(format!("Back-off pulling image {IMAGE:?}: ErrImagePull: {msg}").as_str()),
        "the back-off message carries the failed pull's error (kubelet 1.33+)"
    );
    pull_failed(
        &mut h,
        "a",
        "ImagePullBackOff",
        &format!("Back-off pulling image {IMAGE:?}"),
    );
    assert_eq!(
        h.node().image_pull_backoff.get_ms(&key),
        10_000,
        "a refused start does not double the backoff"
    );

    // another pod with the same image is not held back (the key is per pod)
    let mut cmds = add(&mut h, &b);
    cmds.extend(h.respond("b"));
    assert_eq!(starts(&cmds, "b").unwrap()[0].image_pull_backoff, None);

    // t=11 s: the backoff has passed: pull again (the status shows the back-off of the
    // previous attempt); it fails again: 20 s
    h.advance(6_000);
    let s = retry(&mut h, "a");
    assert_eq!(waiting_reason(&h, "a").as_deref(), Some("ImagePullBackOff"));
    assert_eq!(s[0].image_pull_backoff, None);
    pull_failed(&mut h, "a", "ErrImagePull", &msg);
    assert_eq!(h.node().image_pull_backoff.get_ms(&key), 20_000);

    // t=26 s (15 s after): still backing off
    h.advance(15_000);
    let s = retry(&mut h, "a");
    assert!(s[0].image_pull_backoff.is_some());
}

#[test]
fn the_image_pull_backoff_starts_over_after_twice_its_maximum_idle() {
    let mut h = Harness::with_file_source();
    let a = with_image(pod("a", "app", "default").static_pod().build(), IMAGE);
    add(&mut h, &a);
    h.respond("a");
    let msg = "Failed to pull image: refused";
    pull_failed(&mut h, "a", "ErrImagePull", msg);
    for _ in 0..6 {
        h.advance(301_000);
        retry(&mut h, "a");
        pull_failed(&mut h, "a", "ErrImagePull", msg);
    }
    let key = format!("a_{IMAGE}");
    assert_eq!(h.node().image_pull_backoff.get_ms(&key), 300_000, "capped");
    // idle longer than 2 × 300 s: the next failure starts at 10 s again
    h.advance(601_000);
    let s = retry(&mut h, "a");
    assert_eq!(s[0].image_pull_backoff, None);
    pull_failed(&mut h, "a", "ErrImagePull", msg);
    assert_eq!(h.node().image_pull_backoff.get_ms(&key), 10_000);
}

#[test]
fn the_image_pull_backoff_defaults_are_the_kubelets() {
    let c = ledgerlet::core::config::CoreConfig::default();
    assert_eq!(c.image_pull_backoff_initial_ms, 10_000);
    assert_eq!(c.image_pull_backoff_max_ms, 300_000);
}
