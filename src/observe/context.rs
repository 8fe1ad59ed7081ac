//! Trace contexts: ids, the root sampler, and moving a context between a ledger record, a
//! `tracing` span and gRPC metadata.
//!
//! Owns id generation for fold spans, the kubelet's `ParentBased(TraceIDRatioBased)`
//! decision for roots, and W3C `traceparent` injection/extraction. Must not export anything
//! (that is `observe::otel`) and must not be read by the core.

use std::sync::atomic::{AtomicBool, Ordering};

use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};
use tracing_opentelemetry::OpenTelemetrySpanExt;

use crate::core::record::TraceParent;

/// The gRPC metadata / HTTP header that carries the context (W3C Trace Context).
pub const TRACEPARENT_HEADER: &str = "traceparent";

static ENABLED: AtomicBool = AtomicBool::new(false);

/// True once a tracing pipeline is installed (spans are created and contexts propagated).
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

pub(crate) fn set_enabled(on: bool) {
    ENABLED.store(on, Ordering::Relaxed);
}

/// A fast, non-cryptographic id source (splitmix64), seeded from the OS. Ids only need to be
/// unique with high probability, as the OpenTelemetry SDK's own generator.
#[derive(Clone, Debug)]
pub struct IdGen(u64);

impl IdGen {
    /// A generator seeded from the standard library's random hasher keys.
    pub fn from_os() -> IdGen {
        use std::hash::{BuildHasher, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(std::process::id() as u64);
        IdGen(h.finish())
    }

    /// A generator with a fixed seed (tests).
    pub fn seeded(seed: u64) -> IdGen {
        IdGen(seed)
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A non-zero span id.
    pub fn span_id(&mut self) -> u64 {
        loop {
            let v = self.next();
            if v != 0 {
                return v;
            }
        }
    }

    /// A non-zero trace id.
    pub fn trace_id(&mut self) -> u128 {
        loop {
            let v = (u128::from(self.next()) << 64) | u128::from(self.next());
            if v != 0 {
                return v;
            }
        }
    }
}

/// Span ids derived from record seqs: a bijection of the seq and a seed drawn once per tracer
/// (`(seq ^ seed) × φ`, φ odd, so one multiplication per record), so every record folded
/// under one tracer has its own non-zero span id, derived from the seq when the span is
/// handed on instead of stored with each span. The ids need only be distinct
/// and non-zero (W3C Trace Context asks nothing more), not look random.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SeqSpanIds {
    seed: u64,
}

impl SeqSpanIds {
    /// Ids under `seed`.
    pub fn new(seed: u64) -> SeqSpanIds {
        SeqSpanIds { seed }
    }

    /// The seed.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The span id of the record with `seq`.
    #[inline]
    pub fn of(&self, seq: u64) -> u64 {
        let z = (self.seed ^ seq).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        // the one seq whose product is 0 (not a valid span id) gets a fixed other id
        if z == 0 {
            0x5eed_5eed_5eed_5eed
        } else {
            z
        }
    }
}

/// The sampling decision for a root span, with the kubelet's semantics
/// (`ParentBased(TraceIDRatioBased(rate / 1e6))`, `ParentBased(NeverSample)` for 0): children
/// always follow their parent; a root is sampled when its trace id falls under the ratio,
/// computed exactly as the OpenTelemetry SDK does so every span of a trace agrees.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RootSampler {
    rate_per_million: u32,
}

impl RootSampler {
    /// A sampler for `rate_per_million` roots in a million (clamped to 1,000,000).
    pub fn new(rate_per_million: u32) -> RootSampler {
        RootSampler {
            rate_per_million: rate_per_million.min(1_000_000),
        }
    }

    /// The rate as a probability.
    pub fn probability(&self) -> f64 {
        f64::from(self.rate_per_million) / 1_000_000.0
    }

    /// Whether a root span of `trace_id` is sampled.
    pub fn sample_root(&self, trace_id: u128) -> bool {
        match self.rate_per_million {
            0 => false,
            r if r >= 1_000_000 => true,
            _ => {
                let bound = (self.probability() * (1u64 << 63) as f64) as u64;
                ((trace_id as u64) >> 1) < bound
            }
        }
    }

    /// The SDK sampler with the same semantics (for spans made through `tracing`).
    pub fn sdk_sampler(&self) -> opentelemetry_sdk::trace::Sampler {
        use opentelemetry_sdk::trace::Sampler;
        let root = match self.rate_per_million {
            0 => Sampler::AlwaysOff,
            r if r >= 1_000_000 => Sampler::AlwaysOn,
            _ => Sampler::TraceIdRatioBased(self.probability()),
        };
        Sampler::ParentBased(Box::new(root))
    }
}

/// The OpenTelemetry span context of a ledger trace context (remote: it was recorded, not
/// created in this call stack).
pub fn span_context(t: &TraceParent) -> SpanContext {
    SpanContext::new(
        TraceId::from(t.trace_id()),
        SpanId::from(t.span_id()),
        TraceFlags::new(t.flags()),
        true,
        TraceState::default(),
    )
}

/// The ledger trace context of an OpenTelemetry span context, if valid.
pub fn trace_parent(sc: &SpanContext) -> Option<TraceParent> {
    if !sc.is_valid() {
        return None;
    }
    Some(TraceParent::new(
        u128::from_be_bytes(sc.trace_id().to_bytes()),
        u64::from_be_bytes(sc.span_id().to_bytes()),
        sc.is_sampled(),
    ))
}

/// Makes `parent` the parent of `span` (which must not have been entered yet). No-op when
/// tracing is off or there is no parent.
pub fn set_parent(span: &tracing::Span, parent: Option<&TraceParent>) {
    if !enabled() {
        return;
    }
    if let Some(p) = parent {
        let cx = opentelemetry::Context::new().with_remote_span_context(span_context(p));
        let _ = span.set_parent(cx);
    }
}

/// The trace context of `span`, when tracing is on and the span is known to OpenTelemetry.
pub fn of_span(span: &tracing::Span) -> Option<TraceParent> {
    if !enabled() || span.is_disabled() {
        return None;
    }
    let cx = span.context();
    trace_parent(cx.span().span_context())
}

/// The trace context of the current `tracing` span (what a report sent from inside a command
/// records as its parent).
pub fn current() -> Option<TraceParent> {
    if !enabled() {
        return None;
    }
    of_span(&tracing::Span::current())
}

/// Puts the current span's context into gRPC request metadata as `traceparent`.
pub fn inject<T>(span: &tracing::Span, req: &mut tonic::Request<T>) {
    if let Some(t) = of_span(span) {
        if let Ok(v) = t.to_string().parse() {
            req.metadata_mut().insert(TRACEPARENT_HEADER, v);
        }
    }
}

/// Reads `traceparent` from HTTP/2 headers (a gRPC request); `None` when absent or invalid.
pub fn extract(headers: &tonic::codegen::http::HeaderMap) -> Option<TraceParent> {
    headers
        .get(TRACEPARENT_HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(|s| TraceParent::parse(s).ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::trace::SpanKind::Internal;
    use opentelemetry_sdk::trace::{SamplingDecision, ShouldSample};

    #[test]
    fn span_ids_from_seqs_never_repeat_under_one_seed_and_differ_between_seeds() {
        let ids = SeqSpanIds::new(0x1234_5678);
        let mut seen = std::collections::BTreeSet::new();
        for seq in 0..200_000u64 {
            let id = ids.of(seq);
            assert_ne!(id, 0);
            assert!(seen.insert(id), "seq {seq} repeats a span id");
        }
        // the same seed derives the same id from the seq
        assert_eq!(SeqSpanIds::new(ids.seed()).of(77), ids.of(77));
        // the seq whose product would be 0 gets a valid id too
        assert_ne!(ids.of(ids.seed()), 0);
        let other = SeqSpanIds::new(0x1234_5679);
        assert!((0..1000).all(|seq| other.of(seq) != ids.of(seq)));
    }

    #[test]
    fn root_sampler_agrees_with_the_sdk_ratio_sampler() {
        let mut ids = IdGen::seeded(7);
        for rate in [
            0u32, 1, 100, 250_000, 500_000, 999_999, 1_000_000, 2_000_000,
        ] {
            let ours = RootSampler::new(rate);
            let sdk = ours.sdk_sampler();
            let mut sampled = 0;
            for _ in 0..2000 {
                let tid = ids.trace_id();
                let r = sdk.should_sample(None, TraceId::from(tid), "x", &Internal, &[], &[]);
                let sdk_yes = r.decision == SamplingDecision::RecordAndSample;
                assert_eq!(ours.sample_root(tid), sdk_yes, "rate {rate}");
                sampled += usize::from(sdk_yes);
            }
            match rate {
                0 => assert_eq!(sampled, 0),
                r if r >= 1_000_000 => assert_eq!(sampled, 2000),
                500_000 => assert!((800..1200).contains(&sampled), "{sampled}"),
                _ => {}
            }
        }
    }

    #[test]
    fn contexts_round_trip_between_ledger_and_opentelemetry() {
        let t = TraceParent::new(0xabc, 0xdef, true);
        let sc = span_context(&t);
        assert!(sc.is_valid() && sc.is_sampled() && sc.is_remote());
        assert_eq!(trace_parent(&sc), Some(t));
        let unsampled = TraceParent::new(0xabc, 0xdef, false);
        assert_eq!(trace_parent(&span_context(&unsampled)), Some(unsampled));
        assert_eq!(trace_parent(&SpanContext::NONE), None);
    }

    #[test]
    fn extract_reads_the_traceparent_header() {
        let mut h = tonic::codegen::http::HeaderMap::new();
        assert_eq!(extract(&h), None);
        let traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        h.insert(TRACEPARENT_HEADER, traceparent.parse().unwrap());
        assert_eq!(extract(&h).unwrap().span_id(), 0x00f067aa0ba902b7);
        h.insert(TRACEPARENT_HEADER, "garbage".parse().unwrap());
        assert_eq!(extract(&h), None);
    }
}
