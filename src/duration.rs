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
/// (`86_400.0` → `24h`, `129_600.0` → `36h`, `259_200.0` → `3d`, `0.25` → `250ms`).
pub fn format_secs(secs: f64) -> String {
    let hours = secs / 3_600.0;
    if (1.0..48.0).contains(&hours) && (hours - hours.round()).abs() < 1e-9 {
        return format!("{}h", hours.round() as u64);
    }
    const UNITS: [(&str, f64); 4] = [("d", DAY_S), ("h", 3600.0), ("m", 60.0), ("s", 1.0)];
    for (name, size) in UNITS {
        let n = secs / size;
        if n >= 1.0 && (n - n.round()).abs() < 1e-9 {
            return format!("{}{name}", n.round() as u64);
        }
    }
    if secs < 1.0 && secs > 0.0 {
        let ms = secs * 1000.0;
        if (ms - ms.round()).abs() < 1e-9 {
            return format!("{}ms", ms.round() as u64);
        }
    }
    format!("{secs}s")
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
}
