use std::sync::{Arc, Mutex};

use tokio::sync::mpsc;

use super::*;
use crate::cri::CriClientOptions;
use crate::runtime::{EmbeddedRuntime, RuntimeOptions};
use crate::shell::Input;

fn cond(t: &str, ok: bool, reason: &str, message: &str) -> v1::RuntimeCondition {
    v1::RuntimeCondition {
        r#type: t.into(),
        status: ok,
        reason: reason.into(),
        message: message.into(),
    }
}

fn status(conditions: Vec<v1::RuntimeCondition>) -> v1::StatusResponse {
    v1::StatusResponse {
        status: Some(v1::RuntimeStatus { conditions }),
        ..Default::default()
    }
}

fn unavailable(message: &str) -> CriError {
    CriError::Rpc {
        method: "Status",
        endpoint: "unix:///run/cri.sock".into(),
        code: Code::Unavailable,
        message: message.into(),
    }
}

fn all_ready() -> v1::StatusResponse {
    status(vec![ready("RuntimeReady"), ready("NetworkReady")])
}

fn ready(t: &str) -> v1::RuntimeCondition {
    cond(t, true, "", "")
}

/// A record; `network_message` is the network's error, if `message` holds one.
fn health(runtime: bool, network: bool, pleg: bool, message: &str) -> RuntimeHealth {
    let network_message = message
        .trim_matches(['[', ']'])
        .split(", ")
        .find(|e| e.starts_with("container runtime network") || e.starts_with("network state"))
        .unwrap_or_default();
    RuntimeHealth {
        runtime_ready: runtime,
        network_ready: network,
        pleg_healthy: pleg,
        message: message.into(),
        network_message: network_message.into(),
    }
}

#[test]
fn conditions_become_upstream_error_texts() {
    let mut t = HealthTracker::new(30_000);
    let (reason, message) = ("NetworkPluginNotReady", "cni plugin not initialized");
    let net = cond("NetworkReady", false, reason, message);
    let s = status(vec![ready("RuntimeReady"), net]);
    let first = t.observe(0, Some(Ok(&s)), Ok(()));
    let h = first.expect("first probe is sent");
    let want = "container runtime network not ready: NetworkReady=false \
                reason:NetworkPluginNotReady message:cni plugin not initialized";
    assert_eq!(h, health(true, false, true, want));
    let again = t.observe(5_000, Some(Ok(&s)), Ok(()));
    assert!(again.is_none(), "unchanged");

    // no RuntimeReady at all, and the PLEG unhealthy: runtime errors first
    let s = status(vec![ready("NetworkReady")]);
    let pleg = Err("pleg has yet to be successful".into());
    let h = t.observe(10_000, Some(Ok(&s)), pleg).unwrap();
    let want =
        "[PLEG is not healthy: pleg has yet to be successful, container runtime not ready: <nil>]";
    assert_eq!(h.message, want);
    // the PLEG text alone changing is not a change
    let pleg = Err("pleg was last seen active 3m1s ago".into());
    assert!(t.observe(15_000, Some(Ok(&s)), pleg).is_none());
}

#[test]
fn before_the_first_good_status_the_check_may_not_have_completed_yet() {
    let mut t = HealthTracker::new(30_000);
    let refused = unavailable("connection refused");
    let h = t.observe(0, Some(Err(&refused)), Ok(())).unwrap();
    let want = "[container runtime status check may not have completed yet, network state unknown]";
    assert_eq!(h, health(false, false, true, want));
    let h = t.observe(5_000, Some(Ok(&all_ready())), Ok(())).unwrap();
    assert_eq!(h, health(true, true, true, ""));
}

#[test]
fn failed_status_calls_make_the_runtime_down_only_after_30_s_without_a_good_one() {
    let mut t = HealthTracker::new(30_000);
    assert!(t.observe(0, Some(Ok(&all_ready())), Ok(())).is_some());
    let refused = unavailable("connection refused");
    for now in [5_000, 10_000, 20_000, 29_999] {
        let h = t.observe(now, Some(Err(&refused)), Ok(()));
        assert!(h.is_none(), "still ready at {now} ms");
    }
    // a call still pending counts the same: time alone makes it down
    let h = t.observe(30_000, None, Ok(())).expect("down at 30 s");
    assert_eq!(h, health(false, true, true, "container runtime is down"));
    assert!(t.observe(35_000, Some(Err(&refused)), Ok(())).is_none());
    let h = t.observe(40_000, Some(Ok(&all_ready())), Ok(())).unwrap();
    assert_eq!(h, health(true, true, true, ""));
}

#[test]
fn a_runtime_not_ready_for_30_s_is_also_down() {
    let mut t = HealthTracker::new(30_000);
    assert!(t.observe(0, Some(Ok(&all_ready())), Ok(())).is_some());
    let starting = cond("RuntimeReady", false, "Starting", "booting");
    let not_ready = status(vec![starting, ready("NetworkReady")]);
    let why = "container runtime not ready: RuntimeReady=false reason:Starting message:booting";
    for (now, want) in [
        (5_000, why.to_string()),
        (30_000, format!("[container runtime is down, {why}]")),
    ] {
        let h = t.observe(now, Some(Ok(&not_ready)), Ok(())).unwrap();
        assert_eq!(h.message, want, "at {now} ms");
    }
}

async fn next(rx: &mut mpsc::Receiver<Input>, within_ms: u64) -> Option<RuntimeHealth> {
    match tokio::time::timeout(Duration::from_millis(within_ms), rx.recv()).await {
        Ok(Some(Input {
            event: Event::RuntimeHealth(h),
            ..
        })) => Some(h),
        Ok(other) => panic!("unexpected input {other:?}"),
        Err(_) => None,
    }
}

#[tokio::test]
async fn probes_the_embedded_runtime_and_sends_only_changes() {
    let dir = tempfile::tempdir().unwrap();
    let mut opts = RuntimeOptions::new(dir.path().join("root"));
    opts.reap_orphans = false;
    let listen = format!("unix://{}", dir.path().join("cri.sock").display());
    let rt = EmbeddedRuntime::start(&listen, opts).await.unwrap();
    let cri_opts = CriClientOptions {
        request_timeout_ms: 2_000,
        ..CriClientOptions::default()
    };
    let cri = CriClient::connect(&rt.endpoint(), cri_opts).await.unwrap();
    let pleg_error: Arc<Mutex<Option<String>>> = Arc::default();
    let pleg = {
        let e = pleg_error.clone();
        move || e.lock().unwrap().clone().map_or(Ok(()), Err)
    };
    let (report, mut rx) = Report::channel(16);
    let (stop, shutdown) = watch::channel(false);
    let task = tokio::spawn(run(cri, 20, 200, pleg, report, shutdown));

    let first = next(&mut rx, 5_000).await.expect("start");
    assert_eq!(first, health(true, true, true, ""));
    let quiet = next(&mut rx, 200).await;
    assert!(quiet.is_none(), "about ten probes, no change, nothing sent");

    *pleg_error.lock().unwrap() = Some("pleg was last seen active 3m0s ago".into());
    let h = next(&mut rx, 5_000).await.expect("pleg");
    let want = "PLEG is not healthy: pleg was last seen active 3m0s ago";
    assert!(!h.pleg_healthy && h.runtime_ready, "{h:?}");
    assert_eq!(h.message, want);
    *pleg_error.lock().unwrap() = None;
    let h = next(&mut rx, 5_000).await.expect("pleg back");
    assert!(h.pleg_healthy);

    rt.shutdown().await.unwrap();
    let h = next(&mut rx, 10_000).await.expect("down after 200 ms");
    let down = health(false, true, true, "container runtime is down");
    assert_eq!(h, down, "the last known network state stays");

    stop.send(true).unwrap();
    let stopped = tokio::time::timeout(Duration::from_secs(5), task).await;
    stopped.expect("stops on shutdown").unwrap();
}
