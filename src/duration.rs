//! Durations as people write them (`30s`, `90m`, `24h`, `3d`, `31.8s`): the one parser and the
//! one formatter.
//!
//! Everything user-facing takes durations in this one format so that a flag, a scenario file and
//! a CSV of retry delays all read alike. The parser never panics: a value too large for the
//! simulator's millisecond clock is refused as text, not converted (`2^64 s` used to abort the
//! process in `Duration::from_secs_f64`).

use std::time::Duration;

/// Seconds in a day: the period of a daily load profile and the unit of every "per day"
/// figure; retentions, windows and daily counts are measured in it.
pub const DAY_S: f64 = 86_400.0;
/// One day in the engine's and the clock's milliseconds.
pub const DAY_MS: i64 = 86_400_000;

/// The longest duration anything accepts: 100 years. Per-setting limits (settings::knobs) are
/// tighter; this one only guarantees that milliseconds fit an `i64` with room to add.
pub const MAX_S: f64 = 100.0 * 365.0 * DAY_S;

/// A duration that could not be parsed; carries the offending text so callers can name it.
#[derive(Debug, thiserror::Error)]
#[error("`{text}` is not a duration (write it like 250ms, 30s, 90m, 24h or 3d){}", why.map(|w| format!(": {w}")).unwrap_or_default())]
pub struct DurationError {
    pub text: String,
    why: Option<&'static str>,
}

/// Parses `250ms`, `30s`, `31.8s`, `90m`, `24h`, `3d` and humantime's compound forms (`1h 30m`).
///
/// Decimal values are accepted because the seed's timelines are written in tenths of a second.
/// Anything above [`MAX_S`], negative, NaN or infinite is refused.
pub fn parse(text: &str) -> Result<Duration, DurationError> {
    let err = |why| DurationError {
        text: text.to_string(),
        why,
    };
    let t = text.trim();
    if t.is_empty() {
        return Err(err(Some("empty")));
    }
    let d = match humantime::parse_duration(t) {
        Ok(d) => d,
        Err(_) => {
            let split = t
                .find(|c: char| !(c.is_ascii_digit() || c == '.'))
                .ok_or_else(|| err(Some("no unit")))?;
            let (num, unit) = t.split_at(split);
            let value: f64 = num.parse().map_err(|_| err(None))?;
            let unit_s = match unit.trim() {
                "ms" => 1e-3,
                "s" => 1.0,
                "m" | "min" => 60.0,
                "h" => 3600.0,
                "d" => DAY_S,
                _ => return Err(err(None)),
            };
            let secs = value * unit_s;
            if !(secs.is_finite() && secs >= 0.0) {
                return Err(err(None));
            }
            if secs > MAX_S {
                return Err(err(Some("longer than 100 years")));
            }
            Duration::try_from_secs_f64(secs).map_err(|_| err(None))?
        }
    };
    if d.as_secs_f64() > MAX_S {
        return Err(err(Some("longer than 100 years")));
    }
    Ok(d)
}

/// Whole milliseconds, the simulator's clock unit. Saturates instead of wrapping, although a
/// parsed duration (at most [`MAX_S`]) never comes near `i64::MAX`.
pub fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// Formats seconds the way [`parse`] reads them: the largest unit that divides evenly, but
/// hours below two days, because people say "a 24 h purge", not "a 1 d purge"
/// (`86_400.0` → `24h`, `129_600.0` → `36h`, `259_200.0` → `3d`, `0.25` → `250ms`). Exact:
/// what a scenario file and a JSON identifier need, so a value no unit divides keeps all its
/// digits (`118022.4s`); text for people goes through [`format_readable`].
pub fn format_secs(secs: f64) -> String {
    format_exact(secs).unwrap_or_else(|| format!("{secs}s"))
}

/// A duration for people: [`format_secs`]'s round form when a unit divides it (`24h`, `3d`,
/// `90m`), else the four figures of [`format_approx`] (`1.366d`, never `118022.4s`). A
/// fitted horizon or a retention the user typed oddly reaches the decision card through here,
/// and a six-digit count of seconds is a number nobody reads as a day and a third.
pub fn format_readable(secs: f64) -> String {
    format_exact(secs).unwrap_or_else(|| format_approx(secs))
}

/// `secs` in the largest unit that divides it evenly (hours below two days), if one does.
fn format_exact(secs: f64) -> Option<String> {
    let hours = secs / 3_600.0;
    if (1.0..48.0).contains(&hours) && (hours - hours.round()).abs() < 1e-9 {
        return Some(format!("{}h", hours.round() as u64));
    }
    const UNITS: [(&str, f64); 4] = [("d", DAY_S), ("h", 3600.0), ("m", 60.0), ("s", 1.0)];
    for (name, size) in UNITS {
        let n = secs / size;
        if n >= 1.0 && (n - n.round()).abs() < 1e-9 {
            return Some(format!("{}{name}", n.round() as u64));
        }
    }
    if secs < 1.0 && secs > 0.0 {
        let ms = secs * 1000.0;
        if (ms - ms.round()).abs() < 1e-9 {
            return Some(format!("{}ms", ms.round() as u64));
        }
    }
    None
}

/// The units of a measured duration, largest first, with their length in seconds.
const APPROX_UNITS: [(&str, f64); 4] = [("d", DAY_S), ("h", 3_600.0), ("m", 60.0), ("s", 1.0)];

/// The unit [`format_approx`] writes `secs` in: the largest that keeps it at 1 or above
/// (milliseconds below a second), as its name and its length in seconds.
fn approx_unit(secs: f64) -> (&'static str, f64) {
    APPROX_UNITS
        .iter()
        .copied()
        .find(|(_, size)| secs >= *size)
        .unwrap_or(("ms", 1e-3))
}

/// A measured duration in the largest unit that keeps it above 1, to four significant
/// figures (`2.695d`, `4h`, `263ms`): readable, and parsed back by [`parse`]. Anything not
/// above zero (or not finite) is `0s`.
pub fn format_approx(secs: f64) -> String {
    if !(secs.is_finite() && secs > 0.0) {
        return "0s".into();
    }
    let (name, size) = approx_unit(secs);
    format!("{}{name}", four_figures(secs / size))
}

/// The smallest duration at or above `secs` that [`format_approx`] writes exactly (four
/// figures in its unit): `121_999.0` (1.41203d) → `1.413d`'s seconds. A bound written for
/// people, such as a fitted distribution's horizon, must not round below the value it bounds:
/// a horizon printed a few seconds short of the latest retry a log holds would claim that
/// retry is beyond it. A value already on the grid (up to float noise) stays.
pub fn round_up_approx(secs: f64) -> f64 {
    if !(secs.is_finite() && secs > 0.0) {
        return 0.0;
    }
    let (_, size) = approx_unit(secs);
    let value = secs / size;
    let magnitude = value.log10().floor() as i32;
    let scale = 10f64.powi(3 - magnitude);
    let scaled = value * scale;
    let up = if (scaled - scaled.round()).abs() <= 1e-9 * scaled {
        scaled.round()
    } else {
        scaled.ceil()
    };
    // Division by a power of ten written as a decimal gives the double `parse` reads back.
    up / scale * size
}

/// A part and its whole in one unit (`20.11h of 108h`, not `72406s of 108h`), so the two
/// read against each other: `(part, whole)`. The unit is the whole's, or a smaller one while
/// the part would be under 1 and the whole stays under 1,000 in it.
pub fn format_approx_pair(part_s: f64, whole_s: f64) -> (String, String) {
    let whole_s = whole_s.max(part_s);
    let mut i = APPROX_UNITS
        .iter()
        .position(|(_, size)| whole_s >= *size)
        .unwrap_or(APPROX_UNITS.len() - 1);
    while i + 1 < APPROX_UNITS.len()
        && part_s < APPROX_UNITS[i].1
        && whole_s / APPROX_UNITS[i + 1].1 < 1_000.0
    {
        i += 1;
    }
    let (name, size) = APPROX_UNITS[i];
    let one = |secs: f64| {
        if secs.is_finite() && secs > 0.0 {
            format!("{}{name}", four_figures(secs / size))
        } else {
            "0s".to_string()
        }
    };
    (one(part_s), one(whole_s))
}

/// `value` to four significant figures, trailing zeros dropped (`31.1600` → `31.16`, `4.000`
/// → `4`). `format::significant` does this for every other quantity; it sits above this
/// module (it formats durations through it), so the one digit rule a duration needs is here.
fn four_figures(value: f64) -> String {
    let magnitude = value.abs().log10().floor() as i32;
    let decimals = (3 - magnitude).max(0) as usize;
    let mut text = format!("{value:.decimals$}");
    // Rounding can carry into a new digit (9.9996 → 10.000): one decimal fewer then.
    let rounded: f64 = text.parse().unwrap_or(value);
    if rounded.abs().log10().floor() as i32 > magnitude && decimals > 0 {
        let decimals = decimals - 1;
        text = format!("{rounded:.decimals$}");
    }
    if text.contains('.') {
        text = text.trim_end_matches('0').trim_end_matches('.').to_string();
    }
    text
}

/// A clap value parser, for flags outside the settings table (e.g. `bench --duration`).
pub fn clap_parse(text: &str) -> Result<Duration, String> {
    parse(text).map_err(|e| e.to_string())
}

/// Serde support: durations in scenario files are strings like `"24h"`.
pub mod serde_str {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&super::format_secs(d.as_secs_f64()))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let text = String::deserialize(d)?;
        super::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// Like `serde_str`, for an optional duration.
pub mod serde_opt {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => super::serde_str::serialize(d, s),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        let text = Option::<String>::deserialize(d)?;
        text.map(|t| super::parse(&t).map_err(serde::de::Error::custom))
            .transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_forms_people_write() {
        assert_eq!(parse("30s").unwrap(), Duration::from_secs(30));
        assert_eq!(parse("90m").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse("24h").unwrap(), Duration::from_secs(86_400));
        assert_eq!(parse("3d").unwrap(), Duration::from_secs(259_200));
        assert_eq!(parse("31.8s").unwrap(), Duration::from_millis(31_800));
        assert_eq!(parse("250ms").unwrap(), Duration::from_millis(250));
    }

    #[test]
    fn refuses_what_is_not_a_duration() {
        for bad in ["", "3", "abc", "-5s", "3 parsecs", "1.2.3s"] {
            let e = parse(bad).unwrap_err();
            assert_eq!(e.text, bad);
        }
    }

    /// Issue 15: `--retention 18446744073709551616s` panicked in `Duration::from_secs_f64`.
    #[test]
    fn huge_durations_are_refused_not_a_panic() {
        for bad in [
            "18446744073709551616s",
            "18446744073709551615s",
            "1e308s",
            "99999999999999999999999999999999d",
            "101y",
            "inf s",
            "NaNs",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
        assert!(parse("36500d").is_ok(), "the limit itself is accepted");
    }

    #[test]
    fn formats_round_trip() {
        for s in ["30s", "90m", "24h", "3d", "250ms", "36h"] {
            let d = parse(s).unwrap();
            assert_eq!(parse(&format_secs(d.as_secs_f64())).unwrap(), d);
            assert_eq!(format_secs(d.as_secs_f64()), s);
        }
        assert_eq!(format_secs(172_800.0), "2d");
        assert_eq!(format_secs(5400.0), "90m");
    }

    #[test]
    fn measured_durations_read_in_one_unit() {
        assert_eq!(format_approx(232_848.0), "2.695d");
        assert_eq!(format_approx(14_400.0), "4h");
        assert_eq!(format_approx(0.263), "263ms");
        assert_eq!(format_approx(0.0), "0s");
        assert_eq!(format_approx(59.9999), "60s");
        // Issue 36, item 7 of the page: "72406s of 108h" mixed units.
        assert_eq!(
            format_approx_pair(72_406.0, 388_800.0),
            ("20.11h".to_string(), "108h".to_string())
        );
        assert_eq!(
            format_approx_pair(129_600.0, 2_692_336.0),
            ("1.5d".to_string(), "31.16d".to_string())
        );
        for secs in [0.263, 72_406.0, 232_848.0] {
            let back = parse(&format_approx(secs)).unwrap().as_secs_f64();
            assert!((back / secs - 1.0).abs() < 1e-3, "{secs}");
        }
    }

    /// Issue 51, item 6: the decision card said "Keep keys for 118022.4s" for a fitted
    /// horizon of 1.366d.
    #[test]
    fn durations_for_people_are_round_or_four_figures() {
        assert_eq!(format_readable(118_022.4), "1.366d");
        assert_eq!(
            format_secs(118_022.4),
            "118022.4s",
            "exact where exact is needed"
        );
        for (secs, text) in [(86_400.0, "24h"), (259_200.0, "3d"), (0.25, "250ms")] {
            assert_eq!(format_readable(secs), text);
        }
        assert_eq!(format_readable(31.8), "31.8s");
        assert_eq!(format_readable(0.0), "0s");
    }

    #[test]
    fn a_bound_rounds_up_to_what_it_writes() {
        // 1.41203d would be written 1.412d, short of the value: up to 1.413d.
        let up = round_up_approx(121_999.0);
        assert_eq!(format_approx(up), "1.413d");
        assert!(up >= 121_999.0);
        // Already on the grid: unchanged, and read back exactly.
        let on = round_up_approx(121_996.8);
        assert_eq!(format_approx(on), "1.412d");
        assert!((parse("1.412d").unwrap().as_secs_f64() / on - 1.0).abs() < 1e-12);
        assert_eq!(format_approx(round_up_approx(59.9999)), "1m");
        assert_eq!(round_up_approx(0.0), 0.0);
    }
}
