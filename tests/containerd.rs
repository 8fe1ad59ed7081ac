//! Issue 7 acceptance: ledgerlet against a real containerd 1.6 + runc, through the real
//! binary and its CRI client. One private containerd serves this test binary
//! (`tests/support/containerd.rs`); every test runs its own agent with its own node name and
//! removes its pods when it ends. Without containerd the tests are skipped, except under
//! `CI=true` where that is a failure (`scripts/test.sh` installs it as root).

mod support;

use support::scenarios::{self, Runtime};

#[test]
fn containerd_restart_policies_always_onfailure_never_give_restart_counts_2_1_0() {
    let Some(rt) = Runtime::containerd("restart policies") else {
        return;
    };
    scenarios::restart_policies(rt, "ctd-restarts");
}

#[test]
fn containerd_init_containers_succeed_under_never_and_fail_under_always_and_never() {
    let Some(rt) = Runtime::containerd("init containers") else {
        return;
    };
    scenarios::init_containers(rt, "ctd-init");
}

#[test]
fn containerd_removing_a_manifest_stops_the_pod_within_its_grace_period() {
    let Some(rt) = Runtime::containerd("graceful deletion") else {
        return;
    };
    scenarios::graceful_deletion(rt, "ctd-grace");
}
