//! Numbers formatted for people, the way the seed writes them (`34.56M`, `≈ 17.7 GB`,
//! `$124,416`, `0.8%`).
//!
//! Shared by the terminal tables and the HTML report so both show the same figure the same
//! way. Machine outputs (JSON, CSV) never go through here: they carry the raw numbers.

/// Decimal byte units, because the seed (and cloud storage price lists) count 1 GB = 10⁹ B.
const BYTE_UNITS: [&str; 6] = ["B", "kB", "MB", "GB", "TB", "PB"];

/// `17_694_720_000.0` → `"17.7 GB"`, `512.0` → `"512 B"`: three significant figures is what a
/// capacity decision needs, and it matches the seed's `≈ 17.7 GB`.
pub fn human_bytes(bytes: f64) -> String {
    if !bytes.is_finite() {
        return format!("{bytes} B");
    }
    let mut value = bytes;
    let mut unit = 0;
    while value.abs() >= 999.5 && unit + 1 < BYTE_UNITS.len() {
        value /= 1000.0;
        unit += 1;
    }
    if unit == 0 {
        return format!("{} B", trim(&format!("{value:.1}")));
    }
    format!("{} {}", significant(value, 3), BYTE_UNITS[unit])
}

/// `34_560_000.0` → `"34.56M"`, `172_800_000.0` → `"172.8M"`, `34_560.0` → `"34,560"`,
/// `276.48` → `"276"`, `34.56` → `"34.6"`.
///
/// Millions and up get four significant figures and a suffix, as the seed's tables do;
/// thousands are written out with separators because that is how a daily count is read.
pub fn human_count(count: f64) -> String {
    if !count.is_finite() {
        return count.to_string();
    }
    let magnitude = count.abs();
    for (size, suffix) in [(1e12, "T"), (1e9, "B"), (1e6, "M")] {
        if magnitude >= size * 0.999_95 {
            return format!("{}{suffix}", significant(count / size, 4));
        }
    }
    if magnitude >= 999.5 {
        return thousands(count);
    }
    significant(count, 3)
}

/// `124_416.0` → `"$124,416"`, `6.0` → `"$6.00"`, `0.0583` → `"$0.06"`.
///
/// Whole dollars from $100 up, cents below: a daily cost in the thousands does not need cents,
/// a label price does.
pub fn usd(amount: f64) -> String {
    if !amount.is_finite() {
        return format!("${amount}");
    }
    let sign = if amount < 0.0 { "-" } else { "" };
    let magnitude = amount.abs();
    if magnitude >= 99.995 {
        format!("{sign}${}", thousands(magnitude))
    } else {
        format!("{sign}${magnitude:.2}")
    }
}

/// `0.001` → `"0.1%"`, `0.6` → `"60%"`, `0.975` → `"97.5%"`, `0.008000000000000007` → `"0.8%"`.
///
/// Three significant figures, but never more than one decimal at 10 % and above, so that
/// 99.92 % reads as the seed's `99.9%`.
pub fn percent(fraction: f64) -> String {
    let p = fraction * 100.0;
    if !p.is_finite() {
        return format!("{p}%");
    }
    if p.abs() >= 10.0 {
        return format!("{}%", trim(&format!("{p:.1}")));
    }
    format!("{}%", significant(p, 3))
}

/// `86_400.0` → `"86,400"`: rounds to a whole number and groups digits in threes.
pub fn thousands(value: f64) -> String {
    if !value.is_finite() {
        return value.to_string();
    }
    let rounded = value.round();
    let digits = format!("{:.0}", rounded.abs());
    let mut out = String::with_capacity(digits.len() + digits.len() / 3 + 1);
    if rounded < 0.0 {
        out.push('-');
    }
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Microseconds as people read latencies: `850 µs`, `1.25 ms`, `12.5 ms`, `250 ms`.
pub fn latency(us: u64) -> String {
    let ms = us as f64 / 1000.0;
    if us < 1000 {
        format!("{us} µs")
    } else if ms < 10.0 {
        format!("{ms:.2} ms")
    } else if ms < 100.0 {
        format!("{ms:.1} ms")
    } else {
        format!("{ms:.0} ms")
    }
}

/// `400.0` → `"400/s"`, `2000.0` → `"2,000/s"`: a request rate as the seed writes it.
pub fn rate_per_s(rate_per_s: f64) -> String {
    if rate_per_s >= 999.5 {
        format!("{}/s", thousands(rate_per_s))
    } else {
        format!("{}/s", significant(rate_per_s, 4))
    }
}

/// `86_400.0` → `"24h"`, `259_200.0` → `"3d"`, `118_022.4` → `"1.366d"`: durations go
/// through the one formatter, [`crate::duration::format_readable`], which
/// [`crate::duration::parse`] reads back; a value no unit divides is written to four figures,
/// never as a six-digit count of seconds.
pub fn human_duration(secs: f64) -> String {
    crate::duration::format_readable(secs)
}

/// A measured duration in the largest unit that keeps it above 1, to four significant
/// figures (`2.695d`, `4h`, `263ms`): [`crate::duration::format_approx`], the one formatter.
pub fn approx_duration(secs: f64) -> String {
    crate::duration::format_approx(secs)
}

/// `plural(1, "caller", "callers")` → `"1 caller"`, `plural(79_587, "intent", "intents")` →
/// `"79,587 intents"`: a count with its noun, the one way every output agrees a noun with its
/// number (never "1 callers"). Both forms are given because English plurals are not all an
/// added "s" (copy, copies).
pub fn plural(count: u64, one: &str, many: &str) -> String {
    format!("{} {}", thousands(count as f64), noun(count, one, many))
}

/// The noun alone, for a count written some other way (`2.5 GB copies` never; `3 copies`).
pub fn noun<'a>(count: u64, one: &'a str, many: &'a str) -> &'a str {
    if count == 1 { one } else { many }
}

/// `34_398.4` → `"34,398/day"`, `20.3` → `"20.3/day"`: a daily count, whole from 100 up.
pub fn per_day(count: f64) -> String {
    if count.abs() >= 100.0 {
        format!("{}/day", thousands(count))
    } else {
        format!("{count:.1}/day")
    }
}

/// `34_398.4` → `"34,398/day"`, `0.0333` → `"0.0333/day"`: a daily count in a sentence, to
/// three significant figures below 100 so a target of one a month still reads as a number.
pub fn count_per_day(count: f64) -> String {
    if count.abs() >= 100.0 {
        format!("{}/day", human_count(count))
    } else {
        format!("{}/day", significant(count, 3))
    }
}

/// `"31.4 GB – 32.1 GB"`: a 95 % interval, both ends formatted alike.
pub fn interval(low: f64, high: f64, fmt: impl Fn(f64) -> String) -> String {
    format!("{} – {}", fmt(low), fmt(high))
}

/// The 95 % interval of an estimate as people should read it: no event seen is a one-sided
/// bound (`none seen, ≤ 2.6/day`: the low end is 0 only because nothing was counted), and an
/// interval that could not be computed (infinite or NaN ends) says so, never a certain-looking
/// `0 – 0`. The terminal, `summary.md` and the page all write intervals through here.
pub fn estimate_interval(
    estimate: f64,
    low: f64,
    high: f64,
    fmt: impl Fn(f64) -> String,
) -> String {
    if !low.is_finite() || !high.is_finite() {
        NO_INTERVAL.to_string()
    } else if estimate == 0.0 && high > 0.0 {
        format!("{NONE_SEEN}, ≤ {}", fmt(high))
    } else {
        interval(low, high, fmt)
    }
}

/// What an interval that could not be computed reads as.
pub const NO_INTERVAL: &str = "no interval (see notes)";
/// The words before a one-sided bound: no event was seen.
pub const NONE_SEEN: &str = "none seen";

/// `value` to `digits` significant figures with trailing zeros dropped (`34.560` → `34.56`).
pub fn significant(value: f64, digits: u32) -> String {
    if value == 0.0 || !value.is_finite() {
        return trim(&format!("{value}"));
    }
    let magnitude = value.abs().log10().floor() as i32;
    let decimals = (digits as i32 - 1 - magnitude).max(0) as usize;
    let text = format!("{value:.decimals$}");
    // Rounding can carry into a new digit (9.995 → 10.00); one more pass fixes the count.
    let rounded: f64 = text.parse().unwrap_or(value);
    let new_magnitude = rounded.abs().log10().floor() as i32;
    if new_magnitude != magnitude {
        let decimals = (digits as i32 - 1 - new_magnitude).max(0) as usize;
        return trim(&format!("{rounded:.decimals$}"));
    }
    trim(&text)
}

/// Drops trailing zeros after a decimal point, and the point itself if nothing follows.
fn trim(text: &str) -> String {
    if !text.contains('.') {
        return text.to_string();
    }
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// How a column of a [`text_table`] lines up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    Left,
    Right,
}

/// Lines up `rows` under `header` in columns two spaces apart, indented by `indent`.
///
/// Widths count characters, not bytes, because the seed's tables use `×` and `≈`.
/// A missing alignment defaults to left; short rows are padded with blanks.
pub fn text_table(header: &[&str], rows: &[Vec<String>], align: &[Align], indent: usize) -> String {
    let columns = rows
        .iter()
        .map(Vec::len)
        .chain(std::iter::once(header.len()))
        .max()
        .unwrap_or(0);
    let mut widths = vec![0usize; columns];
    let header_row: Vec<String> = header.iter().map(|h| h.to_string()).collect();
    for row in std::iter::once(&header_row).chain(rows) {
        for (i, cell) in row.iter().enumerate() {
            widths[i] = widths[i].max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let mut emit = |row: &[String]| {
        let mut line = " ".repeat(indent);
        for (i, width) in widths.iter().enumerate() {
            let cell = row.get(i).map(String::as_str).unwrap_or("");
            let pad = width - cell.chars().count();
            if i > 0 {
                line.push_str("  ");
            }
            match align.get(i).copied().unwrap_or(Align::Left) {
                Align::Left => {
                    line.push_str(cell);
                    line.push_str(&" ".repeat(pad));
                }
                Align::Right => {
                    line.push_str(&" ".repeat(pad));
                    line.push_str(cell);
                }
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    };
    if !header.is_empty() {
        emit(&header_row);
    }
    for row in rows {
        emit(row);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latencies_read_in_their_unit() {
        assert_eq!(latency(850), "850 µs");
        assert_eq!(latency(1250), "1.25 ms");
        assert_eq!(latency(12_500), "12.5 ms");
        assert_eq!(latency(250_000), "250 ms");
    }

    #[test]
    fn bytes_like_the_seed() {
        assert_eq!(human_bytes(17_694_720_000.0), "17.7 GB");
        assert_eq!(human_bytes(88_473_600_000.0), "88.5 GB");
        assert_eq!(human_bytes(53_084_160_000.0), "53.1 GB");
        assert_eq!(human_bytes(512.0), "512 B");
        assert_eq!(human_bytes(0.0), "0 B");
        assert_eq!(human_bytes(999_999.0), "1 MB");
        assert_eq!(human_bytes(530_841_600_000.0), "531 GB");
    }

    #[test]
    fn counts_like_the_seed() {
        assert_eq!(human_count(34_560_000.0), "34.56M");
        assert_eq!(human_count(172_800_000.0), "172.8M");
        assert_eq!(human_count(34_560.0), "34,560");
        assert_eq!(human_count(20_736.0), "20,736");
        assert_eq!(human_count(276.48), "276");
        assert_eq!(human_count(34.56), "34.6");
        assert_eq!(human_count(0.0), "0");
        assert_eq!(human_count(999_999.0), "1M");
    }

    #[test]
    fn money_and_percentages() {
        assert_eq!(usd(124_416.0), "$124,416");
        assert_eq!(usd(6.0), "$6.00");
        assert_eq!(usd(0.0583), "$0.06");
        assert_eq!(usd(-1234.4), "-$1,234");
        assert_eq!(percent(0.001), "0.1%");
        assert_eq!(percent(0.6), "60%");
        assert_eq!(percent(0.975), "97.5%");
        assert_eq!(percent(1.0 - 0.992), "0.8%");
        assert_eq!(percent(0.9992), "99.9%");
        assert_eq!(rate_per_s(2000.0), "2,000/s");
        assert_eq!(rate_per_s(400.0), "400/s");
        assert_eq!(thousands(86_400.0), "86,400");
        assert_eq!(thousands(100.0), "100");
        assert_eq!(significant(9.9996, 4), "10");
        assert_eq!(human_duration(86_400.0), "24h");
        assert_eq!(human_duration(129_600.0), "36h");
        assert_eq!(human_duration(172_800.0), "2d");
        assert_eq!(human_duration(600.0), "10m");
        assert_eq!(human_duration(0.25), "250ms");
        // Issue 51, item 6: a fitted horizon on the decision card read "118022.4s".
        assert_eq!(human_duration(118_022.4), "1.366d");
        assert_eq!(per_day(34_398.4), "34,398/day");
        assert_eq!(per_day(20.34), "20.3/day");
        assert_eq!(interval(1.0, 2.0, usd), "$1.00 – $2.00");
        assert_eq!(
            estimate_interval(0.0, 0.0, 2.6, per_day),
            "none seen, ≤ 2.6/day"
        );
        assert_eq!(
            estimate_interval(1.0, f64::NAN, 2.0, per_day),
            "no interval (see notes)"
        );
        assert_eq!(
            estimate_interval(1.5, 1.0, 2.0, per_day),
            "1.0/day – 2.0/day"
        );
    }

    /// Issue 36, item 7 of the page: "1 callers", "1 alternating slices".
    #[test]
    fn nouns_agree_with_their_count() {
        assert_eq!(plural(1, "caller", "callers"), "1 caller");
        assert_eq!(plural(0, "caller", "callers"), "0 callers");
        assert_eq!(plural(3, "copy", "copies"), "3 copies");
        assert_eq!(plural(79_587, "intent", "intents"), "79,587 intents");
        assert_eq!(noun(1, "run", "runs"), "run");
    }

    #[test]
    fn tables_line_up_by_characters() {
        let rows = vec![
            vec![
                "Keys per day".into(),
                "400/s × 86,400 s".into(),
                "34.56M".into(),
            ],
            vec!["Store".into(), "x".into(), "≈ 17.7 GB".into()],
        ];
        let out = text_table(
            &["", "", ""],
            &rows,
            &[Align::Left, Align::Left, Align::Right],
            2,
        );
        let lines: Vec<&str> = out.lines().skip(1).collect();
        assert_eq!(lines[0].chars().count(), lines[1].chars().count());
    }
}
