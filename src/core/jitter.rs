//! Deterministic jitter: the kubelet's `wait.Jitter`, with the random factor derived from
//! the record being folded instead of a random source.
//!
//! Owns the mixing function. Must not use randomness or clocks: the same (seq, key) always
//! gives the same delay, on every machine, so replay reproduces every timer.

use super::uid::Uid;

/// A value in `[0, 1)` derived from the record's `seq` and a key (usually a pod UID).
pub fn unit_interval(seq: u64, key: &str) -> f64 {
    // FNV-1a over the key, then splitmix64 with the seq: cheap, stable, well mixed.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in key.as_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    let mut z = h ^ seq.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

/// `wait.Jitter(duration, max_factor)`: `duration + u * max_factor * duration` with
/// `u` in `[0, 1)` derived from `(seq, uid)`. A non-positive factor means 1.0, as upstream.
pub fn jitter_ms(duration_ms: u64, max_factor: f64, seq: u64, uid: &Uid) -> u64 {
    let factor = if max_factor <= 0.0 { 1.0 } else { max_factor };
    let extra = unit_interval(seq, uid.as_str()) * factor * duration_ms as f64;
    duration_ms.saturating_add(extra as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_stays_within_the_upstream_bounds_and_is_reproducible() {
        let uid = Uid::new("pod-1");
        for seq in 0..10_000u64 {
            let d = jitter_ms(10_000, 0.5, seq, &uid);
            assert!((10_000..15_000).contains(&d), "{d}");
            assert_eq!(d, jitter_ms(10_000, 0.5, seq, &uid));
        }
        // it actually varies
        let distinct: std::collections::BTreeSet<u64> =
            (0..100).map(|s| jitter_ms(10_000, 0.5, s, &uid)).collect();
        assert!(distinct.len() > 50);
    }
}
