//! The query of `/containerLogs` decoded and validated into [`LogOptions`], as the kubelet
//! decodes a v1 `PodLogOptions` and checks it with `ValidatePodLogOptions`.
//!
//! Owns: parameter decoding (booleans, integers, RFC 3339 times, the legacy `tail`) and
//! validation. Must not: read files or look at pods; it knows nothing but the query.

use std::collections::HashMap;

/// What the client asked for. `None` means "not given" (all lines, no byte limit, ...).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LogOptions {
    /// Keep streaming new lines until the container exits (`follow`).
    pub follow: bool,
    /// Read the previous (terminated) instance of the container (`previous`).
    pub previous: bool,
    /// Prefix each line with its RFC 3339 timestamp (`timestamps`).
    pub timestamps: bool,
    /// Only the last N lines of the file (`tailLines`, or the legacy `tail`).
    pub tail_lines: Option<i64>,
    /// Stop after this many bytes of output (`limitBytes`).
    pub limit_bytes: Option<i64>,
    /// Only lines at most this many seconds old (`sinceSeconds`).
    pub since_seconds: Option<i64>,
    /// Only lines at or after this time (`sinceTime`, RFC 3339).
    pub since_time: Option<jiff::Timestamp>,
}

/// Why a query was refused; the text names the parameter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum QueryError {
    /// A value could not be decoded (the kubelet's 400 "Unable to decode query").
    Undecodable(String),
    /// Decoded but invalid (the kubelet's 422 "Invalid request").
    Invalid(String),
}

impl std::fmt::Display for QueryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            QueryError::Undecodable(m) => write!(f, "Unable to decode query: {m}"),
            QueryError::Invalid(m) => write!(f, "Invalid request: {m}"),
        }
    }
}

/// A query boolean as Kubernetes decodes it: absent is false, `0` and `false` (any case)
/// are false, anything else (an empty value too) is true.
fn boolean(q: &HashMap<String, String>, key: &str) -> bool {
    match q.get(key) {
        None => false,
        Some(v) => !(v == "0" || v.eq_ignore_ascii_case("false")),
    }
}

fn integer(q: &HashMap<String, String>, key: &str) -> Result<Option<i64>, QueryError> {
    match q.get(key).map(String::as_str) {
        None | Some("") => Ok(None),
        Some(v) => v
            .parse()
            .map(Some)
            .map_err(|_| QueryError::Undecodable(format!("{key}: {v:?} is not an integer"))),
    }
}

impl LogOptions {
    /// Decodes and validates the query parameters of one request.
    pub fn from_query(q: &HashMap<String, String>) -> Result<LogOptions, QueryError> {
        let mut q = q.clone();
        // the legacy `tail`: a line count, or `all` for every line
        if let Some(tail) = q.get("tail").cloned().filter(|t| !t.is_empty()) {
            if tail == "all" {
                q.remove("tailLines");
            } else {
                q.insert("tailLines".into(), tail);
            }
        }
        let since_time = match q.get("sinceTime").map(String::as_str) {
            None | Some("") => None,
            Some(v) => Some(v.parse::<jiff::Timestamp>().map_err(|e| {
                QueryError::Undecodable(format!("sinceTime: {v:?} is not an RFC 3339 time: {e}"))
            })?),
        };
        let opts = LogOptions {
            follow: boolean(&q, "follow"),
            previous: boolean(&q, "previous"),
            timestamps: boolean(&q, "timestamps"),
            tail_lines: integer(&q, "tailLines")?,
            limit_bytes: integer(&q, "limitBytes")?,
            since_seconds: integer(&q, "sinceSeconds")?,
            since_time,
        };
        opts.validate()?;
        Ok(opts)
    }

    /// `ValidatePodLogOptions`: the first problem found.
    fn validate(&self) -> Result<(), QueryError> {
        let invalid = |m: String| Err(QueryError::Invalid(m));
        if let Some(n) = self.tail_lines.filter(|n| *n < 0) {
            return invalid(format!(
                "tailLines: Invalid value: {n}: must be greater than or equal to 0"
            ));
        }
        if let Some(n) = self.limit_bytes.filter(|n| *n < 1) {
            return invalid(format!(
                "limitBytes: Invalid value: {n}: must be greater than 0"
            ));
        }
        if self.since_seconds.is_some() && self.since_time.is_some() {
            return invalid("at most one of `sinceTime` or `sinceSeconds` may be specified".into());
        }
        if let Some(n) = self.since_seconds.filter(|n| *n < 1) {
            return invalid(format!(
                "sinceSeconds: Invalid value: {n}: must be greater than 0"
            ));
        }
        Ok(())
    }

    /// The earliest record time to show, given the time `now` of the request.
    pub fn since(&self, now: jiff::Timestamp) -> Option<jiff::Timestamp> {
        if let Some(t) = self.since_time {
            return Some(t);
        }
        let secs = self.since_seconds?;
        Some(
            now.checked_sub(jiff::SignedDuration::from_secs(secs))
                .unwrap_or(jiff::Timestamp::MIN),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn absent_parameters_mean_every_line_without_limits() {
        assert_eq!(LogOptions::from_query(&q(&[])), Ok(LogOptions::default()));
    }

    #[test]
    fn booleans_are_false_only_for_zero_and_false_as_kubernetes_decodes_them() {
        let o = LogOptions::from_query(&q(&[
            ("follow", "true"),
            ("previous", "1"),
            ("timestamps", ""),
        ]))
        .unwrap();
        assert!(o.follow && o.previous && o.timestamps);
        let o = LogOptions::from_query(&q(&[("follow", "FALSE"), ("previous", "0")])).unwrap();
        assert!(!o.follow && !o.previous);
    }

    #[test]
    fn the_legacy_tail_parameter_sets_tail_lines_and_all_means_every_line() {
        let o = LogOptions::from_query(&q(&[("tail", "3")])).unwrap();
        assert_eq!(o.tail_lines, Some(3));
        let o = LogOptions::from_query(&q(&[("tail", "all"), ("tailLines", "2")])).unwrap();
        assert_eq!(o.tail_lines, None);
    }

    #[test]
    fn a_non_numeric_count_is_undecodable_and_names_the_parameter() {
        for key in ["tailLines", "limitBytes", "sinceSeconds"] {
            let e = LogOptions::from_query(&q(&[(key, "ten")])).unwrap_err();
            assert!(
                matches!(&e, QueryError::Undecodable(m) if m.contains(key)),
                "{e}"
            );
        }
        let e = LogOptions::from_query(&q(&[("sinceTime", "yesterday")])).unwrap_err();
        assert!(
            matches!(&e, QueryError::Undecodable(m) if m.contains("sinceTime")),
            "{e}"
        );
    }

    #[test]
    fn negative_or_zero_counts_are_invalid_and_name_the_parameter() {
        for (key, v) in [
            ("tailLines", "-1"),
            ("limitBytes", "0"),
            ("sinceSeconds", "-5"),
        ] {
            let e = LogOptions::from_query(&q(&[(key, v)])).unwrap_err();
            assert!(
                matches!(&e, QueryError::Invalid(m) if m.contains(key)),
                "{e}"
            );
        }
        assert!(LogOptions::from_query(&q(&[("tailLines", "0")])).is_ok());
    }

    #[test]
    fn since_seconds_and_since_time_together_are_invalid() {
        let e = LogOptions::from_query(&q(&[
            ("sinceSeconds", "5"),
            ("sinceTime", "2024-01-02T03:04:05Z"),
        ]))
        .unwrap_err();
        assert!(matches!(e, QueryError::Invalid(m) if m.contains("at most one")));
    }

    #[test]
    fn since_is_the_given_time_or_now_minus_the_given_seconds() {
        let now: jiff::Timestamp = "2024-01-02T03:04:05Z".parse().unwrap();
        let o = LogOptions::from_query(&q(&[("sinceSeconds", "5")])).unwrap();
        assert_eq!(o.since(now), Some("2024-01-02T03:04:00Z".parse().unwrap()));
        let o = LogOptions::from_query(&q(&[("sinceTime", "2024-01-01T00:00:00Z")])).unwrap();
        assert_eq!(o.since(now), Some("2024-01-01T00:00:00Z".parse().unwrap()));
        assert_eq!(LogOptions::default().since(now), None);
    }
}
