//! A token bucket: the kubelet's client-side rate limit (`--kube-api-qps` 50,
//! `--kube-api-burst` 100; Events have their own 50/100).
//!
//! Owns waiting for a token. Must not drop requests: callers wait their turn.

use std::time::{Duration, Instant};

use tokio::sync::Mutex;

/// Tokens refill at `qps` per second up to `burst`.
pub struct TokenBucket {
    qps: f64,
    burst: f64,
    state: Mutex<(f64, Instant)>,
}

impl TokenBucket {
    /// A full bucket.
    pub fn new(qps: f64, burst: u32) -> TokenBucket {
        let burst = f64::from(burst.max(1));
        TokenBucket {
            qps: qps.max(0.001),
            burst,
            state: Mutex::new((burst, Instant::now())),
        }
    }

    /// Takes a token, waiting for one if the bucket is empty.
    pub async fn acquire(&self) {
        loop {
            let wait = {
                let mut s = self.state.lock().await;
                let now = Instant::now();
                let refill = now.duration_since(s.1).as_secs_f64() * self.qps;
                s.0 = (s.0 + refill).min(self.burst);
                s.1 = now;
                if s.0 >= 1.0 {
                    s.0 -= 1.0;
                    return;
                }
                Duration::from_secs_f64((1.0 - s.0) / self.qps)
            };
            tokio::time::sleep(wait).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_burst_passes_at_once_then_the_rate_holds() {
        let b = TokenBucket::new(100.0, 10);
        let start = Instant::now();
        for _ in 0..10 {
            b.acquire().await;
        }
        assert!(start.elapsed() < Duration::from_millis(20), "burst");
        for _ in 0..10 {
            b.acquire().await;
        }
        let took = start.elapsed();
        assert!(
            took >= Duration::from_millis(85),
            "10 more tokens at 100/s: {took:?}"
        );
    }
}
