//! How big a key and a saved response are: the two payload sizes that decide most of a record.
//!
//! The seed's ~512 B record is "a key of up to ~36 B, 32 B hash, ~300 B saved response, the rest
//! row and index overhead". Both sizes are inputs here, as a [`SizeDist`]: the engine pads the
//! saved 201 body to a size drawn from one, the simulator's derived keys are padded to a length
//! drawn from the other, and the model adds their means (see [`crate::model::record_bytes`]), so
//! "bytes per record" means the same thing in all three.
//!
//! Every draw comes from a hash of the key, not from an rng: the same key always gets the same
//! body and length, so a replay is byte-identical and adding sizes does not shift any other
//! random stream of a simulation.

use serde::{Deserialize, Serialize};

use crate::model::{SEED_KEY_BYTES, SEED_RESPONSE_BYTES};

/// The seed's limit, as Stripe's: keys up to 255 characters. Longer keys are refused rather than
/// truncated, since two keys that share 255 bytes would otherwise collide.
pub const MAX_KEY_BYTES: usize = 255;

/// Largest size any distribution may ask for, bytes: a saved response beyond 16 MB is a bug in
/// the input, not a label.
pub const MAX_SIZE_BYTES: f64 = 16e6;

/// A size in bytes as a distribution: fixed, log-normal by its median and p99, or an empirical
/// histogram of `(bytes, count)` points (what `idemcalc fit` writes).
///
/// In a scenario file: `300`, `"2kB"`, `{ median = "300B", p99 = "2kB" }` or
/// `{ histogram = [[120, 40], [310, 900], [2048, 60]] }`.
#[derive(Debug, Clone, PartialEq)]
pub enum SizeDist {
    Fixed { bytes: f64 },
    LogNormal { median_bytes: f64, p99_bytes: f64 },
    Histogram { points: Vec<(f64, f64)> },
}

impl SizeDist {
    /// The seed's key, ~36 B (a UUID's text).
    pub fn seed_key() -> Self {
        SizeDist::Fixed {
            bytes: SEED_KEY_BYTES,
        }
    }

    /// The seed's saved response, ~300 B.
    pub fn seed_response() -> Self {
        SizeDist::Fixed {
            bytes: SEED_RESPONSE_BYTES,
        }
    }

    /// Refuses sizes that cannot be: not above 0, beyond [`MAX_SIZE_BYTES`], a p99 below its
    /// median, a histogram with no weight.
    pub fn validate(&self) -> Result<(), String> {
        let ok = |b: f64| b > 0.0 && b <= MAX_SIZE_BYTES;
        match self {
            SizeDist::Fixed { bytes } if !ok(*bytes) => {
                Err(format!("{bytes} B is not a size between 1 B and 16 MB"))
            }
            SizeDist::LogNormal {
                median_bytes,
                p99_bytes,
            } if !(ok(*median_bytes) && ok(*p99_bytes) && p99_bytes >= median_bytes) => {
                Err(format!(
                    "median {median_bytes} B and p99 {p99_bytes} B: both must be 1 B to 16 MB and the p99 not below the median"
                ))
            }
            SizeDist::Histogram { points } => {
                if points.is_empty() || points.iter().map(|p| p.1).sum::<f64>() <= 0.0 {
                    return Err("a histogram needs at least one point with a count above 0".into());
                }
                match points
                    .iter()
                    .find(|(b, c)| !(ok(*b) && *c >= 0.0 && c.is_finite()))
                {
                    Some((b, c)) => Err(format!(
                        "histogram point [{b}, {c}]: sizes must be 1 B to 16 MB and counts 0 or more"
                    )),
                    None => Ok(()),
                }
            }
            _ => Ok(()),
        }
    }

    fn sigma(median_bytes: f64, p99_bytes: f64) -> f64 {
        crate::stats::log_normal_sigma(median_bytes, p99_bytes)
    }

    /// The mean size, bytes: what a record holds on average, hence what the model adds.
    pub fn mean_bytes(&self) -> f64 {
        match self {
            SizeDist::Fixed { bytes } => *bytes,
            SizeDist::LogNormal {
                median_bytes,
                p99_bytes,
            } => {
                let s = Self::sigma(*median_bytes, *p99_bytes);
                median_bytes * (s * s / 2.0).exp()
            }
            SizeDist::Histogram { points } => {
                let n: f64 = points.iter().map(|p| p.1).sum();
                points.iter().map(|(b, c)| b * c).sum::<f64>() / n
            }
        }
    }

    /// The size at cumulative probability `u` in [0, 1).
    pub fn quantile(&self, u: f64) -> f64 {
        let u = u.clamp(1e-9, 1.0 - 1e-9);
        match self {
            SizeDist::Fixed { bytes } => *bytes,
            SizeDist::LogNormal {
                median_bytes,
                p99_bytes,
            } => {
                use statrs::distribution::{ContinuousCDF as _, Normal};
                let z = Normal::standard().inverse_cdf(u);
                (median_bytes * (Self::sigma(*median_bytes, *p99_bytes) * z).exp())
                    .min(MAX_SIZE_BYTES)
            }
            SizeDist::Histogram { points } => {
                let n: f64 = points.iter().map(|p| p.1).sum();
                let mut acc = 0.0;
                for (b, c) in points {
                    acc += c / n;
                    if u < acc {
                        return *b;
                    }
                }
                points.last().map_or(0.0, |p| p.0)
            }
        }
    }

    /// A size as a flag gives it: `300`, `300B`, `2kB`, or `median=300B,p99=2kB`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let t = text.trim();
        let dist = if t.contains('=') {
            let mut median = None;
            let mut p99 = None;
            for part in t.split(',') {
                let (k, v) = part
                    .split_once('=')
                    .ok_or_else(|| format!("`{part}` in `{text}` is not NAME=SIZE"))?;
                match k.trim() {
                    "median" => median = Some(parse_bytes(v)?),
                    "p99" => p99 = Some(parse_bytes(v)?),
                    other => {
                        return Err(format!("`{other}` in `{text}`: write median=SIZE,p99=SIZE"));
                    }
                }
            }
            match (median, p99) {
                (Some(median_bytes), Some(p99_bytes)) => SizeDist::LogNormal {
                    median_bytes,
                    p99_bytes,
                },
                _ => return Err(format!("`{text}` needs both median= and p99=")),
            }
        } else {
            SizeDist::Fixed {
                bytes: parse_bytes(t)?,
            }
        };
        dist.validate().map_err(|e| format!("`{text}`: {e}"))?;
        Ok(dist)
    }

    /// One line for tables: `300 B`, `median 300 B, p99 2 kB`, `histogram of 12 sizes`.
    pub fn describe(&self) -> String {
        use crate::format::human_bytes;
        match self {
            SizeDist::Fixed { bytes } => human_bytes(*bytes),
            SizeDist::LogNormal {
                median_bytes,
                p99_bytes,
            } => format!(
                "median {}, p99 {}",
                human_bytes(*median_bytes),
                human_bytes(*p99_bytes)
            ),
            SizeDist::Histogram { points } => format!(
                "histogram of {} sizes, mean {}",
                points.len(),
                human_bytes(self.mean_bytes())
            ),
        }
    }
}

/// `300`, `300B`, `2kB`, `1.5 MB`, `4KiB`: decimal units as the seed counts (1 kB = 1000 B),
/// binary ones when asked for.
pub fn parse_bytes(text: &str) -> Result<f64, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("`{text}` is not a size; write it like 300, 300B, 2kB or 4KiB"))?;
    let factor = match unit.trim() {
        "" | "B" | "b" => 1.0,
        "kB" | "KB" | "k" | "K" | "kb" => 1e3,
        "MB" | "M" | "mb" => 1e6,
        "GB" | "G" | "gb" => 1e9,
        "TB" | "T" | "tb" => 1e12,
        "KiB" => 1024.0,
        "MiB" => 1024.0 * 1024.0,
        "GiB" => 1024.0 * 1024.0 * 1024.0,
        other => {
            return Err(format!(
                "`{other}` in `{text}` is not a unit; use B, kB, MB, GB, TB, KiB, MiB or GiB"
            ));
        }
    };
    Ok(value * factor)
}

/// The serde shapes of [`SizeDist`], see its doc.
#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum RawSize {
    Number(f64),
    Text(String),
    LogNormal { median: RawBytes, p99: RawBytes },
    Histogram { histogram: Vec<(f64, f64)> },
}

#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum RawBytes {
    Number(f64),
    Text(String),
}

impl RawBytes {
    fn bytes(&self) -> Result<f64, String> {
        match self {
            RawBytes::Number(b) => Ok(*b),
            RawBytes::Text(t) => parse_bytes(t),
        }
    }
}

impl Serialize for SizeDist {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            SizeDist::Fixed { bytes } => RawSize::Number(*bytes),
            SizeDist::LogNormal {
                median_bytes,
                p99_bytes,
            } => RawSize::LogNormal {
                median: RawBytes::Number(*median_bytes),
                p99: RawBytes::Number(*p99_bytes),
            },
            SizeDist::Histogram { points } => RawSize::Histogram {
                histogram: points.clone(),
            },
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for SizeDist {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error as _;
        let raw = RawSize::deserialize(d).map_err(|_| {
            D::Error::custom(
                "expected a size: 300, \"2kB\", { median = \"300B\", p99 = \"2kB\" } or { histogram = [[bytes, count], …] }",
            )
        })?;
        let dist = match raw {
            RawSize::Number(bytes) => SizeDist::Fixed { bytes },
            RawSize::Text(t) => SizeDist::Fixed {
                bytes: parse_bytes(&t).map_err(D::Error::custom)?,
            },
            RawSize::LogNormal { median, p99 } => SizeDist::LogNormal {
                median_bytes: median.bytes().map_err(D::Error::custom)?,
                p99_bytes: p99.bytes().map_err(D::Error::custom)?,
            },
            RawSize::Histogram { histogram } => SizeDist::Histogram { points: histogram },
        };
        dist.validate().map_err(D::Error::custom)?;
        Ok(dist)
    }
}

/// The two payload sizes a record carries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PayloadSizes {
    /// Idempotency-key length, bytes.
    pub key_bytes: SizeDist,
    /// Saved 201 response body, bytes.
    pub response_bytes: SizeDist,
}

impl Default for PayloadSizes {
    fn default() -> Self {
        PayloadSizes {
            key_bytes: SizeDist::seed_key(),
            response_bytes: SizeDist::seed_response(),
        }
    }
}

impl PayloadSizes {
    /// Bytes per record the model assumes for these sizes.
    pub fn record_bytes(&self) -> f64 {
        crate::model::record_bytes(
            self.key_bytes.mean_bytes(),
            self.response_bytes.mean_bytes(),
        )
    }
}

/// FNV-1a, 64 bits: stable across platforms and releases, unlike `DefaultHasher`.
pub fn fnv64(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for &b in *part {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        // A separator, so ("ab", "c") and ("a", "bc") differ.
        h ^= 0xff;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// A uniform draw in [0, 1) from a hash.
fn unit(h: u64) -> f64 {
    // splitmix64's finaliser spreads FNV's low-entropy high bits.
    let mut z = h.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

/// Deterministic filler text of `len` characters from `seed` (URL-safe base64 alphabet).
fn filler(seed: u64, len: usize) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            // xorshift64: cheap, and only has to look like data.
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            ALPHABET[(x & 63) as usize] as char
        })
        .collect()
}

/// The derived key of one parcel (`label:ORDER:1:v1`), padded with a stable suffix to a length
/// drawn from `sizes` for this order, so that one intent keeps one key across every attempt.
pub fn derived_key(order_id: i64, sizes: &SizeDist) -> String {
    let base = format!("label:{order_id}:1:v1");
    let h = fnv64(&[b"key", &order_id.to_le_bytes()]);
    let target = (sizes.quantile(unit(h)).round() as usize).min(MAX_KEY_BYTES);
    if target <= base.len() + 1 {
        return base;
    }
    let suffix = filler(h, target - base.len() - 1);
    format!("{base}:{suffix}")
}

/// The size a saved response for this key should have, bytes.
pub fn response_target_bytes(idem_key: &str, order_id: i64, sizes: &SizeDist) -> usize {
    let h = fnv64(&[b"response", idem_key.as_bytes(), &order_id.to_le_bytes()]);
    sizes.quantile(unit(h)).round().max(0.0) as usize
}

/// Filler for a response of `len` characters, stable for the key.
pub fn response_filler(idem_key: &str, order_id: i64, len: usize) -> String {
    filler(
        fnv64(&[b"filler", idem_key.as_bytes(), &order_id.to_le_bytes()]),
        len,
    )
}

/// A stand-in timestamp for a label, stable for the key: the body needs realistic sizes and
/// byte-identical replays, not a true clock (the record's own `created_at` holds that).
pub fn label_timestamp(idem_key: &str, order_id: i64) -> String {
    let h = fnv64(&[b"ts", idem_key.as_bytes(), &order_id.to_le_bytes()]);
    let s = h % 86_400;
    // Written by hand: `format!` with three padded fields cost more than the rest of the body.
    let mut t = String::with_capacity(20);
    t.push_str("2026-09-30T");
    for (i, field) in [s / 3600, (s / 60) % 60, s % 60].into_iter().enumerate() {
        if i > 0 {
            t.push(':');
        }
        t.push(char::from(b'0' + (field / 10) as u8));
        t.push(char::from(b'0' + (field % 10) as u8));
    }
    t.push('Z');
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_timestamps_are_rfc_3339_times_of_one_day() {
        for (key, order) in [("label:1:1:v1", 1), ("k", 918_273), ("", -5)] {
            let t = label_timestamp(key, order);
            let s = fnv64(&[b"ts", key.as_bytes(), &order.to_le_bytes()]) % 86_400;
            let want = format!(
                "2026-09-30T{:02}:{:02}:{:02}Z",
                s / 3600,
                (s / 60) % 60,
                s % 60
            );
            assert_eq!(t, want);
        }
    }

    #[test]
    fn sizes_parse_in_decimal_and_binary_units() {
        assert_eq!(parse_bytes("300").unwrap(), 300.0);
        assert_eq!(parse_bytes("2kB").unwrap(), 2000.0);
        assert_eq!(parse_bytes("4KiB").unwrap(), 4096.0);
        assert_eq!(parse_bytes(" 25 GB ").unwrap(), 25e9);
        assert!(parse_bytes("lots").is_err());
        assert!(parse_bytes("3 parsecs").unwrap_err().contains("parsecs"));
    }

    #[test]
    fn log_normal_has_its_median_and_p99() {
        let d = SizeDist::parse("median=300B,p99=2kB").unwrap();
        assert!((d.quantile(0.5) - 300.0).abs() < 1e-6);
        assert!((d.quantile(0.99) - 2000.0).abs() < 1e-3);
        assert!(d.mean_bytes() > 300.0);
        assert!(SizeDist::parse("median=3kB,p99=2kB").is_err());
    }

    #[test]
    fn seed_sizes_give_the_seeds_512_bytes() {
        assert_eq!(PayloadSizes::default().record_bytes(), 512.0);
    }

    #[test]
    fn a_derived_key_is_stable_and_as_long_as_asked() {
        let d = SizeDist::seed_key();
        let k = derived_key(918_273, &d);
        assert_eq!(k, derived_key(918_273, &d));
        assert_eq!(k.len(), 36);
        assert!(k.starts_with("label:918273:1:v1:"));
        let short = SizeDist::Fixed { bytes: 10.0 };
        assert_eq!(derived_key(918_273, &short), "label:918273:1:v1");
    }

    #[test]
    fn scenario_shapes_round_trip() {
        for text in [
            "x = 300.0",
            "x = { median = 300.0, p99 = 2000.0 }",
            "x = { histogram = [[120.0, 4.0], [300.0, 90.0]] }",
        ] {
            #[derive(Serialize, Deserialize, PartialEq, Debug)]
            struct W {
                x: SizeDist,
            }
            let w: W = toml::from_str(text).unwrap();
            let again: W = toml::from_str(&toml::to_string(&w).unwrap()).unwrap();
            assert_eq!(w, again, "{text}");
        }
        #[derive(Deserialize, Debug)]
        struct W {
            #[allow(dead_code)]
            x: SizeDist,
        }
        assert!(toml::from_str::<W>("x = \"2kB\"").is_ok());
        assert!(toml::from_str::<W>("x = { median = \"300B\", p99 = \"2kB\" }").is_ok());
        assert!(toml::from_str::<W>("x = -4").is_err());
    }
}
