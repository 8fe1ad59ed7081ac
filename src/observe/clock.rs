//! The fold's stopwatch: one cheap counter read at the start and one at the end of each fold,
//! and histograms kept in counter ticks.
//!
//! Owns the conversion between ticks of the fastest monotonic counter (the TSC where it is
//! invariant, else the OS monotonic clock; `quanta`, which the metrics exporter already
//! calibrates) and nanoseconds, and [`TickHistograms`], whose bucket bounds are converted to
//! ticks once so an observation is a few integer comparisons. Must not be used for wall time
//! (span start times are the record's `at` plus elapsed ticks) and must not render anything
//! itself (a [`TickHistograms`] series becomes an exposition `Histogram` at scrape time).

use std::sync::Mutex;

use super::exposition::Histogram;

/// `bounds` (seconds) as tick limits: `limits[i]` is the largest tick count that is at most
/// `bounds[i]` seconds. Computed once per process for each bounds slice (the counter's scale
/// does not change), so an observer costs nothing to make.
pub fn tick_limits(bounds: &'static [f64]) -> &'static [u64] {
    static MADE: Mutex<Vec<(usize, &'static [u64])>> = Mutex::new(Vec::new());
    let key = bounds.as_ptr() as usize;
    let mut made = MADE.lock().expect("tick limits");
    if let Some((_, l)) = made
        .iter()
        .find(|(k, l)| *k == key && l.len() == bounds.len())
    {
        return l;
    }
    let watch = Stopwatch::new();
    let limits: &'static [u64] = Box::leak(
        bounds
            .iter()
            .map(|b| watch.ticks_within((b * 1e9).round() as u64))
            .collect(),
    );
    made.push((key, limits));
    limits
}

/// A monotonic counter and its scale.
#[derive(Clone, Debug)]
pub struct Stopwatch {
    clock: quanta::Clock,
    /// The clock reads the time-stamp counter itself, so [`Stopwatch::ticks`] reads it
    /// inline (one instruction) rather than through a call into `quanta`.
    tsc: bool,
}

/// Whether `clock`'s raw readings are the time-stamp counter's: a reading taken between two
/// reads of the counter lies between them (the OS monotonic clock, in nanoseconds since
/// boot, never does: the counter runs at the processor's base frequency, over 1 GHz).
#[cfg(target_arch = "x86_64")]
fn reads_the_tsc(clock: &quanta::Clock) -> bool {
    (0..3).all(|_| {
        // SAFETY: `rdtsc` has no preconditions on x86_64.
        let before = unsafe { core::arch::x86_64::_rdtsc() };
        let raw = clock.raw();
        let after = unsafe { core::arch::x86_64::_rdtsc() };
        before <= raw && raw <= after
    })
}

#[cfg(not(target_arch = "x86_64"))]
fn reads_the_tsc(_clock: &quanta::Clock) -> bool {
    false
}

impl Default for Stopwatch {
    fn default() -> Self {
        Stopwatch::new()
    }
}

impl Stopwatch {
    /// The process's calibrated counter (made and calibrated once per process).
    pub fn new() -> Stopwatch {
        static CLOCK: std::sync::OnceLock<(quanta::Clock, bool)> = std::sync::OnceLock::new();
        let (clock, tsc) = CLOCK.get_or_init(|| {
            let clock = quanta::Clock::new();
            let tsc = reads_the_tsc(&clock);
            (clock, tsc)
        });
        Stopwatch {
            clock: clock.clone(),
            tsc: *tsc,
        }
    }

    /// Ticks now.
    #[inline]
    pub fn ticks(&self) -> u64 {
        #[cfg(target_arch = "x86_64")]
        if self.tsc {
            // SAFETY: `rdtsc` has no preconditions on x86_64; `tsc` says it is the clock's
            // own source.
            return unsafe { core::arch::x86_64::_rdtsc() };
        }
        self.clock.raw()
    }

    /// Nanoseconds from `start` to `end` (0 when `end` is not after `start`).
    #[inline]
    pub fn nanos(&self, start: u64, end: u64) -> u64 {
        self.clock.delta_as_nanos(start, end)
    }

    /// Nanoseconds in a span of `ticks`.
    #[inline]
    pub fn ticks_to_nanos(&self, ticks: u64) -> u64 {
        self.clock.delta_as_nanos(0, ticks)
    }

    /// The largest tick count that is at most `nanos` nanoseconds.
    pub fn ticks_within(&self, nanos: u64) -> u64 {
        // binary search on the (monotonic) conversion, so bucket bounds are exact to a tick
        let (mut lo, mut hi) = (0u64, 1u64);
        while self.ticks_to_nanos(hi) <= nanos {
            lo = hi;
            if hi >= u64::MAX / 2 {
                return u64::MAX;
            }
            hi *= 2;
        }
        // ticks_to_nanos(lo) <= nanos < ticks_to_nanos(hi)
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if self.ticks_to_nanos(mid) <= nanos {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        lo
    }
}

/// Most bucket bounds a [`TickHistograms`] takes (its rows are fixed-size arrays, so an
/// observation indexes without a multiplication or a bounds check per bucket).
pub const MAX_TICK_BOUNDS: usize = 14;

/// Slots of [`Limits`]: the bounds padded to a power of two, so the search for a bucket halves
/// a fixed range four times.
const LIMIT_SLOTS: usize = 16;

/// Bucket limits in ticks, ascending, padded with `u64::MAX` (at least two padding slots):
/// the first limit at or above a duration is its bucket, the `+Inf` bucket being the first
/// padding.
type Limits = [u64; LIMIT_SLOTS];

/// One series: its buckets (not cumulative; the one after the last bound is `+Inf`), then
/// the sum of its observations in ticks, in the last slot.
type Row = [u64; MAX_TICK_BOUNDS + 2];

/// Where a row keeps its sum.
const SUM: usize = MAX_TICK_BOUNDS + 1;

/// The number of `limits` below `ticks`: a branchless binary search (each step a compare and
/// a conditional add, no branch that depends on the duration, so the engine's thread never
/// mispredicts where it stops; four steps instead of a compare per limit). At most
/// [`MAX_TICK_BOUNDS`], since the last two slots hold `u64::MAX`.
#[inline]
fn limits_below(limits: &Limits, ticks: u64) -> usize {
    let mut i = 0;
    i += usize::from(limits[i + 7] < ticks) * 8;
    i += usize::from(limits[i + 3] < ticks) * 4;
    i += usize::from(limits[i + 1] < ticks) * 2;
    i += usize::from(limits[i] < ticks);
    i
}

/// Histograms of durations observed in ticks, one per series, sharing bounds in seconds.
#[derive(Clone, Debug)]
pub struct TickHistograms {
    bounds: &'static [f64],
    /// Bound `i` in ticks: a duration of at most `limits[i]` ticks is at most `bounds[i]` s.
    limits: Limits,
    rows: Box<[Row]>,
}

impl TickHistograms {
    /// `series` empty histograms over `bounds` (seconds; at most [`MAX_TICK_BOUNDS`]).
    pub fn new(bounds: &'static [f64], series: usize) -> TickHistograms {
        assert!(
            bounds.len() <= MAX_TICK_BOUNDS,
            "a tick histogram takes at most {MAX_TICK_BOUNDS} bounds, not {}",
            bounds.len()
        );
        let mut limits = [u64::MAX; LIMIT_SLOTS];
        limits[..bounds.len()].copy_from_slice(tick_limits(bounds));
        TickHistograms {
            bounds,
            limits,
            rows: vec![[0; MAX_TICK_BOUNDS + 2]; series].into_boxed_slice(),
        }
    }

    /// Records one duration of `ticks` in `series`.
    ///
    /// Its bucket is the number of limits below `ticks` (the limits ascend, and no duration
    /// is above the padding), found by [`limits_below`]. (A count over every limit, used
    /// before, took about 80 instructions per record: x86-64's baseline has no 64-bit vector
    /// compare.)
    #[inline]
    pub fn observe(&mut self, series: usize, ticks: u64) {
        let i = limits_below(&self.limits, ticks).min(MAX_TICK_BOUNDS);
        let row = &mut self.rows[series];
        row[i] += 1;
        row[SUM] = row[SUM].wrapping_add(ticks);
    }

    /// The buckets of `series` (the last one `+Inf`).
    fn buckets(&self, series: usize) -> &[u64] {
        &self.rows[series][..=self.bounds.len()]
    }

    /// Observations in `series` so far.
    pub fn count(&self, series: usize) -> u64 {
        self.buckets(series).iter().sum()
    }

    /// One series in seconds, for the exposition.
    pub fn to_seconds(&self, series: usize, watch: &Stopwatch) -> Histogram {
        Histogram {
            bounds: self.bounds,
            counts: self.buckets(series).to_vec(),
            sum: watch.ticks_to_nanos(self.rows[series][SUM]) as f64 / 1e9,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_the_clocks_own_readings() {
        let w = Stopwatch::new();
        let a = w.clock.raw();
        let t = w.ticks();
        let b = w.clock.raw();
        assert!(a <= t && t <= b, "{a} {t} {b} (tsc: {})", w.tsc);
    }

    #[test]
    fn tick_bounds_convert_back_to_at_most_their_seconds() {
        let w = Stopwatch::new();
        for ns in [1u64, 5_000, 10_000, 1_000_000, 100_000_000] {
            let t = w.ticks_within(ns);
            assert!(w.ticks_to_nanos(t) <= ns, "{ns}");
            assert!(w.ticks_to_nanos(t + 1) > ns || t == u64::MAX, "{ns}");
        }
    }

    #[test]
    fn tick_histograms_bucket_like_the_seconds_they_stand_for() {
        static BOUNDS: &[f64] = &[0.000_001, 0.001];
        let w = Stopwatch::new();
        let mut h = TickHistograms::new(BOUNDS, 2);
        h.observe(1, 0);
        h.observe(1, w.ticks_within(1_000));
        h.observe(1, w.ticks_within(1_000) + 1);
        h.observe(1, w.ticks_within(2_000_000));
        h.observe(0, w.ticks_within(500));
        let s = h.to_seconds(1, &w);
        assert_eq!(s.counts, vec![2, 1, 1]);
        assert_eq!((h.count(0), h.count(1)), (1, 4));
        assert!((s.sum - 0.002_002).abs() < 1e-6, "{}", s.sum);
        assert_eq!(h.to_seconds(0, &w).counts, vec![1, 0, 0]);
    }

    #[test]
    fn limits_below_counts_the_limits_below_a_duration_for_every_number_of_bounds() {
        for bounds in 0..=MAX_TICK_BOUNDS {
            // limits 10, 20, ... then padding
            let mut limits = [u64::MAX; LIMIT_SLOTS];
            for (i, l) in limits.iter_mut().take(bounds).enumerate() {
                *l = 10 * (i as u64 + 1);
            }
            let mut durations = vec![0, u64::MAX - 1, u64::MAX];
            for l in &limits[..bounds] {
                durations.extend([l - 1, *l, l + 1]);
            }
            for d in durations {
                let want = limits.iter().filter(|l| **l < d).count();
                assert_eq!(limits_below(&limits, d), want, "{bounds} bounds, {d} ticks");
            }
        }
    }

    #[test]
    fn tick_histograms_put_a_duration_in_the_first_bucket_at_or_above_it() {
        // every bound in use, durations on, just past and between the limits, and the largest
        static BOUNDS: &[f64] = &[
            1e-6, 2e-6, 5e-6, 1e-5, 2e-5, 5e-5, 1e-4, 2e-4, 5e-4, 1e-3, 1e-2, 0.1, 1.0, 10.0,
        ];
        assert_eq!(BOUNDS.len(), MAX_TICK_BOUNDS);
        let w = Stopwatch::new();
        let limits: Vec<u64> = BOUNDS
            .iter()
            .map(|b| w.ticks_within((b * 1e9) as u64))
            .collect();
        let mut durations = vec![0, 1, u64::MAX - 1, u64::MAX];
        for l in &limits {
            durations.extend([l.saturating_sub(1), *l, l.saturating_add(1)]);
        }
        let mut h = TickHistograms::new(BOUNDS, 1);
        let mut want = vec![0u64; MAX_TICK_BOUNDS + 1];
        for d in durations {
            h.observe(0, d);
            want[limits
                .iter()
                .position(|l| d <= *l)
                .unwrap_or(MAX_TICK_BOUNDS)] += 1;
        }
        assert_eq!(h.to_seconds(0, &w).counts, want);
    }
}
