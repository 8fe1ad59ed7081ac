//! What a collector answers, read: an `ExportTraceServiceResponse` (its partial success) and
//! a `google.rpc.Status` (its message and `RetryInfo` delay), for both transports.
//!
//! Owns reading these messages from their bytes. Must not decide what an answer means for
//! the export (the transports classify failures, `observe::export` counts them).

use std::time::Duration;

use super::export::PartialSuccess;
use super::protobuf::{read_fields, FieldValue};

/// The type URL of a `google.rpc.RetryInfo` among a status's details.
const RETRY_INFO: &[u8] = b"type.googleapis.com/google.rpc.RetryInfo";

/// Reads an `ExportTraceServiceResponse`: its `partial_success`, if any.
pub fn partial_success(response: &[u8]) -> Result<PartialSuccess, String> {
    let bad = |e: String| format!("unreadable ExportTraceServiceResponse: {e}");
    let mut out = PartialSuccess::default();
    for (number, value) in read_fields(response).map_err(bad)? {
        if let (1, FieldValue::Bytes(partial)) = (number, value) {
            for (n, v) in read_fields(partial).map_err(bad)? {
                match (n, v) {
                    // int64: a negative count is nonsense, read as none
                    (1, FieldValue::Varint(r)) => out.rejected_spans = (r as i64).max(0) as u64,
                    (2, FieldValue::Bytes(m)) => {
                        out.error_message = String::from_utf8_lossy(m).into_owned()
                    }
                    _ => {}
                }
            }
        }
    }
    Ok(out)
}

/// A `google.rpc.Status`, as far as an exporter reads it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RpcStatus {
    /// Its message (empty if none, or not UTF-8).
    pub message: String,
    /// The delay of a `google.rpc.RetryInfo` among its details.
    pub retry_delay: Option<Duration>,
}

/// Reads an encoded `google.rpc.Status` (gRPC's `grpc-status-details-bin`, or an OTLP/HTTP
/// failure's body); `None` if the bytes are not one.
pub fn rpc_status(bytes: &[u8]) -> Option<RpcStatus> {
    let mut out = RpcStatus::default();
    for (n, v) in read_fields(bytes).ok()? {
        match (n, v) {
            (2, FieldValue::Bytes(m)) => {
                out.message = std::str::from_utf8(m).unwrap_or_default().to_string()
            }
            // details: repeated Any { type_url = 1, value = 2 }
            (3, FieldValue::Bytes(any)) if out.retry_delay.is_none() => {
                out.retry_delay = retry_info_delay(any)
            }
            _ => {}
        }
    }
    Some(out)
}

/// The delay of an `Any` that holds a `RetryInfo { retry_delay = 1: Duration { seconds = 1,
/// nanos = 2 } }`.
fn retry_info_delay(any: &[u8]) -> Option<Duration> {
    let any = read_fields(any).ok()?;
    let is_retry_info = any
        .iter()
        .any(|(n, v)| matches!((n, v), (1, FieldValue::Bytes(t)) if *t == RETRY_INFO));
    let value = any.iter().find_map(|(n, v)| match (n, v) {
        (2, FieldValue::Bytes(b)) if is_retry_info => Some(*b),
        _ => None,
    })?;
    let delay = read_fields(value)
        .ok()?
        .into_iter()
        .find_map(|(n, v)| match (n, v) {
            (1, FieldValue::Bytes(d)) => Some(d),
            _ => None,
        })?;
    let (mut seconds, mut nanos) = (0u64, 0u32);
    for (n, v) in read_fields(delay).ok()? {
        match (n, v) {
            (1, FieldValue::Varint(s)) => seconds = (s as i64).max(0) as u64,
            (2, FieldValue::Varint(ns)) => nanos = (ns as i64).clamp(0, 999_999_999) as u32,
            _ => {}
        }
    }
    Some(Duration::new(seconds, nanos))
}

/// Encoded answers, for the transports' tests.
#[cfg(test)]
pub(crate) mod testing {
    use crate::observe::protobuf::Writer;

    /// A `google.rpc.Status` with `code` and `message`, and a `RetryInfo` of
    /// `(seconds, nanos)` if given.
    pub fn status(code: i64, message: &str, retry: Option<(i64, i64)>) -> Vec<u8> {
        let mut w = Writer::default();
        w.int64(1, code);
        w.string(2, message);
        if let Some((seconds, nanos)) = retry {
            let any = w.open(3);
            w.string(1, "type.googleapis.com/google.rpc.RetryInfo");
            let info = w.open(2);
            let delay = w.open(1);
            w.int64(1, seconds);
            w.int64(2, nanos);
            w.close(delay);
            w.close(info);
            w.close(any);
        }
        w.bytes().to_vec()
    }

    /// An `ExportTraceServiceResponse` with a partial success of `rejected` and `message`.
    pub fn partial(rejected: i64, message: &str) -> Vec<u8> {
        let mut w = Writer::default();
        let p = w.open(1);
        w.int64(1, rejected);
        w.string(2, message);
        w.close(p);
        w.bytes().to_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::testing::{partial, status};
    use super::*;
    use crate::observe::protobuf::Writer;

    #[test]
    fn a_collectors_partial_success_is_read_and_an_empty_answer_means_all_accepted() {
        assert_eq!(partial_success(&[]).unwrap(), PartialSuccess::default());
        assert_eq!(
            partial_success(&partial(3, "too old")).unwrap(),
            PartialSuccess {
                rejected_spans: 3,
                error_message: "too old".into(),
            }
        );
        assert!(partial_success(&[0x0a, 9]).is_err());
    }

    #[test]
    fn a_status_gives_its_message_and_its_retry_info_delay() {
        assert_eq!(
            rpc_status(&status(8, "slow down", Some((2, 500_000_000)))),
            Some(RpcStatus {
                message: "slow down".into(),
                retry_delay: Some(Duration::from_millis(2_500)),
            })
        );
        assert_eq!(
            rpc_status(&status(3, "bad span", None)),
            Some(RpcStatus {
                message: "bad span".into(),
                retry_delay: None,
            })
        );
        assert_eq!(rpc_status(&[]), Some(RpcStatus::default()));
        // another detail is not a retry delay
        let mut other = Writer::default();
        let any = other.open(3);
        other.string(1, "type.googleapis.com/google.rpc.DebugInfo");
        other.string(2, "x");
        other.close(any);
        assert_eq!(rpc_status(other.bytes()).unwrap().retry_delay, None);
        // text is not a status
        assert_eq!(rpc_status(b"overloaded, try later"), None);
    }
}
