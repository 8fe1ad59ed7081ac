//! Retrying an export the collector may take later, as the OpenTelemetry Go exporters the
//! kubelet uses do: exponential back-off (×1.5 from an initial wait, capped, each wait
//! randomized by ±50 %), a wait the collector asks for (HTTP `Retry-After`) taken when it is
//! longer, and every attempt and wait within the one export call's timeout, so a batch never
//! holds the export thread longer than an export without retries could.
//!
//! Owns the failure type transports return ([`SendError`]: retryable or not) and the retry
//! loop around one request. Must not decide what is retryable (each transport knows its
//! protocol's codes) or count anything but its own attempts (`observe::export` counts the
//! outcome).

use std::time::Duration;

use tokio::time::Instant;

use super::context::IdGen;
use super::export::{PartialSuccess, Transport};

/// Back-off growth per retry (the Go exporters' `backoff` default).
pub const MULTIPLIER: f64 = 1.5;
/// Each wait is randomized within ± this fraction (the Go exporters' default), so nodes
/// that lost the same collector do not come back to it in step.
pub const RANDOMIZATION: f64 = 0.5;

/// Why a request failed, and whether the same request may succeed later.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SendError {
    /// What happened, naming the collector.
    pub message: String,
    /// The collector may take the same request later (OTLP's retryable failures: gRPC
    /// `Unavailable`, HTTP 429/502/503/504, …).
    pub retryable: bool,
    /// How long the collector asked to wait first (HTTP `Retry-After`).
    pub retry_after: Option<Duration>,
}

impl SendError {
    /// A failure that sending the same request again would not mend.
    pub fn fatal(message: impl Into<String>) -> SendError {
        SendError {
            message: message.into(),
            retryable: false,
            retry_after: None,
        }
    }

    /// A failure the collector may get over; `retry_after` is its own hint, if any.
    pub fn retryable(message: impl Into<String>, retry_after: Option<Duration>) -> SendError {
        SendError {
            message: message.into(),
            retryable: true,
            retry_after,
        }
    }
}

impl From<String> for SendError {
    fn from(message: String) -> SendError {
        SendError::fatal(message)
    }
}

/// The back-off between attempts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// The first wait, before randomization; 0 turns retries off.
    pub initial_backoff_ms: u64,
    /// The longest wait, before randomization.
    pub max_backoff_ms: u64,
}

impl RetryPolicy {
    /// The wait before retry `n` (0 for the first), before randomization.
    pub fn backoff(&self, n: u32) -> Duration {
        let grown = self.initial_backoff_ms as f64 * MULTIPLIER.powi(n.min(64) as i32);
        Duration::from_millis(grown.min(self.max_backoff_ms as f64) as u64)
    }
}

/// `wait` randomized within ±[`RANDOMIZATION`] by `random` (uniform over `u64`).
pub fn randomized(wait: Duration, random: u64) -> Duration {
    let unit = random as f64 / u64::MAX as f64; // 0 ..= 1
    wait.mul_f64(1.0 - RANDOMIZATION + 2.0 * RANDOMIZATION * unit)
}

/// What one export came to.
#[derive(Debug)]
pub struct Outcome {
    /// The collector's answer, or why there is none.
    pub result: Result<PartialSuccess, String>,
    /// Attempts after the first.
    pub retries: u64,
}

/// Sends `request` until it is answered, fails for good, or `limit` has passed since the
/// first attempt (each attempt gets what is left of it).
pub async fn send<T: Transport>(
    transport: &T,
    request: &[u8],
    limit: Duration,
    policy: RetryPolicy,
    random: &mut IdGen,
) -> Outcome {
    let deadline = Instant::now() + limit;
    let mut retries = 0;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let error = match tokio::time::timeout(left, transport.send(request)).await {
            Ok(Ok(answer)) => {
                return Outcome {
                    result: Ok(answer),
                    retries,
                }
            }
            Ok(Err(e)) => e,
            Err(_) => {
                return Outcome {
                    result: Err(format!("no answer within {} ms", limit.as_millis())),
                    retries,
                }
            }
        };
        let retry_in = if policy.initial_backoff_ms == 0 || !error.retryable {
            None
        } else {
            let backoff = randomized(policy.backoff(retries as u32), random.span_id());
            Some(error.retry_after.map_or(backoff, |hint| hint.max(backoff)))
        };
        // a wait that would end past the deadline is not taken: the export fails now
        let Some(wait) =
            retry_in.filter(|w| *w < deadline.saturating_duration_since(Instant::now()))
        else {
            return Outcome {
                result: Err(error.message),
                retries,
            };
        };
        tokio::time::sleep(wait).await;
        retries += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    /// Fails with `errors` in turn, then accepts; counts the attempts.
    struct Script {
        errors: RefCell<Vec<SendError>>,
        attempts: RefCell<u32>,
    }

    impl Script {
        fn new(mut errors: Vec<SendError>) -> Script {
            errors.reverse();
            Script {
                errors: RefCell::new(errors),
                attempts: RefCell::new(0),
            }
        }
    }

    impl Transport for Script {
        async fn send(&self, _request: &[u8]) -> Result<PartialSuccess, SendError> {
            *self.attempts.borrow_mut() += 1;
            match self.errors.borrow_mut().pop() {
                Some(e) => Err(e),
                None => Ok(PartialSuccess::default()),
            }
        }
    }

    fn run(script: &Script, limit_ms: u64, policy: RetryPolicy) -> Outcome {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        rt.block_on(send(
            script,
            b"request",
            Duration::from_millis(limit_ms),
            policy,
            &mut IdGen::seeded(7),
        ))
    }

    const POLICY: RetryPolicy = RetryPolicy {
        initial_backoff_ms: 5_000,
        max_backoff_ms: 30_000,
    };

    fn unavailable() -> SendError {
        SendError::retryable("unavailable", None)
    }

    #[test]
    fn the_default_back_off_is_the_go_exporters() {
        assert_eq!(POLICY.backoff(0), Duration::from_secs(5));
        assert_eq!(POLICY.backoff(1), Duration::from_millis(7_500));
        assert_eq!(POLICY.backoff(2), Duration::from_millis(11_250));
        assert_eq!(POLICY.backoff(10), Duration::from_secs(30), "capped");
        assert_eq!(
            randomized(Duration::from_secs(4), 0),
            Duration::from_secs(2)
        );
        assert_eq!(
            randomized(Duration::from_secs(4), u64::MAX),
            Duration::from_secs(6)
        );
    }

    #[test]
    fn retryable_failures_are_retried_until_the_collector_answers() {
        let script = Script::new(vec![unavailable(), unavailable()]);
        let out = run(&script, 60_000, POLICY);
        assert_eq!(out.result, Ok(PartialSuccess::default()));
        assert_eq!(out.retries, 2);
        assert_eq!(*script.attempts.borrow(), 3);
    }

    #[test]
    fn a_fatal_failure_is_not_retried() {
        let script = Script::new(vec![SendError::fatal("bad request")]);
        let out = run(&script, 60_000, POLICY);
        assert_eq!(out.result, Err("bad request".to_string()));
        assert_eq!(out.retries, 0);
        assert_eq!(*script.attempts.borrow(), 1);
    }

    #[test]
    fn retries_stop_at_the_export_timeout() {
        // 10 s: the first wait (2.5-7.5 s) fits, the second (3.75-11.25 s) cannot end in time
        let script = Script::new(vec![unavailable(); 10]);
        let out = run(&script, 10_000, POLICY);
        assert_eq!(out.result, Err("unavailable".to_string()));
        assert!((1..=2).contains(&out.retries), "{out:?}");
        assert_eq!(*script.attempts.borrow() as u64, out.retries + 1);
    }

    #[test]
    fn a_collectors_longer_wait_is_honoured_and_one_past_the_deadline_ends_the_export() {
        let later = |s| SendError::retryable("throttled", Some(Duration::from_secs(s)));
        // asked to wait 20 s: within a minute it is retried
        let script = Script::new(vec![later(20)]);
        assert_eq!(
            run(&script, 60_000, POLICY).result,
            Ok(PartialSuccess::default())
        );
        // past the deadline: given up at once
        let script = Script::new(vec![later(20)]);
        let out = run(&script, 10_000, POLICY);
        assert_eq!(out.result, Err("throttled".to_string()));
        assert_eq!(*script.attempts.borrow(), 1);
    }

    #[test]
    fn an_initial_back_off_of_zero_turns_retries_off() {
        let script = Script::new(vec![unavailable()]);
        let off = RetryPolicy {
            initial_backoff_ms: 0,
            ..POLICY
        };
        assert_eq!(run(&script, 60_000, off).retries, 0);
        assert_eq!(*script.attempts.borrow(), 1);
    }
}
