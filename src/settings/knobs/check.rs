//! The one check every knob's value goes through, from a flag or from a file: raw text or
//! TOML in, a typed [`Value`] or a [`Refusal`] out, one function per kind of knob.

use super::{Kind, Knob, PER_DAY_RANGE};

/// A value as it arrives, before the knob's check: flag text, or a TOML scalar.
#[derive(Debug, Clone, PartialEq)]
pub enum Raw {
    Text(String),
    Float(f64),
    Int(i64),
    Bool(bool),
    Other(String),
    List(Vec<Raw>),
}

/// A value that passed its knob's check.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Duration(std::time::Duration),
    Number(f64),
    Count(u64),
    Choice(&'static str),
    Path(std::path::PathBuf),
    Size(crate::payload::SizeDist),
    Switch(bool),
    List(Vec<Value>),
}

/// Why a value was refused; `unreadable` when it is not even of the right form (a column then
/// points at it), otherwise it is out of range.
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    pub message: String,
    pub unreadable: bool,
}

fn unreadable(message: String) -> Refusal {
    Refusal {
        message,
        unreadable: true,
    }
}
fn out_of_range(message: String) -> Refusal {
    Refusal {
        message,
        unreadable: false,
    }
}

fn number_text(text: &str) -> Result<f64, Refusal> {
    let t = text.trim();
    let v: f64 = t
        .parse()
        .map_err(|_| unreadable(format!("`{text}` is not a number")))?;
    if !v.is_finite() {
        return Err(out_of_range(format!("`{text}` is not a finite number")));
    }
    Ok(v)
}

/// A subnormal number (`1e-320`) passes "> 0" but is no quantity anyone means: it rounds
/// every figure it touches to zero, so every numeric knob refuses it.
fn not_subnormal(v: f64, shown: &str) -> Result<(), Refusal> {
    if v.is_subnormal() {
        return Err(out_of_range(format!(
            "{shown} is too small to mean anything (a subnormal number, below {:e})",
            f64::MIN_POSITIVE
        )));
    }
    Ok(())
}

impl Knob {
    /// The one check every value of this knob goes through, from a flag or from a file.
    pub fn check(&self, raw: &Raw) -> Result<Value, Refusal> {
        if let Some(max) = self.list_max {
            let items: Vec<Raw> = match raw {
                Raw::List(items) => items.clone(),
                Raw::Text(t) => t
                    .split(',')
                    .map(|s| Raw::Text(s.trim().to_string()))
                    .collect(),
                other => vec![other.clone()],
            };
            if items.is_empty() {
                return Err(out_of_range("give at least one value".into()));
            }
            if items.len() > max {
                return Err(out_of_range(format!("at most {max} values")));
            }
            return items
                .iter()
                .map(|r| self.check_one(r))
                .collect::<Result<Vec<_>, _>>()
                .map(Value::List);
        }
        self.check_one(raw)
    }

    fn check_one(&self, raw: &Raw) -> Result<Value, Refusal> {
        let shown = match raw {
            Raw::Text(t) => t.clone(),
            Raw::Float(f) => f.to_string(),
            Raw::Int(i) => i.to_string(),
            Raw::Bool(b) => b.to_string(),
            Raw::Other(o) => o.clone(),
            Raw::List(_) => "a list".into(),
        };
        match self.kind {
            Kind::Duration {
                above_zero,
                min,
                max_s,
            } => duration(raw, &shown, above_zero, min, max_s),
            Kind::Number {
                min,
                above_min,
                max,
            } => number(raw, &shown, min, above_min, max),
            Kind::Fraction => fraction(raw, &shown),
            Kind::Count { min, max } => count(raw, &shown, min, max),
            Kind::Choice(words) => choice(raw, &shown, words),
            Kind::PerDay => per_day(raw, &shown),
            Kind::Size => size(raw, &shown),
            Kind::Path => match raw {
                Raw::Text(t) if !t.trim().is_empty() => Ok(Value::Path(t.into())),
                _ => Err(unreadable(format!("{shown} is not a file path"))),
            },
            Kind::Switch => match raw {
                Raw::Bool(b) => Ok(Value::Switch(*b)),
                Raw::Text(t) if t == "true" || t == "false" => Ok(Value::Switch(t == "true")),
                _ => Err(unreadable(format!("{shown} is not true or false"))),
            },
        }
    }
}

fn duration(
    raw: &Raw,
    shown: &str,
    above_zero: bool,
    min: Option<(f64, &str)>,
    max_s: f64,
) -> Result<Value, Refusal> {
    let Raw::Text(text) = raw else {
        return Err(unreadable(format!(
            "{shown} is not a duration: write it as a string like \"250ms\", \"30s\" or \"24h\""
        )));
    };
    let d = crate::duration::parse(text).map_err(|e| unreadable(e.to_string()))?;
    if above_zero && d.is_zero() {
        return Err(out_of_range(format!("must be longer than 0s, not {text}")));
    }
    if let Some((min_s, why)) = min
        && d.as_secs_f64() < min_s
    {
        return Err(out_of_range(format!(
            "{text} is shorter than the {} limit: {why}",
            crate::duration::format_secs(min_s)
        )));
    }
    if d.as_secs_f64() > max_s {
        return Err(out_of_range(format!(
            "{text} is longer than the {} limit",
            crate::duration::format_secs(max_s)
        )));
    }
    Ok(Value::Duration(d))
}

fn number(raw: &Raw, shown: &str, min: f64, above_min: bool, max: f64) -> Result<Value, Refusal> {
    let v = match raw {
        Raw::Text(t) => number_text(t)?,
        Raw::Float(f) => *f,
        Raw::Int(i) => *i as f64,
        _ => return Err(unreadable(format!("{shown} is not a number"))),
    };
    let low_ok = if above_min { v > min } else { v >= min };
    not_subnormal(v, shown)?;
    if !(v.is_finite() && low_ok && v <= max) {
        let low = if above_min { "above" } else { "at least" };
        return Err(out_of_range(format!(
            "{shown} is out of range: must be {low} {min} and at most {max}"
        )));
    }
    Ok(Value::Number(v))
}

fn fraction(raw: &Raw, shown: &str) -> Result<Value, Refusal> {
    let v = match raw {
        Raw::Text(t) => match t.trim().strip_suffix('%') {
            Some(p) => number_text(p)? / 100.0,
            None => number_text(t)?,
        },
        Raw::Float(f) => *f,
        Raw::Int(i) => *i as f64,
        _ => return Err(unreadable(format!("{shown} is not a fraction"))),
    };
    not_subnormal(v, shown)?;
    if !(0.0..=1.0).contains(&v) {
        return Err(out_of_range(format!(
            "must be a fraction from 0 to 1 (e.g. 0.001 or 0.1%), not {shown}"
        )));
    }
    Ok(Value::Number(v))
}

fn count(raw: &Raw, shown: &str, min: u64, max: u64) -> Result<Value, Refusal> {
    let v: u64 =
        match raw {
            Raw::Text(t) => t.trim().parse().map_err(|_| {
                unreadable(format!("`{t}` is not a whole number from {min} to {max}"))
            })?,
            Raw::Int(i) => u64::try_from(*i)
                .map_err(|_| out_of_range(format!("{i} is outside {min}..={max}")))?,
            _ => {
                return Err(unreadable(format!(
                    "{shown} is not a whole number from {min} to {max}"
                )));
            }
        };
    if !(min..=max).contains(&v) {
        return Err(out_of_range(format!("{v} is outside {min}..={max}")));
    }
    Ok(Value::Count(v))
}

fn choice(raw: &Raw, shown: &str, words: &'static [&'static str]) -> Result<Value, Refusal> {
    let Raw::Text(t) = raw else {
        return Err(unreadable(format!(
            "{shown} is not one of {}",
            words.join(", ")
        )));
    };
    let norm = t.trim().replace('-', "_");
    words
        .iter()
        .find(|w| **w == norm)
        .map(|w| Value::Choice(w))
        .ok_or_else(|| unreadable(format!("`{t}` is not one of {}", words.join(", "))))
}

fn per_day(raw: &Raw, shown: &str) -> Result<Value, Refusal> {
    let (lo, hi) = PER_DAY_RANGE;
    let v = match raw {
        Raw::Text(t) => crate::decision::parse_per_day(t).map_err(unreadable)?,
        Raw::Float(f) => *f,
        Raw::Int(i) => *i as f64,
        _ => return Err(unreadable(format!("{shown} is not a rate per day"))),
    };
    not_subnormal(v, shown)?;
    if !(v.is_finite() && (lo..=hi).contains(&v)) {
        return Err(out_of_range(format!(
            "{shown} is out of range: must be at least 0 and at most 1e12 a day"
        )));
    }
    Ok(Value::Number(v))
}

fn size(raw: &Raw, shown: &str) -> Result<Value, Refusal> {
    let parsed = match raw {
        Raw::Text(t) => crate::payload::SizeDist::parse(t),
        Raw::Int(i) => crate::payload::SizeDist::parse(&i.to_string()),
        Raw::Float(f) => crate::payload::SizeDist::parse(&f.to_string()),
        Raw::Other(o) => {
            #[derive(serde::Deserialize)]
            struct Wrap {
                v: crate::payload::SizeDist,
            }
            toml::from_str::<Wrap>(&format!("v = {o}"))
                .map(|w| w.v)
                .map_err(|e| e.message().to_string())
        }
        Raw::List(_) | Raw::Bool(_) => Err(format!("{shown} is not a size")),
    };
    parsed.map(Value::Size).map_err(unreadable)
}
