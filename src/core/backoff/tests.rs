//! BO-01…BO-08 on the backoff table with a fixed clock passed in.

use k8s_openapi::api::core::v1::{Container, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::*;
use crate::core::plan::container_hash;
use crate::core::runtime_status::{ContainerStatus, RuntimePodStatus};

const T0: i64 = 1_800_000_000;

fn at(s: i64) -> Time {
    Time::from_unix_secs(T0 + s)
}

fn web(image: &str) -> (Pod, Container) {
    let pod = Pod {
        metadata: ObjectMeta {
            uid: Some("uid".into()),
            name: Some("web".into()),
            namespace: Some("ns".into()),
            ..ObjectMeta::default()
        },
        ..Pod::default()
    };
    let c = Container {
        name: "web".into(),
        image: Some(image.into()),
        ..Container::default()
    };
    (pod, c)
}

fn instance(id: &str, state: ContainerState, finished_at: Option<Time>) -> ContainerStatus {
    ContainerStatus {
        id: id.into(),
        name: "web".into(),
        state,
        created_at: at(0),
        started_at: None,
        finished_at,
        exit_code: 1,
        reason: String::new(),
        message: String::new(),
        image: String::new(),
        image_ref: String::new(),
        hash: String::new(),
        restart_count: 0,
    }
}

fn exited_at(s: i64) -> RuntimePodStatus {
    RuntimePodStatus {
        containers: vec![instance("c", ContainerState::Exited, Some(at(s)))],
        ..RuntimePodStatus::default()
    }
}

/// `do_backoff` of `web` (image nginx) at `now`, the container last exited at `exited`.
fn sync(b: &mut Backoff, cfg: &BackoffConfig, exited: i64, now: i64) -> Option<BackoffDecision> {
    let (pod, c) = web("nginx");
    do_backoff(b, cfg, &pod, &c, &exited_at(exited), at(now))
}

fn nginx_key() -> String {
    let (pod, c) = web("nginx");
    stable_key(&pod, &c)
}

#[test]
fn bo_01_defaults_and_stable_key() {
    let want = BackoffConfig {
        initial_ms: 10_000,
        max_ms: 300_000,
        reset_after_ms: 600_000,
    };
    assert_eq!(BackoffConfig::default(), want);
    let (pod, c) = web("nginx");
    let want = format!("web_ns_uid_web_{}", container_hash(&c));
    assert_eq!(stable_key(&pod, &c), want);
}

#[test]
fn bo_02_first_crash_restarts_immediately_and_arms_ten_seconds() {
    let (cfg, (pod, c)) = (BackoffConfig::default(), web("nginx"));
    let mut b = Backoff::default();
    // Never exited: start, nothing recorded.
    let fresh = RuntimePodStatus {
        containers: vec![instance("c", ContainerState::Running, None)],
        ..RuntimePodStatus::default()
    };
    assert_eq!(do_backoff(&mut b, &cfg, &pod, &c, &fresh, at(0)), None);
    assert!(b.is_empty());
    // First exit at t=5, sync at t=5: start now; backoff becomes 10s.
    assert_eq!(sync(&mut b, &cfg, 5, 5), None);
    assert_eq!(b.get_ms(&nginx_key()), 10_000);
}

#[test]
fn bo_03_second_crash_within_ten_seconds_is_refused_with_exact_message() {
    let (cfg, mut b) = (BackoffConfig::default(), Backoff::default());
    assert_eq!(sync(&mut b, &cfg, 5, 5), None);
    // Second exit at t=7; at t=16 (9s later) still backing off.
    let d = sync(&mut b, &cfg, 7, 16).expect("in backoff");
    let want = BackoffDecision {
        message: "back-off 10s restarting failed container=web pod=web_ns(uid)".into(),
        expires_at: at(17),
        event_message: "Back-off restarting failed container web in pod web_ns(uid)".into(),
    };
    assert_eq!(d, want);
    assert_eq!(REASON_CRASH_LOOP_BACK_OFF, "CrashLoopBackOff");
    assert_eq!(EVENT_REASON_BACK_OFF, "BackOff");
    // At t=17 (10s after the exit) it starts, and the next delay is 20s.
    assert_eq!(sync(&mut b, &cfg, 7, 17), None);
    assert_eq!(b.get_ms(&nginx_key()), 20_000);
    let d = sync(&mut b, &cfg, 18, 18).expect("in backoff");
    let want = "back-off 20s restarting failed container=web pod=web_ns(uid)";
    assert_eq!((d.message.as_str(), d.expires_at), (want, at(38)));
}

#[test]
fn bo_03_uses_the_newest_exited_instance() {
    let (cfg, (pod, c)) = (BackoffConfig::default(), web("nginx"));
    let mut b = Backoff::default();
    b.next(&cfg, &nginx_key(), at(0), at(0));
    // A running instance in front is skipped; the newest exited one (t=100) counts.
    let rt = RuntimePodStatus {
        containers: vec![
            instance("new", ContainerState::Running, None),
            instance("mid", ContainerState::Exited, Some(at(100))),
            instance("old", ContainerState::Exited, Some(at(1))),
        ],
        ..RuntimePodStatus::default()
    };
    assert!(do_backoff(&mut b, &cfg, &pod, &c, &rt, at(105)).is_some());
    assert!(do_backoff(&mut b, &cfg, &pod, &c, &rt, at(110)).is_none());
}

/// Crash-loops a container that runs 1s per start; returns the waits between each exit and
/// the next start, in seconds.
fn crash_loop(cfg: &BackoffConfig, starts: usize) -> Vec<i64> {
    let mut b = Backoff::default();
    let (mut now, mut finished) = (0, 0);
    let mut waits = Vec::new();
    for _ in 0..4 * starts {
        if waits.len() == starts {
            break;
        }
        match sync(&mut b, cfg, finished, now) {
            Some(d) => {
                let next = d.expires_at.unix_secs() - T0;
                assert!(next > now, "a refusal must expire in the future: {d:?}");
                now = next;
            }
            None => {
                waits.push(now - finished);
                finished = now + 1;
                now = finished;
            }
        }
    }
    waits
}

#[test]
fn bo_04_waits_double_from_ten_seconds_to_a_five_minute_cap() {
    let waits = crash_loop(&BackoffConfig::default(), 9);
    assert_eq!(waits, [0, 10, 20, 40, 80, 160, 300, 300, 300]);
}

#[test]
fn bo_04_delay_is_formatted_like_go() {
    #[rustfmt::skip]
    let cases = [
        (0, "0s"), (500, "500ms"), (1_500, "1.5s"), (10_000, "10s"),
        (80_000, "1m20s"), (160_000, "2m40s"), (300_000, "5m0s"), (3_600_000, "1h0m0s"),
    ];
    for (ms, want) in cases {
        assert_eq!(go_duration(ms), want, "{ms} ms");
    }
}

#[test]
fn bo_05_running_more_than_ten_minutes_resets_the_backoff() {
    let (cfg, key, mut b) = (BackoffConfig::default(), nginx_key(), Backoff::default());
    // Backoff at 40s, last started (last update) at t=100.
    for last in [0, 0, 100] {
        b.next(&cfg, &key, at(0), at(last));
    }
    assert_eq!(b.get_ms(&key), 40_000);
    // Ran exactly 600s: not expired, still backing off.
    assert!(sync(&mut b, &cfg, 700, 701).is_some());
    // Ran 601s: no backoff, and the entry restarts at 10s.
    assert_eq!(sync(&mut b, &cfg, 701, 701), None);
    assert_eq!(b.get_ms(&key), 10_000);
}

#[test]
fn bo_05_reset_is_independent_of_the_maximum() {
    let cfg = BackoffConfig::with_max_ms(60_000);
    let key = "k";
    let mut b = Backoff::default();
    b.next(&cfg, key, at(0), at(0));
    b.next(&cfg, key, at(0), at(0));
    // 5 minutes after the last update is more than 2 × max but not more than 600s.
    assert!(b.is_in_backoff_since(&cfg, key, at(300), at(301)));
    assert!(!b.is_in_backoff_since(&cfg, key, at(601), at(602)));
}

#[test]
fn bo_06_spec_change_gives_a_new_key_and_no_backoff() {
    let cfg = BackoffConfig::default();
    let ((pod, old), (_, new)) = (web("nginx:1"), web("nginx:2"));
    assert_ne!(stable_key(&pod, &old), stable_key(&pod, &new));
    let mut b = Backoff::default();
    for _ in 0..5 {
        b.next(&cfg, &stable_key(&pod, &old), at(0), at(0));
    }
    let rt = exited_at(10);
    assert!(do_backoff(&mut b, &cfg, &pod, &old, &rt, at(11)).is_some());
    assert_eq!(do_backoff(&mut b, &cfg, &pod, &new, &rt, at(11)), None);
    assert_eq!(b.get_ms(&stable_key(&pod, &new)), 10_000);
}

#[test]
fn bo_07_gc_drops_entries_idle_more_than_twice_the_maximum() {
    let cfg = BackoffConfig::default();
    let mut b = Backoff::default();
    b.next(&cfg, "old", at(0), at(0));
    b.next(&cfg, "edge", at(0), at(1));
    b.next(&cfg, "new", at(0), at(500));
    b.gc(&cfg, at(601));
    let got = ["old", "edge", "new"].map(|k| b.get_ms(k));
    assert_eq!(got, [0, 10_000, 10_000], "old, edge, new");
    assert_eq!(b.len(), 2);
}

#[test]
fn bo_07_backoff_state_round_trips_through_serde() {
    let cfg = BackoffConfig::default();
    let mut b = Backoff::default();
    b.next(&cfg, "b", at(0), at(3));
    b.next(&cfg, "a", at(0), at(4));
    b.next(&cfg, "a", at(0), at(5));
    let json = serde_json::to_string(&b).unwrap();
    // Sorted keys: the same state always serialises the same way.
    assert!(json.find("\"a\"") < json.find("\"b\""), "{json}");
    let back: Backoff = serde_json::from_str(&json).unwrap();
    assert_eq!(back, b);
    assert_eq!(back.get_ms("a"), 20_000);
}

#[test]
fn bo_08_configured_maximum_caps_the_delay_and_the_initial_delay() {
    let cfg = BackoffConfig::with_max_ms(60_000);
    assert_eq!(cfg.initial_ms, 10_000);
    assert_eq!(crash_loop(&cfg, 6), [0, 10, 20, 40, 60, 60]);
    let tiny = BackoffConfig::with_max_ms(5_000);
    assert_eq!(tiny.initial_ms, 5_000);
    assert_eq!(crash_loop(&tiny, 4), [0, 5, 5, 5]);
}

#[test]
fn bo_08_reduced_decay_sequence() {
    // ReduceDefaultCrashLoopBackOffDecay: 1s initial, 60s max.
    let cfg = BackoffConfig {
        initial_ms: 1_000,
        max_ms: 60_000,
        reset_after_ms: 600_000,
    };
    assert_eq!(crash_loop(&cfg, 9), [0, 1, 2, 4, 8, 16, 32, 60, 60]);
}
