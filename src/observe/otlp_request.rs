//! OTLP trace export requests: `ExportTraceServiceRequest` (opentelemetry-proto v1) encoded
//! from ledgerlet's spans, fold spans straight from their fixed fields and spans made
//! through the SDK from their `SpanData`.
//!
//! Owns the OTLP field numbers and how each span field maps to them, the same mapping as
//! the OpenTelemetry SDK's OTLP exporter (`opentelemetry-proto`'s `transform`): span flags
//! carry the trace flags and "has is-remote", an unset parent is empty bytes, every span
//! carries a status, spans are grouped by instrumentation scope under one resource. Must
//! not do I/O; sending a request is `observe::otlp_grpc`'s.
//!
//! A fold span is written without building any intermediate value: its name, kind and
//! `ledgerlet.record.kind` attribute were encoded once per record kind, the rest are ids,
//! times and the seq. So the export thread spends no allocation on a fold span.

use opentelemetry::trace::{SpanKind, Status};
use opentelemetry::{Array, InstrumentationScope, Value};
use opentelemetry_sdk::trace::SpanData;
use opentelemetry_sdk::Resource;

use super::export::{FoldSpan, PodRoot, Transition};
use super::protobuf::{Open, Writer};

/// The gRPC method a request is sent to.
pub const EXPORT_PATH: &str = "/opentelemetry.proto.collector.trace.v1.TraceService/Export";

/// Field numbers of the messages written here (opentelemetry-proto v1).
mod field {
    // ExportTraceServiceRequest
    pub const RESOURCE_SPANS: u32 = 1;
    // ResourceSpans
    pub const RESOURCE: u32 = 1;
    pub const SCOPE_SPANS: u32 = 2;
    pub const RESOURCE_SCHEMA_URL: u32 = 3;
    // Resource
    pub const RESOURCE_ATTRIBUTES: u32 = 1;
    // ScopeSpans
    pub const SCOPE: u32 = 1;
    pub const SPANS: u32 = 2;
    pub const SCOPE_SCHEMA_URL: u32 = 3;
    // InstrumentationScope
    pub const SCOPE_NAME: u32 = 1;
    pub const SCOPE_VERSION: u32 = 2;
    pub const SCOPE_ATTRIBUTES: u32 = 3;
    // Span
    pub const TRACE_ID: u32 = 1;
    pub const SPAN_ID: u32 = 2;
    pub const TRACE_STATE: u32 = 3;
    pub const PARENT_SPAN_ID: u32 = 4;
    pub const NAME: u32 = 5;
    pub const KIND: u32 = 6;
    pub const START_TIME: u32 = 7;
    pub const END_TIME: u32 = 8;
    pub const ATTRIBUTES: u32 = 9;
    pub const DROPPED_ATTRIBUTES: u32 = 10;
    pub const EVENTS: u32 = 11;
    pub const DROPPED_EVENTS: u32 = 12;
    pub const LINKS: u32 = 13;
    pub const DROPPED_LINKS: u32 = 14;
    pub const STATUS: u32 = 15;
    pub const FLAGS: u32 = 16;
    // Span.Event
    pub const EVENT_TIME: u32 = 1;
    pub const EVENT_NAME: u32 = 2;
    pub const EVENT_ATTRIBUTES: u32 = 3;
    pub const EVENT_DROPPED_ATTRIBUTES: u32 = 4;
    // Span.Link
    pub const LINK_TRACE_ID: u32 = 1;
    pub const LINK_SPAN_ID: u32 = 2;
    pub const LINK_TRACE_STATE: u32 = 3;
    pub const LINK_ATTRIBUTES: u32 = 4;
    pub const LINK_DROPPED_ATTRIBUTES: u32 = 5;
    pub const LINK_FLAGS: u32 = 6;
    // Status
    pub const STATUS_MESSAGE: u32 = 2;
    pub const STATUS_CODE: u32 = 3;
    // KeyValue
    pub const KEY: u32 = 1;
    pub const VALUE: u32 = 2;
    // AnyValue
    pub const STRING_VALUE: u32 = 1;
    pub const BOOL_VALUE: u32 = 2;
    pub const INT_VALUE: u32 = 3;
    pub const DOUBLE_VALUE: u32 = 4;
    pub const ARRAY_VALUE: u32 = 5;
    // ArrayValue
    pub const ARRAY_VALUES: u32 = 1;
}

/// `SpanFlags.SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK`: the span says whether its parent is
/// remote (as the SDK's exporter always does).
const HAS_IS_REMOTE: u32 = 0x100;
/// `SpanFlags.SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK`.
const IS_REMOTE: u32 = 0x200;

/// `Span.SpanKind`.
fn span_kind(kind: &SpanKind) -> u64 {
    match kind {
        SpanKind::Internal => 1,
        SpanKind::Server => 2,
        SpanKind::Client => 3,
        SpanKind::Producer => 4,
        SpanKind::Consumer => 5,
    }
}

/// `SPAN_KIND_INTERNAL`, the kind of every fold span.
const INTERNAL: u64 = 1;

/// Nanoseconds since the Unix epoch (0 before it, as the SDK's exporter).
pub fn unix_nanos(t: std::time::SystemTime) -> u64 {
    t.duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// What a fold span is besides its fixed fields (read from its notes).
#[derive(Clone, Copy, Debug, Default)]
pub struct FoldExtras<'a> {
    /// The span is this pod's root span.
    pub root: Option<PodRoot<'a>>,
    /// Its fold made this pod worker transition.
    pub transition: Option<Transition<'a>>,
}

/// The fields of a fold span that depend only on its record kind, encoded once.
#[derive(Debug)]
struct KindFields {
    /// `name` (`fold <kind>`) and `kind` (internal).
    head: Vec<u8>,
    /// The `ledgerlet.record.kind` attribute.
    kind_attribute: Vec<u8>,
    /// All a plain fold span's fields that do not change from span to span of this kind:
    /// `head`, `kind_attribute` and an unset status.
    tail: Vec<u8>,
}

/// Encodes export requests, one after the other, into one reused buffer.
#[derive(Debug)]
pub struct RequestEncoder {
    w: Writer,
    /// The `resource` field of `ResourceSpans` (and its schema URL), the same in every
    /// request.
    resource: Vec<u8>,
    /// Per record kind (`Event::KINDS`).
    kinds: Vec<KindFields>,
    /// The name and kind fields of a pod's root span.
    root_head: Vec<u8>,
    /// The open `ResourceSpans`, and the open `ScopeSpans` with its scope.
    open: Option<(Open, Option<(Open, InstrumentationScope)>)>,
}

impl RequestEncoder {
    /// An encoder of requests whose spans carry `resource`.
    pub fn new(resource: &Resource) -> RequestEncoder {
        let mut w = Writer::default();
        let r = w.open(field::RESOURCE);
        for (k, v) in resource.iter() {
            key_value(&mut w, field::RESOURCE_ATTRIBUTES, k.as_str(), v);
        }
        w.close(r);
        w.string_unless_empty(
            field::RESOURCE_SCHEMA_URL,
            resource.schema_url().unwrap_or(""),
        );
        let resource = w.bytes().to_vec();
        let kinds = crate::ledger::Event::KINDS
            .iter()
            .map(|k| {
                let mut w = Writer::default();
                w.string(field::NAME, &format!("fold {k}"));
                w.uint(field::KIND, INTERNAL);
                let head = w.bytes().to_vec();
                w.clear();
                string_attribute(&mut w, "ledgerlet.record.kind", k);
                let kind_attribute = w.bytes().to_vec();
                let st = w.open(field::STATUS);
                w.close(st);
                let status = &w.bytes()[kind_attribute.len()..];
                let tail = [head.as_slice(), &kind_attribute, status].concat();
                KindFields {
                    head,
                    kind_attribute,
                    tail,
                }
            })
            .collect();
        let mut w = Writer::default();
        w.string(field::NAME, "pod");
        w.uint(field::KIND, INTERNAL);
        let root_head = w.bytes().to_vec();
        RequestEncoder {
            w: Writer::with_capacity(64 * 1024),
            resource,
            kinds,
            root_head,
            open: None,
        }
    }

    /// Starts a new request (forgetting the previous one).
    pub fn begin(&mut self) {
        self.w.clear();
        let rs = self.w.open_reserving(field::RESOURCE_SPANS, 3);
        self.w.raw(&self.resource);
        self.open = Some((rs, None));
    }

    /// Makes `scope` the scope of the spans written next (a new `ScopeSpans` if it differs
    /// from the current one).
    pub fn scope(&mut self, scope: &InstrumentationScope) {
        let Some((_, current)) = &mut self.open else {
            panic!("RequestEncoder::scope before begin");
        };
        if current.as_ref().is_some_and(|(_, s)| s == scope) {
            return;
        }
        if let Some((ss, _)) = current.take() {
            self.w.close(ss);
        }
        let ss = self.w.open_reserving(field::SCOPE_SPANS, 3);
        let s = self.w.open(field::SCOPE);
        self.w.string(field::SCOPE_NAME, scope.name());
        self.w
            .string_unless_empty(field::SCOPE_VERSION, scope.version().unwrap_or(""));
        for kv in scope.attributes() {
            key_value(
                &mut self.w,
                field::SCOPE_ATTRIBUTES,
                kv.key.as_str(),
                &kv.value,
            );
        }
        self.w.close(s);
        self.w
            .string_unless_empty(field::SCOPE_SCHEMA_URL, scope.schema_url().unwrap_or(""));
        if let Some((_, current)) = &mut self.open {
            *current = Some((ss, scope.clone()));
        }
    }

    /// The request, complete: closes what is open. The bytes stay valid until the next
    /// [`RequestEncoder::begin`].
    pub fn finish(&mut self) -> &[u8] {
        if let Some((rs, scope)) = self.open.take() {
            if let Some((ss, _)) = scope {
                self.w.close(ss);
            }
            self.w.close(rs);
        }
        self.w.bytes()
    }

    /// Writes a fold span in the current scope. `span_id` is its own id (derived from its
    /// seq, or its pod's root id); times are nanoseconds since the Unix epoch.
    pub fn fold_span(
        &mut self,
        span: &FoldSpan,
        span_id: u64,
        (start_nanos, end_nanos): (u64, u64),
        extras: FoldExtras<'_>,
    ) {
        if extras.root.is_none() && extras.transition.is_none() {
            if let Some(k) = self.kinds.get(usize::from(span.kind)) {
                return plain_fold_span(&mut self.w, span, span_id, (start_nanos, end_nanos), k);
            }
        }
        let w = &mut self.w;
        // a fold span is 150 to 200 bytes: a two-byte length
        let s = w.open_reserving(field::SPANS, 2);
        fold_span_ids_and_times(w, span, span_id, (start_nanos, end_nanos));
        let kind = self.kinds.get(usize::from(span.kind));
        match extras.root {
            Some(pod) => {
                w.raw(&self.root_head);
                string_attribute(w, "k8s.pod.uid", pod.uid);
                let a = w.open(field::ATTRIBUTES);
                w.string(field::KEY, "k8s.pod");
                let v = w.open(field::VALUE);
                let len = pod.namespace.len() + 1 + pod.name.len();
                let sv =
                    w.open_reserving(field::STRING_VALUE, super::protobuf::varint_len(len as u64));
                w.raw(pod.namespace.as_bytes());
                w.raw(b"/");
                w.raw(pod.name.as_bytes());
                w.close(sv);
                w.close(v);
                w.close(a);
                string_attribute(w, "k8s.namespace.name", pod.namespace);
                string_attribute(w, "k8s.pod.name", pod.name);
                int_attribute(w, SEQ_KEY, span.seq as i64);
            }
            None => {
                match kind {
                    Some(k) => w.raw(&k.head),
                    None => {
                        w.string(field::NAME, "fold");
                        w.uint(field::KIND, INTERNAL);
                    }
                }
                int_attribute(w, SEQ_KEY, span.seq as i64);
                match kind {
                    Some(k) => w.raw(&k.kind_attribute),
                    None => string_attribute(w, "ledgerlet.record.kind", "unknown"),
                }
                if let Some(t) = extras.transition {
                    let e = w.open(field::EVENTS);
                    w.fixed64(field::EVENT_TIME, end_nanos);
                    w.string(field::EVENT_NAME, "pod worker transition");
                    for (k, v) in [("from", t.from), ("to", t.to), ("k8s.pod.uid", t.uid)] {
                        string_key_value(w, field::EVENT_ATTRIBUTES, k, v);
                    }
                    w.close(e);
                }
            }
        }
        // status unset, present as the SDK's exporter always writes it
        let st = w.open(field::STATUS);
        w.close(st);
        w.close(s);
    }

    /// Writes a span made through the SDK, in its own scope.
    pub fn sdk_span(&mut self, span: &SpanData) {
        self.scope(&span.instrumentation_scope);
        let w = &mut self.w;
        let s = w.open_reserving(field::SPANS, 2);
        let cx = &span.span_context;
        w.bytes_field(field::TRACE_ID, &cx.trace_id().to_bytes());
        w.bytes_field(field::SPAN_ID, &cx.span_id().to_bytes());
        w.string_unless_empty(field::TRACE_STATE, &cx.trace_state().header());
        if span.parent_span_id != opentelemetry::trace::SpanId::INVALID {
            w.bytes_field(field::PARENT_SPAN_ID, &span.parent_span_id.to_bytes());
        }
        w.fixed32(
            field::FLAGS,
            span_flags(cx.trace_flags().to_u8(), span.parent_span_is_remote),
        );
        w.string(field::NAME, &span.name);
        w.uint(field::KIND, span_kind(&span.span_kind));
        w.fixed64(field::START_TIME, unix_nanos(span.start_time));
        w.fixed64(field::END_TIME, unix_nanos(span.end_time));
        attributes(
            w,
            (field::ATTRIBUTES, &span.attributes),
            (field::DROPPED_ATTRIBUTES, span.dropped_attributes_count),
        );
        for event in span.events.iter() {
            let e = w.open(field::EVENTS);
            w.fixed64(field::EVENT_TIME, unix_nanos(event.timestamp));
            w.string(field::EVENT_NAME, &event.name);
            attributes(
                w,
                (field::EVENT_ATTRIBUTES, &event.attributes),
                (
                    field::EVENT_DROPPED_ATTRIBUTES,
                    event.dropped_attributes_count,
                ),
            );
            w.close(e);
        }
        w.uint_unless_zero(field::DROPPED_EVENTS, u64::from(span.events.dropped_count));
        for link in span.links.iter() {
            let l = w.open(field::LINKS);
            let lc = &link.span_context;
            w.bytes_field(field::LINK_TRACE_ID, &lc.trace_id().to_bytes());
            w.bytes_field(field::LINK_SPAN_ID, &lc.span_id().to_bytes());
            w.string_unless_empty(field::LINK_TRACE_STATE, &lc.trace_state().header());
            attributes(
                w,
                (field::LINK_ATTRIBUTES, &link.attributes),
                (
                    field::LINK_DROPPED_ATTRIBUTES,
                    link.dropped_attributes_count,
                ),
            );
            w.fixed32(
                field::LINK_FLAGS,
                span_flags(lc.trace_flags().to_u8(), lc.is_remote()),
            );
            w.close(l);
        }
        w.uint_unless_zero(field::DROPPED_LINKS, u64::from(span.links.dropped_count));
        let st = w.open(field::STATUS);
        match &span.status {
            Status::Unset => {}
            Status::Ok => w.uint(field::STATUS_CODE, 1),
            Status::Error { description } => {
                w.string_unless_empty(field::STATUS_MESSAGE, description);
                w.uint(field::STATUS_CODE, 2);
            }
        }
        w.close(st);
        w.close(s);
    }
}

/// A fold span's ids, flags and times: 18 + 10 (+ 10 with a parent) + 6 + 18 bytes.
#[inline]
fn fold_span_ids_and_times(
    w: &mut Writer,
    span: &FoldSpan,
    span_id: u64,
    (start_nanos, end_nanos): (u64, u64),
) {
    w.bytes_field(field::TRACE_ID, &span.trace_id);
    w.bytes_field(field::SPAN_ID, &span_id.to_be_bytes());
    if span.parent_span_id != 0 {
        w.bytes_field(field::PARENT_SPAN_ID, &span.parent_span_id.to_be_bytes());
    }
    w.fixed32(field::FLAGS, u32::from(span.flags) | HAS_IS_REMOTE);
    w.fixed64(field::START_TIME, start_nanos);
    w.fixed64(field::END_TIME, end_nanos);
}

/// The key of a fold span's seq attribute.
const SEQ_KEY: &str = "ledgerlet.record.seq";

/// Writes a fold span with no notes (nearly all of them): the ids, flags and times, the seq
/// attribute, then the fields its kind always has. Its length is worked out before it is
/// written, so nothing is moved or patched.
#[inline]
fn plain_fold_span(
    w: &mut Writer,
    span: &FoldSpan,
    span_id: u64,
    (start_nanos, end_nanos): (u64, u64),
    kind: &KindFields,
) {
    use super::protobuf::varint_len;
    // AnyValue { int_value }: key byte and the varint
    let value_len = 1 + varint_len(span.seq);
    // KeyValue { key, value }: two keys, two one-byte lengths
    let kv_len = 2 + SEQ_KEY.len() + 2 + value_len;
    let parent_len = if span.parent_span_id != 0 { 10 } else { 0 };
    // trace id 18, span id 10, flags 6 (two-byte key), times 9 + 9, seq attribute
    let len = 18 + 10 + parent_len + 6 + 18 + 2 + kv_len + kind.tail.len();
    w.reserve(3 + len);
    let start = w.len();
    w.len_prefix(field::SPANS, len);
    fold_span_ids_and_times(w, span, span_id, (start_nanos, end_nanos));
    w.len_prefix(field::ATTRIBUTES, kv_len);
    w.string(field::KEY, SEQ_KEY);
    w.len_prefix(field::VALUE, value_len);
    w.uint(field::INT_VALUE, span.seq);
    w.raw(&kind.tail);
    debug_assert_eq!(
        w.len() - start,
        1 + super::protobuf::varint_len(len as u64) + len,
        "a plain fold span's length is what was written"
    );
}

/// A span's `flags`: its trace flags, and whether its parent is remote.
fn span_flags(trace_flags: u8, parent_is_remote: bool) -> u32 {
    let mut flags = u32::from(trace_flags) | HAS_IS_REMOTE;
    if parent_is_remote {
        flags |= IS_REMOTE;
    }
    flags
}

/// A span attribute with a string value.
fn string_attribute(w: &mut Writer, key: &str, value: &str) {
    string_key_value(w, field::ATTRIBUTES, key, value);
}

/// A `KeyValue` in `field` with a string value.
fn string_key_value(w: &mut Writer, field_number: u32, key: &str, value: &str) {
    let a = w.open(field_number);
    w.string(field::KEY, key);
    let v = w.open(field::VALUE);
    w.string(field::STRING_VALUE, value);
    w.close(v);
    w.close(a);
}

/// A span attribute with an integer value.
fn int_attribute(w: &mut Writer, key: &str, value: i64) {
    let a = w.open(field::ATTRIBUTES);
    w.string(field::KEY, key);
    let v = w.open(field::VALUE);
    w.int64(field::INT_VALUE, value);
    w.close(v);
    w.close(a);
}

/// Attributes, each a `KeyValue` in `field`, and how many were dropped (left out when 0).
fn attributes(
    w: &mut Writer,
    (field_number, kvs): (u32, &[opentelemetry::KeyValue]),
    (dropped_field, dropped): (u32, u32),
) {
    for kv in kvs {
        key_value(w, field_number, kv.key.as_str(), &kv.value);
    }
    w.uint_unless_zero(dropped_field, u64::from(dropped));
}

/// A `KeyValue` in `field`.
fn key_value(w: &mut Writer, field_number: u32, key: &str, value: &Value) {
    let a = w.open(field_number);
    w.string(field::KEY, key);
    any_value(w, field::VALUE, value);
    w.close(a);
}

/// An `AnyValue` in `field`. A kind of value this encoder does not know (the SDK's enum is
/// open) is sent as its text.
fn any_value(w: &mut Writer, field_number: u32, value: &Value) {
    let v = w.open(field_number);
    match value {
        Value::Bool(b) => w.bool(field::BOOL_VALUE, *b),
        Value::I64(i) => w.int64(field::INT_VALUE, *i),
        Value::F64(f) => w.double(field::DOUBLE_VALUE, *f),
        Value::String(s) => w.string(field::STRING_VALUE, s.as_str()),
        Value::Array(array) => {
            let arr = w.open_reserving(field::ARRAY_VALUE, 2);
            match array {
                Array::Bool(vs) => {
                    for b in vs {
                        any_value(w, field::ARRAY_VALUES, &Value::Bool(*b));
                    }
                }
                Array::I64(vs) => {
                    for i in vs {
                        any_value(w, field::ARRAY_VALUES, &Value::I64(*i));
                    }
                }
                Array::F64(vs) => {
                    for f in vs {
                        any_value(w, field::ARRAY_VALUES, &Value::F64(*f));
                    }
                }
                Array::String(vs) => {
                    for s in vs {
                        let e = w.open(field::ARRAY_VALUES);
                        w.string(field::STRING_VALUE, s.as_str());
                        w.close(e);
                    }
                }
                other => {
                    let e = w.open(field::ARRAY_VALUES);
                    w.string(field::STRING_VALUE, &other.to_string());
                    w.close(e);
                }
            }
            w.close(arr);
        }
        other => w.string(field::STRING_VALUE, &other.to_string()),
    }
    w.close(v);
}

/// Reading requests back in tests, with `opentelemetry-proto`'s generated types (the SDK
/// exporter's own decoder, independent of this module's encoder).
#[cfg(test)]
pub(crate) mod testing {
    use std::borrow::Cow;
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, SystemTime, UNIX_EPOCH};

    use opentelemetry::trace::{
        Event, Link, SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState,
    };
    use opentelemetry::{InstrumentationScope, KeyValue, StringValue, Value};
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue};
    use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanLinks};
    use prost::Message;

    use crate::observe::export::{PartialSuccess, Transport};

    /// A request holding one fold span, as the transports' tests send it.
    pub fn one_fold_span_request() -> Vec<u8> {
        let resource = opentelemetry_sdk::Resource::builder_empty().build();
        let mut request = super::RequestEncoder::new(&resource);
        request.begin();
        request.scope(&crate::observe::export::scope());
        request.fold_span(
            &crate::observe::export::FoldSpan {
                trace_id: 5u128.to_be_bytes(),
                parent_span_id: 0,
                seq: 1,
                start_ticks: 0,
                duration_ticks: 0,
                kind: 0,
                flags: 1,
            },
            9,
            (1, 2),
            Default::default(),
        );
        request.finish().to_vec()
    }

    /// A loopback port nothing listens on (bound, then closed): an unreachable collector.
    pub fn closed_loopback_port() -> u16 {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("a loopback port");
        l.local_addr().expect("its address").port()
    }

    /// The request, decoded.
    pub fn decode(request: &[u8]) -> ExportTraceServiceRequest {
        ExportTraceServiceRequest::decode(request).expect("a valid ExportTraceServiceRequest")
    }

    fn value(v: Option<AnyValue>) -> Value {
        match v.and_then(|v| v.value) {
            Some(any_value::Value::StringValue(s)) => Value::String(StringValue::from(s)),
            Some(any_value::Value::BoolValue(b)) => Value::Bool(b),
            Some(any_value::Value::IntValue(i)) => Value::I64(i),
            Some(any_value::Value::DoubleValue(f)) => Value::F64(f),
            other => panic!("a value this test decoder does not map back: {other:?}"),
        }
    }

    fn attributes(kvs: Vec<opentelemetry_proto::tonic::common::v1::KeyValue>) -> Vec<KeyValue> {
        kvs.into_iter()
            .map(|kv| KeyValue::new(kv.key, value(kv.value)))
            .collect()
    }

    fn time(nanos: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_nanos(nanos)
    }

    fn span_id(b: &[u8]) -> SpanId {
        if b.is_empty() {
            SpanId::INVALID
        } else {
            SpanId::from_bytes(b.try_into().expect("an 8-byte span id"))
        }
    }

    /// Every span of the request, as `SpanData` again (scalar attribute values only).
    pub fn spans(request: &[u8]) -> Vec<SpanData> {
        let mut out = Vec::new();
        for rs in decode(request).resource_spans {
            for ss in rs.scope_spans {
                let scope = ss.scope.unwrap_or_default();
                let mut sb = InstrumentationScope::builder(scope.name);
                if !scope.version.is_empty() {
                    sb = sb.with_version(scope.version);
                }
                let scope = sb.build();
                for s in ss.spans {
                    let flags = TraceFlags::new((s.flags & 0xff) as u8);
                    out.push(SpanData {
                        span_context: SpanContext::new(
                            TraceId::from_bytes(s.trace_id.try_into().expect("16-byte trace id")),
                            span_id(&s.span_id),
                            flags,
                            false,
                            TraceState::from_key_value(
                                s.trace_state.split(',').filter_map(|kv| kv.split_once('=')),
                            )
                            .unwrap_or_default(),
                        ),
                        parent_span_id: span_id(&s.parent_span_id),
                        parent_span_is_remote: s.flags & super::IS_REMOTE != 0,
                        span_kind: match s.kind {
                            2 => SpanKind::Server,
                            3 => SpanKind::Client,
                            4 => SpanKind::Producer,
                            5 => SpanKind::Consumer,
                            _ => SpanKind::Internal,
                        },
                        name: Cow::Owned(s.name),
                        start_time: time(s.start_time_unix_nano),
                        end_time: time(s.end_time_unix_nano),
                        attributes: attributes(s.attributes),
                        dropped_attributes_count: s.dropped_attributes_count,
                        events: {
                            let mut e = SpanEvents::default();
                            e.events = s
                                .events
                                .into_iter()
                                .map(|e| {
                                    Event::new(
                                        e.name,
                                        time(e.time_unix_nano),
                                        attributes(e.attributes),
                                        e.dropped_attributes_count,
                                    )
                                })
                                .collect();
                            e
                        },
                        links: {
                            let mut l = SpanLinks::default();
                            l.links = s
                                .links
                                .into_iter()
                                .map(|l| {
                                    Link::new(
                                        SpanContext::new(
                                            TraceId::from_bytes(
                                                l.trace_id.try_into().expect("trace id"),
                                            ),
                                            span_id(&l.span_id),
                                            TraceFlags::new((l.flags & 0xff) as u8),
                                            l.flags & super::IS_REMOTE != 0,
                                            TraceState::default(),
                                        ),
                                        attributes(l.attributes),
                                        l.dropped_attributes_count,
                                    )
                                })
                                .collect();
                            l
                        },
                        status: match s.status {
                            Some(st) if st.code == 1 => Status::Ok,
                            Some(st) if st.code == 2 => Status::error(st.message),
                            _ => Status::Unset,
                        },
                        instrumentation_scope: scope.clone(),
                    });
                }
            }
        }
        out
    }

    /// Collects the spans of every request it is sent (a unit-test stand-in for a
    /// collector).
    #[derive(Debug, Clone, Default)]
    pub struct SpanSink(pub Arc<Mutex<Vec<SpanData>>>);

    impl SpanSink {
        /// The spans received so far.
        pub fn received(&self) -> Vec<SpanData> {
            self.0.lock().unwrap().clone()
        }

        /// How many spans were received so far.
        pub fn count(&self) -> usize {
            self.0.lock().unwrap().len()
        }
    }

    impl Transport for SpanSink {
        async fn send(
            &self,
            request: &[u8],
        ) -> Result<PartialSuccess, crate::observe::export::SendError> {
            self.0.lock().unwrap().extend(spans(request));
            Ok(PartialSuccess::default())
        }
    }
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;
    use std::time::{Duration, SystemTime};

    use opentelemetry::trace::{
        Event, Link, SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState,
    };
    use opentelemetry::{Array, InstrumentationScope, KeyValue, StringValue, Value};
    use opentelemetry_proto::transform::common::tonic::ResourceAttributesWithSchema;
    use opentelemetry_proto::transform::trace::tonic::group_spans_by_resource_and_scope;
    use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanLinks};
    use opentelemetry_sdk::Resource;

    use super::testing::decode;
    use super::*;

    fn scope() -> InstrumentationScope {
        InstrumentationScope::builder("ledgerlet")
            .with_version("1.2.3")
            .build()
    }

    fn resource() -> Resource {
        Resource::builder_empty()
            .with_attributes([
                KeyValue::new("service.name", "ledgerlet"),
                KeyValue::new("k8s.node.name", "node-1"),
            ])
            .build()
    }

    /// A span using every field the SDK can fill.
    fn full_span(parent: u64, remote_parent: bool, status: Status) -> SpanData {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_nanos(1_700_000_000_123_456_789);
        let mut events = SpanEvents::default();
        events.events.push(Event::new(
            "an event",
            t0 + Duration::from_micros(5),
            vec![KeyValue::new("n", 3i64), KeyValue::new("ok", true)],
            2,
        ));
        events.dropped_count = 1;
        let mut links = SpanLinks::default();
        links.links.push(Link::new(
            SpanContext::new(
                TraceId::from(7u128),
                SpanId::from(8u64),
                TraceFlags::SAMPLED,
                true,
                TraceState::default(),
            ),
            vec![KeyValue::new("link", "yes")],
            0,
        ));
        SpanData {
            span_context: SpanContext::new(
                TraceId::from(0x0102_0304_0506_0708_090a_0b0c_0d0e_0f10u128),
                SpanId::from(0x1112_1314_1516_1718u64),
                TraceFlags::SAMPLED,
                false,
                TraceState::from_key_value([("vendor", "v1")]).unwrap(),
            ),
            parent_span_id: SpanId::from(parent),
            parent_span_is_remote: remote_parent,
            span_kind: SpanKind::Client,
            name: Cow::Borrowed("runtime.v1.RuntimeService/RunPodSandbox"),
            start_time: t0,
            end_time: t0 + Duration::from_millis(3),
            attributes: vec![
                KeyValue::new("s", "text"),
                KeyValue::new("i", -42i64),
                KeyValue::new("f", 1.5f64),
                KeyValue::new("b", false),
                KeyValue::new("long", "x".repeat(300)),
                KeyValue::new(
                    "strings",
                    Value::Array(Array::String(vec![
                        StringValue::from("a"),
                        StringValue::from("b"),
                    ])),
                ),
                KeyValue::new("ints", Value::Array(Array::I64(vec![1, -2, 3]))),
                KeyValue::new("floats", Value::Array(Array::F64(vec![0.5]))),
                KeyValue::new("bools", Value::Array(Array::Bool(vec![true, false]))),
            ],
            dropped_attributes_count: 4,
            events,
            links,
            status,
            instrumentation_scope: scope(),
        }
    }

    #[test]
    fn sdk_spans_are_encoded_as_the_sdk_otlp_exporter_encodes_them() {
        let spans = vec![
            full_span(0x2122_2324_2526_2728, false, Status::Unset),
            full_span(0, true, Status::error("it failed")),
            full_span(5, false, Status::Ok),
        ];
        let resource = resource();
        let mut enc = RequestEncoder::new(&resource);
        enc.begin();
        for s in &spans {
            enc.sdk_span(s);
        }
        let ours = decode(enc.finish());
        let reference = group_spans_by_resource_and_scope(
            spans,
            &ResourceAttributesWithSchema::from(&resource),
        );
        assert_eq!(ours.resource_spans, reference);
    }

    #[test]
    fn spans_are_grouped_by_scope_under_one_resource() {
        let other = InstrumentationScope::builder("other").build();
        let mut enc = RequestEncoder::new(&resource());
        enc.begin();
        let mut a = full_span(0, false, Status::Unset);
        enc.sdk_span(&a);
        enc.sdk_span(&a);
        a.instrumentation_scope = other.clone();
        enc.sdk_span(&a);
        let got = decode(enc.finish());
        assert_eq!(got.resource_spans.len(), 1);
        let scopes: Vec<(String, usize)> = got.resource_spans[0]
            .scope_spans
            .iter()
            .map(|ss| (ss.scope.clone().unwrap().name, ss.spans.len()))
            .collect();
        assert_eq!(
            scopes,
            [("ledgerlet".to_string(), 2), ("other".to_string(), 1)]
        );
        // the encoder is reused: a new request forgets the previous one
        enc.begin();
        let empty = decode(enc.finish());
        assert_eq!(empty.resource_spans.len(), 1);
        assert!(empty.resource_spans[0].scope_spans.is_empty());
    }

    /// A fold span, and the `SpanData` the SDK would hold for the same span.
    fn fold_and_sdk(
        kind: u8,
        parent: u64,
        extras: FoldExtras<'_>,
    ) -> (FoldSpan, u64, (u64, u64), SpanData) {
        let span = FoldSpan {
            trace_id: 0xabcdu128.to_be_bytes(),
            parent_span_id: parent,
            seq: 300,
            start_ticks: 0,
            duration_ticks: 0,
            kind,
            flags: 1,
        };
        let (start, end) = (1_700_000_000_000_000_000u64, 1_700_000_000_000_050_000u64);
        let span_id = 0x77u64;
        let kind_name = crate::ledger::Event::KINDS[usize::from(kind)];
        let (name, attributes) = match extras.root {
            Some(p) => (
                "pod".to_string(),
                vec![
                    KeyValue::new("k8s.pod.uid", p.uid.to_string()),
                    KeyValue::new("k8s.pod", format!("{}/{}", p.namespace, p.name)),
                    KeyValue::new("k8s.namespace.name", p.namespace.to_string()),
                    KeyValue::new("k8s.pod.name", p.name.to_string()),
                    KeyValue::new("ledgerlet.record.seq", 300i64),
                ],
            ),
            None => (
                format!("fold {kind_name}"),
                vec![
                    KeyValue::new("ledgerlet.record.seq", 300i64),
                    KeyValue::new("ledgerlet.record.kind", kind_name),
                ],
            ),
        };
        let at = |n: u64| SystemTime::UNIX_EPOCH + Duration::from_nanos(n);
        let mut events = SpanEvents::default();
        if let (Some(t), None) = (extras.transition, extras.root) {
            events.events.push(Event::new(
                "pod worker transition",
                at(end),
                vec![
                    KeyValue::new("from", t.from),
                    KeyValue::new("to", t.to),
                    KeyValue::new("k8s.pod.uid", t.uid.to_string()),
                ],
                0,
            ));
        }
        let data = SpanData {
            span_context: SpanContext::new(
                TraceId::from(0xabcdu128),
                SpanId::from(span_id),
                TraceFlags::SAMPLED,
                false,
                TraceState::default(),
            ),
            parent_span_id: if parent == 0 {
                SpanId::INVALID
            } else {
                SpanId::from(parent)
            },
            parent_span_is_remote: false,
            span_kind: SpanKind::Internal,
            name: Cow::Owned(name),
            start_time: at(start),
            end_time: at(end),
            attributes,
            dropped_attributes_count: 0,
            events,
            links: SpanLinks::default(),
            status: Status::Unset,
            instrumentation_scope: scope(),
        };
        (span, span_id, (start, end), data)
    }

    #[test]
    fn a_fold_span_is_encoded_as_the_sdk_span_with_the_same_fields() {
        let transition = Transition {
            from: "sync",
            to: "terminating",
            uid: "uid-1",
        };
        let root = PodRoot {
            span_id: 0x77,
            uid: "uid-2",
            namespace: "kube-system",
            name: "etcd-node-1",
        };
        let cases = [
            (2u8, 0u64, FoldExtras::default()),
            (0, 0x55, FoldExtras::default()),
            (
                3,
                0x55,
                FoldExtras {
                    root: None,
                    transition: Some(transition),
                },
            ),
            (
                1,
                0,
                FoldExtras {
                    root: Some(root),
                    transition: None,
                },
            ),
        ];
        // one resource for both (its attributes' order is its map's)
        let resource = resource();
        for (kind, parent, extras) in cases {
            let (span, id, times, data) = fold_and_sdk(kind, parent, extras);
            let mut folds = RequestEncoder::new(&resource);
            folds.begin();
            folds.scope(&scope());
            folds.fold_span(&span, id, times, extras);
            let mut sdk = RequestEncoder::new(&resource);
            sdk.begin();
            sdk.sdk_span(&data);
            assert_eq!(
                decode(folds.finish()),
                decode(sdk.finish()),
                "kind {kind}, parent {parent:x}, {extras:?}"
            );
        }
    }
}
