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

#[test]
fn conditions_become_upstream_error_texts() {
    let mut t = HealthTracker::new();
    let s = status(vec![
        cond("RuntimeReady", true, "", ""),
        cond(
            "NetworkReady",
            false,
            "NetworkPluginNotReady",
            "cni plugin not initialized",
        ),
    ]);
    let h = t.observe(Ok(&s), Ok(())).expect("first probe is sent");
    assert!(h.runtime_ready && h.pleg_healthy && !h.network_ready);
    assert_eq!(
        h.message,
        "container runtime network not ready: NetworkReady=false \
         reason:NetworkPluginNotReady message:cni plugin not initialized"
    );
    assert!(t.observe(Ok(&s), Ok(())).is_none(), "unchanged");

    // no RuntimeReady at all, and the PLEG unhealthy: runtime errors first
    let s = status(vec![cond("NetworkReady", true, "", "")]);
    let h = t
        .observe(Ok(&s), Err("pleg has yet to be successful".into()))
        .unwrap();
    assert_eq!(
        h.message,
        "[PLEG is not healthy: pleg has yet to be successful, container runtime not ready: <nil>]"
    );
    // the PLEG text alone changing is not a change
    assert!(t
        .observe(Ok(&s), Err("pleg was last seen active 3m1s ago".into()))
        .is_none());
}

#[test]
fn a_failed_status_call_is_runtime_down_once_per_streak() {
    let mut t = HealthTracker::new();
    let h = t
        .observe(Err(&unavailable("connection refused")), Ok(()))
        .unwrap();
    assert!(!h.runtime_ready && !h.network_ready && h.pleg_healthy);
    assert_eq!(
        h.message,
        "[container runtime is down: CRI Status on unix:///run/cri.sock failed: Unavailable: \
         connection refused, network state unknown]"
    );
    assert!(t
        .observe(Err(&unavailable("no such file")), Ok(()))
        .is_none());
    let ok = status(vec![
        cond("RuntimeReady", true, "", ""),
        cond("NetworkReady", true, "", ""),
    ]);
    let h = t.observe(Ok(&ok), Ok(())).unwrap();
    assert!(h.runtime_ready && h.network_ready && h.pleg_healthy);
    assert_eq!(h.message, "");
}

async fn next(rx: &mut mpsc::Receiver<Input>, within: Duration) -> Option<RuntimeHealth> {
    match tokio::time::timeout(within, rx.recv()).await {
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
    let cri = CriClient::connect(
        &rt.endpoint(),
        CriClientOptions {
            request_timeout_ms: 2_000,
            ..CriClientOptions::default()
        },
    )
    .await
    .unwrap();
    let pleg_error: Arc<Mutex<Option<String>>> = Arc::default();
    let pleg = {
        let e = pleg_error.clone();
        move || e.lock().unwrap().clone().map_or(Ok(()), Err)
    };
    let (report, mut rx) = Report::channel(16);
    let (stop, shutdown) = watch::channel(false);
    let task = tokio::spawn(run(cri, 20, pleg, report, shutdown));

    let first = next(&mut rx, Duration::from_secs(5)).await.expect("start");
    assert_eq!(
        first,
        RuntimeHealth {
            runtime_ready: true,
            network_ready: true,
            pleg_healthy: true,
            message: String::new(),
        }
    );
    assert!(
        next(&mut rx, Duration::from_millis(200)).await.is_none(),
        "about ten probes, no change, nothing sent"
    );

    *pleg_error.lock().unwrap() = Some("pleg was last seen active 3m0s ago".into());
    let h = next(&mut rx, Duration::from_secs(5)).await.expect("pleg");
    assert!(!h.pleg_healthy && h.runtime_ready);
    assert_eq!(
        h.message,
        "PLEG is not healthy: pleg was last seen active 3m0s ago"
    );
    *pleg_error.lock().unwrap() = None;
    let h = next(&mut rx, Duration::from_secs(5))
        .await
        .expect("pleg back");
    assert!(h.pleg_healthy);

    rt.shutdown().await.unwrap();
    let h = next(&mut rx, Duration::from_secs(10)).await.expect("down");
    assert!(!h.runtime_ready, "{h:?}");
    assert!(
        h.message
            .starts_with("container runtime is down: CRI Status on unix://"),
        "{}",
        h.message
    );
    assert!(h.network_ready, "the last known network state stays");

    stop.send(true).unwrap();
    tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .expect("stops on shutdown")
        .unwrap();
}
