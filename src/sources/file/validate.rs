//! Validation of a defaulted static pod: a focused subset of the API server's
//! `ValidatePodCreate`, enough to turn the common mistakes into clear errors.
//!
//! Owns the rules and their wording (field paths and `field.Error` texts as the API server
//! prints them). Must not default or change the pod. Checks: metadata.name (required, a
//! DNS-1123 subdomain after the node suffix), metadata.namespace (a DNS-1123 label), at
//! least one container, container names (DNS-1123 labels, unique across init and app
//! containers), images (required, no surrounding whitespace), ports (number and protocol),
//! restartPolicy, container restartPolicy (`Always`, init containers only), probes on init
//! containers (restartable ones only), probe thresholds, exactly one handler per probe and
//! lifecycle hook, terminationGracePeriodSeconds.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{Container, Pod, Probe};

use super::error::FieldError;

const DNS1123_LABEL_MAX: usize = 63;
const DNS1123_SUBDOMAIN_MAX: usize = 253;
const LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric \
    characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name', \
    or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case \
    alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character \
    (e.g. 'example.com', regex used for validation is \
    '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const RESTART_POLICIES: &[&str] = &["Always", "OnFailure", "Never"];
const PROTOCOLS: &[&str] = &["SCTP", "TCP", "UDP"];

/// Every problem with `pod`, in field order; empty if it is valid.
pub fn validate(pod: &Pod) -> Vec<FieldError> {
    let mut errs = Vec::new();
    match pod.metadata.name.as_deref() {
        None | Some("") => errs.push(FieldError::required("metadata.name")),
        Some(name) => {
            for msg in dns1123_subdomain(name) {
                errs.push(FieldError::invalid(
                    "metadata.name",
                    format!("{name:?}"),
                    msg,
                ));
            }
        }
    }
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("");
    for msg in dns1123_label(namespace) {
        errs.push(FieldError::invalid(
            "metadata.namespace",
            format!("{namespace:?}"),
            msg,
        ));
    }
    let Some(spec) = pod.spec.as_ref() else {
        errs.push(FieldError::required("spec.containers"));
        return errs;
    };

    let mut names = BTreeSet::new();
    if spec.containers.is_empty() {
        errs.push(FieldError::required("spec.containers"));
    }
    for (i, c) in spec.containers.iter().enumerate() {
        let field = format!("spec.containers[{i}]");
        validate_common(c, &field, &mut names, &mut errs);
        if c.restart_policy.is_some() {
            errs.push(FieldError::forbidden(
                format!("{field}.restartPolicy"),
                "may not be set for non-init containers",
            ));
        }
        validate_probes(c, &field, &mut errs);
        validate_lifecycle(c, &field, &mut errs);
    }
    for (i, c) in spec.init_containers.iter().flatten().enumerate() {
        let field = format!("spec.initContainers[{i}]");
        validate_common(c, &field, &mut names, &mut errs);
        validate_lifecycle(c, &field, &mut errs);
        match c.restart_policy.as_deref() {
            Some("Always") => validate_probes(c, &field, &mut errs),
            other => {
                if let Some(policy) = other {
                    errs.push(FieldError::not_supported(
                        format!("{field}.restartPolicy"),
                        policy,
                        &["Always"],
                    ));
                }
                for (probe, name) in probes(c) {
                    if probe.is_some() {
                        errs.push(FieldError::forbidden(
                            format!("{field}.{name}"),
                            "may not be set for init containers without restartPolicy=Always",
                        ));
                    }
                }
            }
        }
    }

    if let Some(policy) = spec.restart_policy.as_deref() {
        if !RESTART_POLICIES.contains(&policy) {
            errs.push(FieldError::not_supported(
                "spec.restartPolicy",
                policy,
                RESTART_POLICIES,
            ));
        }
    }
    if let Some(grace) = spec.termination_grace_period_seconds {
        if grace < 0 {
            errs.push(FieldError::invalid(
                "spec.terminationGracePeriodSeconds",
                grace,
                "must be greater than or equal to 0",
            ));
        }
    }
    errs
}

/// Name, image and ports, shared by app and init containers. `names` collects the names
/// seen so far across both lists.
fn validate_common(
    c: &Container,
    field: &str,
    names: &mut BTreeSet<String>,
    errs: &mut Vec<FieldError>,
) {
    if c.name.is_empty() {
        errs.push(FieldError::required(format!("{field}.name")));
    } else {
        for msg in dns1123_label(&c.name) {
            errs.push(FieldError::invalid(
                format!("{field}.name"),
                format!("{:?}", c.name),
                msg,
            ));
        }
        if !names.insert(c.name.clone()) {
            errs.push(FieldError::duplicate(format!("{field}.name"), &c.name));
        }
    }
    match c.image.as_deref() {
        None | Some("") => errs.push(FieldError::required(format!("{field}.image"))),
        Some(image) if image.trim() != image => errs.push(FieldError::invalid(
            format!("{field}.image"),
            format!("{image:?}"),
            "must not have leading or trailing whitespace",
        )),
        Some(_) => {}
    }
    for (j, p) in c.ports.iter().flatten().enumerate() {
        let port_field = format!("{field}.ports[{j}]");
        if !(1..=65535).contains(&p.container_port) {
            errs.push(FieldError::invalid(
                format!("{port_field}.containerPort"),
                p.container_port,
                "must be between 1 and 65535, inclusive",
            ));
        }
        if let Some(protocol) = p.protocol.as_deref() {
            if !PROTOCOLS.contains(&protocol) {
                errs.push(FieldError::not_supported(
                    format!("{port_field}.protocol"),
                    protocol,
                    PROTOCOLS,
                ));
            }
        }
    }
}

fn probes(c: &Container) -> [(Option<&Probe>, &'static str); 3] {
    [
        (c.liveness_probe.as_ref(), "livenessProbe"),
        (c.readiness_probe.as_ref(), "readinessProbe"),
        (c.startup_probe.as_ref(), "startupProbe"),
    ]
}

/// `validateHandler`: exactly one action. `actions` are (present, name) in API order.
fn validate_handler(actions: &[(bool, &str)], field: &str, errs: &mut Vec<FieldError>) {
    let mut count = 0;
    for (present, name) in actions {
        if !present {
            continue;
        }
        if count > 0 {
            errs.push(FieldError::forbidden(
                format!("{field}.{name}"),
                "may not specify more than 1 handler type",
            ));
        }
        count += 1;
    }
    if count == 0 {
        errs.push(FieldError {
            field: field.to_string(),
            detail: "Required value: must specify a handler type".into(),
        });
    }
}

/// Lifecycle hooks: exactly one of exec, httpGet, tcpSocket, sleep each.
fn validate_lifecycle(c: &Container, field: &str, errs: &mut Vec<FieldError>) {
    let Some(l) = &c.lifecycle else { return };
    for (hook, name) in [(&l.post_start, "postStart"), (&l.pre_stop, "preStop")] {
        let Some(h) = hook else { continue };
        validate_handler(
            &[
                (h.exec.is_some(), "exec"),
                (h.http_get.is_some(), "httpGet"),
                (h.tcp_socket.is_some(), "tcpSocket"),
                (h.sleep.is_some(), "sleep"),
            ],
            &format!("{field}.lifecycle.{name}"),
            errs,
        );
    }
}

fn validate_probes(c: &Container, field: &str, errs: &mut Vec<FieldError>) {
    for (probe, name) in probes(c) {
        let Some(probe) = probe else { continue };
        let probe_field = format!("{field}.{name}");
        validate_handler(
            &[
                (probe.exec.is_some(), "exec"),
                (probe.http_get.is_some(), "httpGet"),
                (probe.tcp_socket.is_some(), "tcpSocket"),
                (probe.grpc.is_some(), "grpc"),
            ],
            &probe_field,
            errs,
        );
        for (value, threshold) in [
            (probe.success_threshold, "successThreshold"),
            (probe.failure_threshold, "failureThreshold"),
        ] {
            if let Some(v) = value.filter(|v| *v < 1) {
                errs.push(FieldError::invalid(
                    format!("{probe_field}.{threshold}"),
                    v,
                    "must be greater than or equal to 1",
                ));
            }
        }
        if name != "readinessProbe" {
            if let Some(v) = probe.success_threshold.filter(|v| *v > 1) {
                errs.push(FieldError::invalid(
                    format!("{probe_field}.successThreshold"),
                    v,
                    "must be 1",
                ));
            }
        }
    }
}

/// `validation.IsDNS1123Label`: the problems with `s`, none if it is a label.
pub fn dns1123_label(s: &str) -> Vec<&'static str> {
    let mut msgs = Vec::new();
    if s.len() > DNS1123_LABEL_MAX {
        msgs.push("must be no more than 63 characters");
    }
    if !is_label_text(s) {
        msgs.push(LABEL_MSG);
    }
    msgs
}

/// `validation.IsDNS1123Subdomain`: the problems with `s`, none if it is a subdomain.
pub fn dns1123_subdomain(s: &str) -> Vec<&'static str> {
    let mut msgs = Vec::new();
    if s.len() > DNS1123_SUBDOMAIN_MAX {
        msgs.push("must be no more than 253 characters");
    }
    if !s.split('.').all(is_label_text) {
        msgs.push(SUBDOMAIN_MSG);
    }
    msgs
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`, with no length limit.
fn is_label_text(s: &str) -> bool {
    let b = s.as_bytes();
    let alnum = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    match (b.first(), b.last()) {
        (Some(first), Some(last)) => {
            alnum(first) && alnum(last) && b.iter().all(|c| alnum(c) || *c == b'-')
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns1123_names_follow_the_api_server_regexes() {
        assert!(dns1123_label("web-1").is_empty());
        assert!(dns1123_label("1a").is_empty());
        assert_eq!(dns1123_label("Web").len(), 1);
        assert_eq!(dns1123_label("-web").len(), 1);
        assert_eq!(dns1123_label("web-").len(), 1);
        assert_eq!(dns1123_label("").len(), 1);
        assert_eq!(dns1123_label("a.b").len(), 1);
        assert_eq!(
            dns1123_label(&"a".repeat(64)),
            ["must be no more than 63 characters"]
        );
        assert!(dns1123_subdomain("etcd.kube-system-node-a").is_empty());
        assert_eq!(dns1123_subdomain("a..b").len(), 1);
        assert_eq!(dns1123_subdomain("a_b").len(), 1);
        assert_eq!(
            dns1123_subdomain(&"a".repeat(254)),
            ["must be no more than 253 characters"]
        );
    }
}
