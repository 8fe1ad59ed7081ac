//! The ledger as a stream: the gRPC service `ledgerlet.v1.Ledger` (Watch, Export), its
//! client for `ledgerlet ledger tail|export`, and the cursor followers share.
//!
//! Owns moving records out of a running agent. Must not slow the fold: every stream reads
//! the ledger through its own [`cursor::Cursor`], under brief locks, and waits on its own
//! client; nothing per follower is buffered beyond one batch and a small bounded channel.

pub mod client;
pub mod cursor;
pub mod server;

/// Generated from `proto/ledgerlet/v1/ledger.proto` (package `ledgerlet.v1`).
#[allow(clippy::all, missing_docs, rustdoc::all)]
pub mod pb {
    tonic::include_proto!("ledgerlet.v1");
}

use crate::core::record::Record;
use crate::ledger::shared::Payload;

/// The socket file under `--root-dir`.
pub const SOCKET_NAME: &str = "ledger.sock";

/// A record in its wire form (the payload as canonical JSON).
pub fn to_proto(r: &Record) -> pb::Record {
    pb::Record {
        seq: r.seq,
        at: r.at.to_rfc3339_nanos(),
        cause: r.cause,
        trace: r.trace.map(|t| t.to_string()),
        kind: r.event.kind().to_string(),
        event_json: serde_json::to_string(&Payload(&r.event))
            .unwrap_or_else(|e| panic!("record {} does not serialise: {e}", r.seq)),
    }
}

/// The NDJSON line of a wire record, byte for byte what the agent's ledger writes (no
/// trailing newline).
pub fn line_of(r: &pb::Record) -> String {
    let or_null = |v: Option<String>| v.unwrap_or_else(|| "null".into());
    format!(
        "{{\"seq\":{},\"at\":{},\"cause\":{},\"trace\":{},\"kind\":{},\"event\":{}}}",
        r.seq,
        json_str(&r.at),
        or_null(r.cause.map(|c| c.to_string())),
        or_null(r.trace.as_deref().map(json_str)),
        json_str(&r.kind),
        r.event_json
    )
}

/// The NDJSON line of a wire snapshot (no trailing newline).
pub fn snapshot_line_of(s: &pb::Snapshot) -> String {
    format!(
        "{{\"seq\":{},\"at\":{},\"cause\":null,\"trace\":null,\"kind\":\"{}\",\"event\":{}}}",
        s.seq,
        json_str(&s.at),
        crate::ledger::codec::SNAPSHOT_KIND,
        s.state_json
    )
}

fn json_str(s: &str) -> String {
    serde_json::to_string(s).expect("a string serialises")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::record::event::{PlegEvent, PlegEventKind};
    use crate::core::record::{Event, Time};
    use crate::ledger::codec::{encode_record, write_snapshot, Snapshot};

    #[test]
    fn a_wire_record_rebuilds_the_exact_ndjson_line() {
        let sampled = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        for (cause, trace) in [(None, None), (Some(7), Some(sampled))] {
            let r = Record {
                seq: 42,
                at: Time::from_unix_nanos(1_700_000_000_123_456_789),
                cause,
                trace: trace.map(|t| t.parse().expect("a traceparent")),
                event: Event::PlegEvent(PlegEvent {
                    uid: "u-1".into(),
                    kind: PlegEventKind::ContainerDied,
                    container_id: Some("c\u{e9}\n".into()),
                }),
            };
            assert_eq!(line_of(&to_proto(&r)), encode_record(&r));
        }
    }

    #[test]
    fn a_wire_snapshot_rebuilds_the_exact_snapshot_line() {
        let snap = Snapshot {
            seq: 9,
            at: Time::from_unix_secs(5),
            state: serde_json::json!({"a": [1, 2]}),
        };
        let mut want = Vec::new();
        write_snapshot(&mut want, &snap).unwrap();
        let wire = pb::Snapshot {
            seq: 9,
            at: snap.at.to_rfc3339_nanos(),
            state_json: serde_json::to_string(&snap.state).unwrap(),
        };
        assert_eq!(
            format!("{}\n", snapshot_line_of(&wire)),
            String::from_utf8(want).unwrap()
        );
    }
}
