//! Durations on the command line as the kubelet writes them (Go's `time.Duration`
//! syntax: `30s`, `2m`, `1m30s`, `1h`; a bare `0` is zero).
//!
//! Owns parsing them into whole seconds. Must not accept a fraction of a second or a
//! negative duration: the settings that use it count whole seconds, as the kubelet does.

/// Parses a duration like `30s`, `1m30s` or `0` into whole seconds.
pub fn parse_duration_s(text: &str) -> Result<u64, String> {
    let bad = || format!("{text:?} is not a duration in whole seconds like 30s, 2m or 1m30s");
    if text == "0" {
        return Ok(0);
    }
    let mut total_s: u64 = 0;
    let mut digits = String::new();
    let mut units = 0;
    for ch in text.chars() {
        if ch.is_ascii_digit() {
            digits.push(ch);
            continue;
        }
        let unit_s = match ch {
            'h' => 3_600,
            'm' => 60,
            's' => 1,
            _ => return Err(bad()),
        };
        let n: u64 = digits.parse().map_err(|_| bad())?;
        total_s = n
            .checked_mul(unit_s)
            .and_then(|s| total_s.checked_add(s))
            .ok_or_else(bad)?;
        digits.clear();
        units += 1;
    }
    if !digits.is_empty() || units == 0 {
        return Err(bad());
    }
    Ok(total_s)
}

#[cfg(test)]
mod tests {
    use super::parse_duration_s;

    #[test]
    fn go_durations_in_whole_seconds_parse() {
        assert_eq!(parse_duration_s("0"), Ok(0));
        assert_eq!(parse_duration_s("0s"), Ok(0));
        assert_eq!(parse_duration_s("30s"), Ok(30));
        assert_eq!(parse_duration_s("2m"), Ok(120));
        assert_eq!(parse_duration_s("1m30s"), Ok(90));
        assert_eq!(parse_duration_s("1h"), Ok(3_600));
    }

    #[test]
    fn fractions_negatives_and_bare_numbers_are_rejected() {
        for bad in ["", "30", "1.5s", "-1s", "10ms", "s", "1x"] {
            assert!(parse_duration_s(bad).is_err(), "{bad:?} accepted");
        }
    }
}
