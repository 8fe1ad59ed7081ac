//! The kubelet's request → authorization attributes mapping (`NewNodeAuthorizerAttributesGetter`).
//!
//! Owns the pure rule that turns an HTTP method and path into the verb and the `nodes`
//! subresources a SubjectAccessReview asks about, and the 403 message. Must not do I/O: the
//! reviews themselves are `authz`'s.

/// What one request asks to do, as a SubjectAccessReview would state it (the resource is
/// always `nodes`, the name the node's).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attributes {
    /// The API verb from the HTTP method (`get`, `create`, ...; empty for other methods,
    /// as the kubelet leaves it).
    pub verb: &'static str,
    /// The subresources to try in order; the request is allowed when any one is.
    pub subresources: Vec<&'static str>,
}

/// `path` is `prefix` or below it (the kubelet's `isSubpath`).
pub fn is_subpath(path: &str, prefix: &str) -> bool {
    let prefix = prefix.trim_end_matches('/');
    path == prefix || (path.starts_with(prefix) && path.as_bytes().get(prefix.len()) == Some(&b'/'))
}

/// The API verb for an HTTP method (HEAD and anything else: empty, as the kubelet's).
pub fn verb(method: &str) -> &'static str {
    match method {
        "POST" => "create",
        "GET" => "get",
        "PUT" => "update",
        "PATCH" => "patch",
        "DELETE" => "delete",
        _ => "",
    }
}

/// The attributes of a request, with the fine-grained subresources (`KubeletFineGrainedAuthz`,
/// on by default since 1.33) tried before the coarse one.
pub fn for_request(method: &str, path: &str) -> Attributes {
    let mut subresources = Vec::with_capacity(2);
    if is_subpath(path, "/pods") || is_subpath(path, "/runningpods/") {
        subresources.push("pods");
    } else if is_subpath(path, "/healthz") {
        subresources.push("healthz");
    } else if is_subpath(path, "/configz") {
        subresources.push("configz");
    }
    subresources.push(if is_subpath(path, "/stats") {
        "stats"
    } else if is_subpath(path, "/metrics") {
        "metrics"
    } else if is_subpath(path, "/logs") {
        "log"
    } else if is_subpath(path, "/checkpoint") {
        "checkpoint"
    } else if is_subpath(path, "/statusz") {
        "statusz"
    } else if is_subpath(path, "/flagz") {
        "configz"
    } else {
        "proxy"
    });
    Attributes {
        verb: verb(method),
        subresources,
    }
}

/// The kubelet's 403 body: `Forbidden (user=U, verb=V, resource=nodes, subresource(s)=[a b])`.
pub fn forbidden_message(user: &str, attrs: &Attributes) -> String {
    format!(
        "Forbidden (user={user}, verb={}, resource=nodes, subresource(s)=[{}])\n",
        attrs.verb,
        attrs.subresources.join(" ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pods_are_tried_as_nodes_pods_then_nodes_proxy() {
        let a = for_request("GET", "/pods");
        assert_eq!(a.verb, "get");
        assert_eq!(a.subresources, vec!["pods", "proxy"]);
        assert_eq!(
            for_request("GET", "/pods/").subresources,
            vec!["pods", "proxy"]
        );
    }

    #[test]
    fn healthz_and_configz_have_fine_grained_subresources_before_proxy() {
        assert_eq!(
            for_request("GET", "/healthz").subresources,
            vec!["healthz", "proxy"]
        );
        assert_eq!(
            for_request("GET", "/healthz/ping").subresources,
            vec!["healthz", "proxy"]
        );
        assert_eq!(
            for_request("GET", "/configz").subresources,
            vec!["configz", "proxy"]
        );
    }

    #[test]
    fn metrics_stats_and_logs_map_to_their_own_subresource_only() {
        assert_eq!(for_request("GET", "/metrics").subresources, vec!["metrics"]);
        assert_eq!(
            for_request("GET", "/metrics/probes").subresources,
            vec!["metrics"]
        );
        assert_eq!(
            for_request("GET", "/metrics/resource").subresources,
            vec!["metrics"]
        );
        assert_eq!(
            for_request("GET", "/stats/summary").subresources,
            vec!["stats"]
        );
        assert_eq!(for_request("GET", "/logs/syslog").subresources, vec!["log"]);
        assert_eq!(
            for_request("GET", "/checkpoint/ns/p/c").subresources,
            vec!["checkpoint"]
        );
        assert_eq!(for_request("GET", "/flagz").subresources, vec!["configz"]);
    }

    #[test]
    fn a_path_that_only_shares_a_prefix_is_proxy() {
        assert_eq!(
            for_request("GET", "/metricsfoo").subresources,
            vec!["proxy"]
        );
        assert_eq!(for_request("GET", "/podsx").subresources, vec!["proxy"]);
        assert_eq!(
            for_request("GET", "/debug/ledger").subresources,
            vec!["proxy"]
        );
        assert_eq!(
            for_request("GET", "/containerLogs/ns/p/c").subresources,
            vec!["proxy"]
        );
        assert_eq!(
            for_request("POST", "/exec/ns/p/c").subresources,
            vec!["proxy"]
        );
    }

    #[test]
    fn http_methods_map_to_api_verbs_and_unknown_methods_to_none() {
        assert_eq!(verb("POST"), "create");
        assert_eq!(verb("GET"), "get");
        assert_eq!(verb("PUT"), "update");
        assert_eq!(verb("PATCH"), "patch");
        assert_eq!(verb("DELETE"), "delete");
        assert_eq!(verb("HEAD"), "");
        assert_eq!(verb("BREW"), "");
    }

    #[test]
    fn the_forbidden_message_names_user_verb_resource_and_subresources() {
        let a = for_request("GET", "/pods");
        assert_eq!(
            forbidden_message("alice", &a),
            "Forbidden (user=alice, verb=get, resource=nodes, subresource(s)=[pods proxy])\n"
        );
    }
}
