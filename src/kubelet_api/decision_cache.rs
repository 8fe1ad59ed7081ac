//! A bounded cache of authentication and authorization answers with per-answer lifetimes.
//!
//! Owns the entries and their expiry; the caller passes the time in (no clock here), so the
//! rules are unit-testable. Must not grow past its capacity: when full, an insert first drops
//! expired entries, then the entry closest to expiry.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Answers keyed by a string (never a secret itself: callers key tokens by their digest).
#[derive(Debug)]
pub struct DecisionCache<V> {
    entries: BTreeMap<String, (V, Instant)>,
    capacity: usize,
}

impl<V: Clone> DecisionCache<V> {
    /// An empty cache holding at most `capacity` answers (at least 1).
    pub fn new(capacity: usize) -> Self {
        DecisionCache {
            entries: BTreeMap::new(),
            capacity: capacity.max(1),
        }
    }

    /// The answer for `key` if it has not expired at `now`.
    pub fn get(&self, key: &str, now: Instant) -> Option<V> {
        match self.entries.get(key) {
            Some((v, expires)) if *expires > now => Some(v.clone()),
            _ => None,
        }
    }

    /// Keeps `value` for `ttl` from `now`, evicting to stay within capacity.
    pub fn insert(&mut self, key: String, value: V, ttl: Duration, now: Instant) {
        if !self.entries.contains_key(&key) && self.entries.len() >= self.capacity {
            self.entries.retain(|_, (_, expires)| *expires > now);
            if self.entries.len() >= self.capacity {
                let soonest = self
                    .entries
                    .iter()
                    .min_by_key(|(_, (_, expires))| *expires)
                    .map(|(k, _)| k.clone());
                if let Some(k) = soonest {
                    self.entries.remove(&k);
                }
            }
        }
        self.entries.insert(key, (value, now + ttl));
    }

    /// How many answers are kept (expired ones included until evicted).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// No answer is kept.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_is_served_until_its_lifetime_ends() {
        let t0 = Instant::now();
        let mut c = DecisionCache::new(4);
        c.insert("a".into(), true, Duration::from_secs(30), t0);
        assert_eq!(c.get("a", t0 + Duration::from_secs(29)), Some(true));
        assert_eq!(c.get("a", t0 + Duration::from_secs(30)), None);
    }

    #[test]
    fn allowed_and_denied_answers_keep_their_own_lifetimes() {
        let t0 = Instant::now();
        let mut c = DecisionCache::new(4);
        c.insert("allowed".into(), true, Duration::from_secs(300), t0);
        c.insert("denied".into(), false, Duration::from_secs(30), t0);
        let later = t0 + Duration::from_secs(60);
        assert_eq!(c.get("allowed", later), Some(true));
        assert_eq!(c.get("denied", later), None);
    }

    #[test]
    fn the_cache_never_holds_more_than_its_capacity() {
        let t0 = Instant::now();
        let mut c = DecisionCache::new(3);
        for i in 0..100u64 {
            c.insert(format!("k{i}"), i, Duration::from_secs(60 + i), t0);
            assert!(c.len() <= 3);
        }
        // the newest answers (furthest from expiry) are the ones kept
        assert_eq!(c.get("k99", t0), Some(99));
        assert_eq!(c.get("k0", t0), None);
    }

    #[test]
    fn a_full_cache_drops_expired_answers_before_live_ones() {
        let t0 = Instant::now();
        let mut c = DecisionCache::new(2);
        c.insert("old".into(), 1, Duration::from_secs(1), t0);
        c.insert("live".into(), 2, Duration::from_secs(600), t0);
        let later = t0 + Duration::from_secs(10);
        c.insert("new".into(), 3, Duration::from_secs(30), later);
        assert_eq!(c.len(), 2);
        assert_eq!(c.get("live", later), Some(2));
        assert_eq!(c.get("new", later), Some(3));
    }
}
