//! Kubernetes resource quantities (`100m`, `1Gi`, `1.5`, `2e3`) as exact numbers, enough to
//! compare and add them.
//!
//! Owns the parser. Values are counted in nano-units (10⁻⁹) in an `i128`; anything finer is
//! rounded up, as the API's canonical form does. Must not format quantities.

/// A parsed quantity in nano-units, or `None` if the text is not a quantity (or overflows).
pub fn parse_nanos(text: &str) -> Option<i128> {
    let s = text.trim();
    let (negative, s) = match s.as_bytes().first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let number_end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (number, suffix) = s.split_at(number_end);
    let (int, frac) = number.split_once('.').unwrap_or((number, ""));
    if (int.is_empty() && frac.is_empty()) || frac.contains('.') || int.len() + frac.len() > 30 {
        return None;
    }
    let (exp10, binary_shift) = suffix_scale(suffix)?;
    let mut mantissa: i128 = 0;
    for d in int.bytes().chain(frac.bytes()) {
        mantissa = mantissa * 10 + i128::from(d - b'0');
    }
    mantissa = mantissa.checked_mul(1i128.checked_shl(binary_shift)?)?;
    // value = mantissa × 10^(exp10 − frac digits); in nano-units add 9 to the exponent.
    let exp = exp10 + 9 - frac.len() as i32;
    let value = if exp >= 0 {
        mantissa.checked_mul(10i128.checked_pow(exp as u32)?)?
    } else {
        let div = 10i128.checked_pow(exp.unsigned_abs())?;
        (mantissa + div - 1) / div
    };
    Some(if negative { -value } else { value })
}

/// The decimal exponent and binary shift of a suffix.
fn suffix_scale(suffix: &str) -> Option<(i32, u32)> {
    let decimal = |e: i32| Some((e, 0));
    match suffix {
        "" => decimal(0),
        "n" => decimal(-9),
        "u" => decimal(-6),
        "m" => decimal(-3),
        "k" => decimal(3),
        "M" => decimal(6),
        "G" => decimal(9),
        "T" => decimal(12),
        "P" => decimal(15),
        "E" => decimal(18),
        "Ki" => Some((0, 10)),
        "Mi" => Some((0, 20)),
        "Gi" => Some((0, 30)),
        "Ti" => Some((0, 40)),
        "Pi" => Some((0, 50)),
        "Ei" => Some((0, 60)),
        _ => {
            let rest = suffix.strip_prefix(['e', 'E'])?;
            let digits = rest.strip_prefix(['+', '-']).unwrap_or(rest);
            if digits.is_empty() || digits.len() > 3 || !digits.bytes().all(|b| b.is_ascii_digit())
            {
                return None;
            }
            decimal(rest.parse::<i32>().ok()?)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::parse_nanos;

    const GIGA: i128 = 1_000_000_000;

    #[test]
    fn quantity_suffixes_and_fractions_parse_exactly() {
        assert_eq!(parse_nanos("1"), Some(GIGA));
        assert_eq!(parse_nanos("100m"), Some(GIGA / 10));
        assert_eq!(parse_nanos("0.1"), Some(GIGA / 10));
        assert_eq!(parse_nanos("1Ki"), Some(1024 * GIGA));
        assert_eq!(parse_nanos("1.5Gi"), Some(1_610_612_736 * GIGA));
        assert_eq!(parse_nanos("2e3"), Some(2000 * GIGA));
        assert_eq!(parse_nanos("1E-3"), Some(GIGA / 1000));
        assert_eq!(parse_nanos("1k"), parse_nanos("1000"));
        assert_eq!(parse_nanos("-1"), Some(-GIGA));
        assert_eq!(parse_nanos("0"), Some(0));
        assert_eq!(parse_nanos("1n"), Some(1));
    }

    #[test]
    fn quantity_finer_than_nano_rounds_up_and_garbage_is_rejected() {
        assert_eq!(parse_nanos("0.0000000001"), Some(1));
        for bad in ["", "m", "1x", "1.2.3", "--1", "1e", "1e99999", "."] {
            assert_eq!(parse_nanos(bad), None, "{bad:?}");
        }
    }
}
