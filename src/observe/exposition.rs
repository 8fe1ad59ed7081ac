//! Prometheus text exposition (format 0.0.4) for the metrics ledgerlet keeps itself rather
//! than through the `metrics` facade: per-record fold statistics (too hot for a registry
//! lookup per record) and values read from state at scrape time (pods, ledger, process).
//!
//! Owns the text format: families with `# HELP`/`# TYPE`, label escaping, cumulative
//! histogram buckets. Must not read state itself.

use std::fmt::Write as _;

/// A fixed-bucket histogram kept with plain integers (one owner, read under its lock).
#[derive(Clone, Debug, PartialEq)]
pub struct Histogram {
    /// Upper bounds (without `+Inf`).
    pub bounds: &'static [f64],
    /// Observations per bucket (not cumulative); the last one is `+Inf`.
    pub counts: Vec<u64>,
    /// Sum of observations.
    pub sum: f64,
}

impl Histogram {
    /// An empty histogram over `bounds`.
    pub fn new(bounds: &'static [f64]) -> Histogram {
        Histogram {
            bounds,
            counts: vec![0; bounds.len() + 1],
            sum: 0.0,
        }
    }

    /// Records one value.
    pub fn observe(&mut self, v: f64) {
        let i = self
            .bounds
            .iter()
            .position(|b| v <= *b)
            .unwrap_or(self.bounds.len());
        self.counts[i] += 1;
        self.sum += v;
    }

    /// Observations so far.
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }
}

/// A text exposition being written.
#[derive(Default)]
pub struct Text(pub String);

fn escape(v: &str, out: &mut String) {
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

fn number(v: f64, out: &mut String) {
    if v.is_infinite() {
        out.push_str(if v > 0.0 { "+Inf" } else { "-Inf" });
    } else if v.is_nan() {
        out.push_str("NaN");
    } else {
        let _ = write!(out, "{v}");
    }
}

impl Text {
    /// Starts a family.
    pub fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.0, "# HELP {name} {help}");
        let _ = writeln!(self.0, "# TYPE {name} {kind}");
    }

    fn labels(&mut self, labels: &[(&str, &str)], extra: Option<(&str, &str)>) {
        if labels.is_empty() && extra.is_none() {
            return;
        }
        self.0.push('{');
        let mut first = true;
        for (k, v) in labels.iter().copied().chain(extra) {
            if !first {
                self.0.push(',');
            }
            first = false;
            self.0.push_str(k);
            self.0.push_str("=\"");
            escape(v, &mut self.0);
            self.0.push('"');
        }
        self.0.push('}');
    }

    /// One sample of a counter or gauge.
    pub fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        self.0.push_str(name);
        self.labels(labels, None);
        self.0.push(' ');
        number(value, &mut self.0);
        self.0.push('\n');
    }

    /// The `_bucket`, `_sum` and `_count` samples of one histogram series.
    pub fn histogram(&mut self, name: &str, labels: &[(&str, &str)], h: &Histogram) {
        let mut cumulative = 0u64;
        let bucket = format!("{name}_bucket");
        for (i, c) in h.counts.iter().enumerate() {
            cumulative += c;
            let le = match h.bounds.get(i) {
                Some(b) => {
                    let mut s = String::new();
                    number(*b, &mut s);
                    s
                }
                None => "+Inf".to_string(),
            };
            self.0.push_str(&bucket);
            self.labels(labels, Some(("le", &le)));
            let _ = writeln!(self.0, " {cumulative}");
        }
        self.sample(&format!("{name}_sum"), labels, h.sum);
        self.sample(&format!("{name}_count"), labels, cumulative as f64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_are_cumulative_with_inf_sum_and_count() {
        let mut h = Histogram::new(&[0.1, 1.0]);
        for v in [0.05, 0.5, 0.7, 3.0] {
            h.observe(v);
        }
        let mut t = Text::default();
        t.family("x_seconds", "histogram", "X.");
        t.histogram("x_seconds", &[("kind", "a\"b")], &h);
        assert_eq!(
            t.0,
            "# HELP x_seconds X.\n# TYPE x_seconds histogram\n\
             x_seconds_bucket{kind=\"a\\\"b\",le=\"0.1\"} 1\n\
             x_seconds_bucket{kind=\"a\\\"b\",le=\"1\"} 3\n\
             x_seconds_bucket{kind=\"a\\\"b\",le=\"+Inf\"} 4\n\
             x_seconds_sum{kind=\"a\\\"b\"} 4.25\n\
             x_seconds_count{kind=\"a\\\"b\"} 4\n"
        );
    }
}
