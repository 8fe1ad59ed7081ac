//! Redaction of secret values before a record is appended.
//!
//! Owns the set of secret values the shell has handled (env values resolved from
//! `secretKeyRef`, secret volume data) and scrubbing them from an event: every string value
//! in the event that contains one gets it replaced by [`REDACTED`]. Also blanks the `value`
//! of any env var that names a `secretKeyRef` (a resolved pod must not carry it). Must run
//! on every input before `Engine::submit`, so nothing downstream (followers, exports,
//! durable segments, the flight recorder) ever sees a secret in clear.
//!
//! Bounds: at most [`MAX_SECRET_VALUES`] values are remembered (the oldest registered are
//! forgotten first); values shorter than [`MIN_SECRET_BYTES`] are not scrubbed by substring
//! (replacing every "a" in a ledger would destroy it), only by the structural env rule.

use std::collections::BTreeMap;

use crate::bounded_map::BoundedMap;
use std::sync::{Arc, RwLock};

use k8s_openapi::api::core::v1::{EnvVar, Pod};
use serde_json::Value;

use crate::core::record::Event;
use crate::ledger::shared::Payload;

/// What replaces a secret value.
pub const REDACTED: &str = "[redacted]";
/// Secret values remembered at most.
pub const MAX_SECRET_VALUES: usize = 10_000;
/// Shorter values are only redacted structurally.
pub const MIN_SECRET_BYTES: usize = 4;

struct Values {
    /// Each value, with its form inside a JSON string (escaped) for a fast first check; the
    /// oldest registered forgotten past [`MAX_SECRET_VALUES`].
    set: BoundedMap<String, String>,
}

impl Default for Values {
    fn default() -> Self {
        Values {
            set: BoundedMap::new(MAX_SECRET_VALUES),
        }
    }
}

/// The redactor, shared by the secret resolver (which registers values) and the daemon
/// (which redacts every input).
#[derive(Clone, Default)]
pub struct Redactor {
    values: Arc<RwLock<Values>>,
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.values.read().map(|v| v.set.len()).unwrap_or(0);
        write!(f, "Redactor({n} values)")
    }
}

fn escaped(v: &str) -> String {
    let s = serde_json::to_string(v).expect("a string serialises");
    s[1..s.len() - 1].to_string()
}

impl Redactor {
    /// A redactor that knows no values yet.
    pub fn new() -> Redactor {
        Redactor::default()
    }

    /// Remembers a secret value (no-op for short or known values).
    pub fn register(&self, value: &str) {
        if value.len() < MIN_SECRET_BYTES {
            return;
        }
        let mut v = self.values.write().unwrap_or_else(|e| e.into_inner());
        if v.set.contains_key(value) {
            return;
        }
        v.set.insert(value.to_string(), escaped(value));
    }

    /// The number of values known.
    pub fn len(&self) -> usize {
        self.values.read().map(|v| v.set.len()).unwrap_or(0)
    }

    /// True when no value is known.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The event with secret values scrubbed.
    pub fn redact(&self, event: Event) -> Event {
        let event = redact_pods(event);
        let v = self.values.read().unwrap_or_else(|e| e.into_inner());
        if v.set.is_empty() {
            return event;
        }
        let kind = event.kind();
        let text = match serde_json::to_string(&Payload(&event)) {
            Ok(t) => t,
            Err(_) => return event,
        };
        if !v.set.as_map().values().any(|s| text.contains(s.as_str())) {
            return event;
        }
        let mut json: Value = match serde_json::from_str(&text) {
            Ok(j) => j,
            Err(_) => return event,
        };
        scrub(&mut json, v.set.as_map());
        match Event::decode(kind, &json.to_string()) {
            Ok(e) => e,
            Err(e) => {
                // Never append the clear text: the redacted JSON no longer fits the event's
                // schema (a secret inside a number-like field?); keep the shape, drop detail.
                tracing::error!(kind, error = %e, "a redacted event does not decode; dropping its secret-bearing strings failed");
                event_without_text(kind, event)
            }
        }
    }
}

fn scrub(v: &mut Value, secrets: &BTreeMap<String, String>) {
    match v {
        Value::String(s) => {
            for secret in secrets.keys() {
                if s.contains(secret.as_str()) {
                    *s = s.replace(secret.as_str(), REDACTED);
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|x| scrub(x, secrets)),
        Value::Object(m) => m.values_mut().for_each(|x| scrub(x, secrets)),
        _ => {}
    }
}

/// Last resort when a scrubbed event cannot be decoded: a `ManifestRejected`-free world is
/// not guaranteed, so the event is replaced by an informational one that keeps its kind in
/// the text. In practice unreachable: secrets sit in free-text strings.
fn event_without_text(kind: &str, _event: Event) -> Event {
    Event::ManifestRejected(crate::core::record::event::ManifestRejected {
        path: String::new(),
        error: format!(
            "a {kind} event carried a secret value and could not be redacted; it was dropped"
        ),
    })
}

/// True if an env var names a `secretKeyRef` and also carries a value.
fn is_secret_value(e: &EnvVar) -> bool {
    let from_secret = e
        .value_from
        .as_ref()
        .is_some_and(|f| f.secret_key_ref.is_some());
    e.value.is_some() && from_secret
}

/// True if a pod's env has a [`is_secret_value`] var.
fn pod_has_secret_env_value(p: &Pod) -> bool {
    p.spec.as_ref().is_some_and(|s| {
        s.containers
            .iter()
            .chain(s.init_containers.iter().flatten())
            .flat_map(|c| c.env.iter().flatten())
            .chain(
                s.ephemeral_containers
                    .iter()
                    .flatten()
                    .flat_map(|c| c.env.iter().flatten()),
            )
            .any(is_secret_value)
    })
}

fn blank_secret_env(p: &mut Pod) {
    let Some(spec) = p.spec.as_mut() else { return };
    let blank = |env: &mut Option<Vec<EnvVar>>| {
        for e in env.iter_mut().flatten().filter(|e| is_secret_value(e)) {
            e.value = Some(REDACTED.to_string());
        }
    };
    for c in spec.containers.iter_mut() {
        blank(&mut c.env);
    }
    for c in spec.init_containers.iter_mut().flatten() {
        blank(&mut c.env);
    }
    for c in spec.ephemeral_containers.iter_mut().flatten() {
        blank(&mut c.env);
    }
}

fn redact_pod(p: &mut Arc<Pod>) {
    if pod_has_secret_env_value(p) {
        blank_secret_env(Arc::make_mut(p));
    }
}

fn redact_pods(mut event: Event) -> Event {
    match &mut event {
        Event::PodAdded(c)
        | Event::PodUpdated(c)
        | Event::PodRemoved(c)
        | Event::PodDeleted(c)
        | Event::PodReconcile(c) => redact_pod(&mut c.pod),
        Event::UpdatePod(u) => {
            if let Some(p) = u.pod.as_mut() {
                redact_pod(p);
            }
            if let Some(p) = u.mirror_pod.as_mut() {
                redact_pod(p);
            }
        }
        _ => {}
    }
    event
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::record::event::{ActionOutcome, RuntimeAction, RuntimeActionFinished};

    fn failed_start(message: &str) -> Event {
        Event::RuntimeActionFinished(RuntimeActionFinished {
            uid: "u1".into(),
            sync_id: 3,
            action: RuntimeAction::StartContainer {
                container: "main".into(),
                kind: crate::core::command::ContainerKind::Regular,
                id: "c1".into(),
            },
            outcome: ActionOutcome::Failed {
                reason: "RunContainerError".into(),
                message: message.into(),
                detail: None,
            },
            duration_ms: 1,
        })
    }

    #[test]
    fn a_registered_value_is_scrubbed_from_every_string_of_an_event() {
        let r = Redactor::new();
        let before = failed_start("cannot run \"/bin/hunter2-token\": not found");
        assert_eq!(r.redact(before.clone()), before, "nothing registered yet");
        r.register("hunter2-token");
        let after = r.redact(before);
        let text = serde_json::to_string(&after).unwrap();
        assert!(!text.contains("hunter2-token"), "{text}");
        assert!(text.contains("/bin/[redacted]"), "{text}");
        // the rest of the event is intact
        assert!(matches!(after, Event::RuntimeActionFinished(f) if f.sync_id == 3));
    }

    #[test]
    fn values_needing_json_escapes_are_found_and_short_values_ignored() {
        let r = Redactor::new();
        r.register("p\"w\\d\n1");
        r.register("abc");
        assert_eq!(r.len(), 1);
        let e = r.redact(failed_start("got p\"w\\d\n1 and abc"));
        let text = serde_json::to_string(&e).unwrap();
        assert!(text.contains("got [redacted] and abc"), "{text}");
    }

    #[test]
    fn env_values_beside_a_secret_key_ref_are_blanked_in_pods() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "default", "uid": "u"},
            "spec": {"containers": [{"name": "c", "env": [
                {"name": "TOKEN", "value": "s3cret", "valueFrom": {"secretKeyRef": {"name": "db", "key": "token"}}},
                {"name": "PLAIN", "value": "visible"}
            ]}]}
        }))
        .unwrap();
        let e = Event::PodAdded(crate::core::record::event::PodConfigChange {
            source: crate::core::config::PodSource::Api,
            pod: Arc::new(pod),
        });
        let text = serde_json::to_string(&Redactor::new().redact(e)).unwrap();
        assert!(!text.contains("s3cret"), "{text}");
        assert!(text.contains("visible"), "{text}");
    }

    #[test]
    fn the_remembered_values_are_bounded() {
        let r = Redactor::new();
        for i in 0..(MAX_SECRET_VALUES + 5) {
            r.register(&format!("secret-{i:06}"));
        }
        assert_eq!(r.len(), MAX_SECRET_VALUES);
    }
}
