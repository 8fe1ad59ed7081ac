//! `usageNanoCores` from successive cumulative CPU readings, as the kubelet's CRI stats
//! provider computes it when the runtime does not (`getAndUpdateContainerUsageNanoCores`).
//!
//! Owns the last reading per container (or sandbox, or the node) and the rate computed from
//! it. Must not read a clock or do I/O: readings carry their own timestamps. Bounded: at most
//! `capacity` keys; keys the caller no longer sees are dropped with [`CpuRates::retain`], and
//! a new key into a full cache gets no rate rather than growing it.

use std::collections::BTreeMap;

/// One cumulative reading.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuReading {
    /// When it was taken, in nanoseconds since the epoch.
    pub timestamp_ns: i64,
    /// Cumulative CPU time, in core-nanoseconds.
    pub usage_core_nano_seconds: u64,
}

/// What is remembered of one key.
#[derive(Clone, Copy, Debug)]
struct Remembered {
    reading: CpuReading,
    rate: Option<u64>,
}

/// The last reading and rate per key, bounded.
#[derive(Debug)]
pub struct CpuRates {
    last: BTreeMap<String, Remembered>,
    capacity: usize,
}

impl CpuRates {
    /// An empty cache of at most `capacity` keys (at least one).
    pub fn new(capacity: usize) -> CpuRates {
        CpuRates {
            last: BTreeMap::new(),
            capacity: capacity.max(1),
        }
    }

    /// Takes `reading` for `key` and returns the average use since the previous one, in
    /// nano-cores: none for a first reading, a counter that went back (the container was
    /// replaced) or a timestamp that did not move forward (the reading is not remembered
    /// then, so the next good one measures from the older one).
    pub fn observe(&mut self, key: &str, reading: CpuReading) -> Option<u64> {
        let previous = self.last.get(key).copied();
        let rate = match previous {
            Some(p) if reading.usage_core_nano_seconds >= p.reading.usage_core_nano_seconds => {
                let window = reading.timestamp_ns - p.reading.timestamp_ns;
                if window <= 0 {
                    return p.rate;
                }
                let used =
                    (reading.usage_core_nano_seconds - p.reading.usage_core_nano_seconds) as f64;
                Some((used / window as f64 * 1e9) as u64)
            }
            _ => None,
        };
        if previous.is_some() || self.last.len() < self.capacity {
            self.last
                .insert(key.to_string(), Remembered { reading, rate });
        }
        rate
    }

    /// The rate last computed for `key`, without taking a reading (the kubelet's
    /// CPU-and-memory path reads it so that frequent scrapes do not shorten the window).
    pub fn last_rate(&self, key: &str) -> Option<u64> {
        self.last.get(key).and_then(|r| r.rate)
    }

    /// Forgets every key for which `keep` is false.
    pub fn retain(&mut self, keep: impl Fn(&str) -> bool) {
        self.last.retain(|k, _| keep(k));
    }

    /// How many keys are remembered.
    pub fn len(&self) -> usize {
        self.last.len()
    }

    /// True when nothing is remembered.
    pub fn is_empty(&self) -> bool {
        self.last.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: i64, used_ms: u64) -> CpuReading {
        CpuReading {
            timestamp_ns: s * 1_000_000_000,
            usage_core_nano_seconds: used_ms * 1_000_000,
        }
    }

    #[test]
    fn first_reading_has_no_rate_and_the_second_gives_core_nanoseconds_per_second() {
        let mut r = CpuRates::new(8);
        assert_eq!(r.observe("c", at(100, 0)), None);
        // 500 ms of CPU in 2 s: a quarter of a core
        assert_eq!(r.observe("c", at(102, 500)), Some(250_000_000));
        assert_eq!(r.last_rate("c"), Some(250_000_000));
        // a busy core for 1 s
        assert_eq!(r.observe("c", at(103, 1500)), Some(1_000_000_000));
    }

    #[test]
    fn an_idle_container_has_a_rate_of_zero() {
        let mut r = CpuRates::new(8);
        r.observe("c", at(1, 40));
        assert_eq!(r.observe("c", at(11, 40)), Some(0));
    }

    #[test]
    fn a_counter_that_goes_back_restarts_the_window_without_a_rate() {
        let mut r = CpuRates::new(8);
        r.observe("c", at(1, 900));
        assert_eq!(r.observe("c", at(2, 10)), None);
        assert_eq!(r.observe("c", at(3, 110)), Some(100_000_000));
    }

    #[test]
    fn a_reading_that_is_not_newer_keeps_the_previous_rate_and_window() {
        let mut r = CpuRates::new(8);
        r.observe("c", at(10, 0));
        assert_eq!(r.observe("c", at(12, 1000)), Some(500_000_000));
        assert_eq!(r.observe("c", at(12, 1000)), Some(500_000_000));
        assert_eq!(r.observe("c", at(11, 1000)), Some(500_000_000));
        assert_eq!(r.observe("c", at(14, 1000)), Some(0));
    }

    #[test]
    fn the_cache_never_grows_past_its_capacity_and_forgets_what_is_gone() {
        let mut r = CpuRates::new(2);
        r.observe("a", at(1, 0));
        r.observe("b", at(1, 0));
        assert_eq!(r.observe("c", at(1, 0)), None);
        assert_eq!(
            r.observe("c", at(2, 100)),
            None,
            "no room: never remembered"
        );
        assert_eq!(r.len(), 2);
        r.retain(|k| k != "a");
        r.observe("c", at(3, 100));
        assert_eq!(r.observe("c", at(4, 200)), Some(100_000_000));
        assert_eq!(r.len(), 2);
    }
}
