//! Runs container lifecycle hooks (kubelet `lifecycle/handlers.go`): exec through CRI
//! `ExecSync`, httpGet, and sleep, within a time limit.
//!
//! Owns running one handler and the upstream wording of its failures. An HTTP hook fails
//! only when the request cannot be made (any status code is fine, as upstream); an exec
//! hook fails on a non-zero exit. Must not decide when hooks run or what a failure means
//! for the container: the executor runs postStart after `StartContainer` and preStop before
//! `StopContainer`, and the core decides the kill.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, LifecycleHandler, Pod};

use crate::core::pod;
use crate::cri::CriClient;
use crate::shell::http_get;
use crate::shell::prober::target;

/// Where a hook runs.
pub struct HookSite<'a> {
    /// The CRI runtime (for exec).
    pub cri: &'a CriClient,
    /// The pod.
    pub pod: &'a Pod,
    /// The pod's IP (the default host of an httpGet hook).
    pub pod_ip: &'a str,
}

/// How a hook ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HookOutcome {
    /// It finished without error.
    Done,
    /// It failed; the message names the hook, container and pod, as upstream's.
    Failed(String),
    /// It was still running when its time was up (for preStop: the grace period).
    NotFinished,
}

/// `format.Pod`: `name_namespace(uid)`.
fn pod_desc(p: &Pod) -> String {
    format!(
        "{}_{}({})",
        pod::name(p),
        pod::namespace(p),
        pod::uid_str(p)
    )
}

async fn run_handler(
    site: &HookSite<'_>,
    c: &Container,
    container_id: &str,
    handler: &LifecycleHandler,
    limit: Duration,
) -> Result<(), String> {
    if let Some(e) = &handler.exec {
        let cmd = target::expand_command(e.command.as_deref().unwrap_or_default(), c);
        let shown = format!("[{}]", cmd.join(" "));
        let fail = |error: String, output: &str| {
            format!(
                "Exec lifecycle hook ({shown}) for Container {:?} in Pod {:?} failed - error: {error}, message: {output:?}",
                c.name,
                pod_desc(site.pod)
            )
        };
        if cmd.is_empty() {
            return Err(fail("the command is empty".into(), ""));
        }
        let joined = cmd.join(" ");
        return match site.cri.exec_sync(container_id, cmd, 0).await {
            Ok(r) => {
                let mut out = r.stdout;
                out.extend_from_slice(&r.stderr);
                let output = String::from_utf8_lossy(&out).into_owned();
                if r.exit_code == 0 {
                    Ok(())
                } else {
                    Err(fail(
                        format!("command '{joined}' exited with {}: ", r.exit_code),
                        &output,
                    ))
                }
            }
            Err(e) => Err(fail(e.to_string(), "")),
        };
    }
    if let Some(h) = &handler.http_get {
        let path = h.path.clone().unwrap_or_default();
        let fail = |error: String| {
            format!(
                "HTTP lifecycle hook ({path}) for Container {:?} in Pod {:?} failed - error: {error}",
                c.name,
                pod_desc(site.pod)
            )
        };
        let t = target::http_target(h, c, site.pod, site.pod_ip).map_err(fail)?;
        // any response will do: only a request that cannot be made fails the hook
        return http_get::get(&t, limit, &target::user_agent("lifecycle"))
            .await
            .map(|_| ())
            .map_err(fail);
    }
    if let Some(s) = &handler.sleep {
        tokio::time::sleep(Duration::from_secs(s.seconds.max(0) as u64)).await;
        return Ok(());
    }
    Err(format!(
        "Cannot run handler: invalid handler for container {:?} in pod {:?}: it has no exec, httpGet or sleep action",
        c.name,
        pod_desc(site.pod)
    ))
}

/// Runs `handler` of container `c` (instance `container_id`) for at most `limit`.
pub async fn run(
    site: &HookSite<'_>,
    c: &Container,
    container_id: &str,
    handler: &LifecycleHandler,
    limit: Duration,
) -> HookOutcome {
    match tokio::time::timeout(limit, run_handler(site, c, container_id, handler, limit)).await {
        Ok(Ok(())) => HookOutcome::Done,
        Ok(Err(e)) => HookOutcome::Failed(e),
        Err(_) => HookOutcome::NotFinished,
    }
}
