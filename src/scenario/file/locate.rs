//! Where in a scenario file's text a field is: the line (and column) an error names, and the
//! dotted field at a position toml reports. Plain text scanning, since toml's values carry no
//! positions.

/// The 1-based column of the value on `line` (after its `=`), where an unreadable value is.
pub(super) fn value_column(text: &str, line: usize) -> Option<usize> {
    let l = text.lines().nth(line.checked_sub(1)?)?;
    let eq = l.find('=')?;
    let after = &l[eq + 1..];
    let pad = after.len() - after.trim_start().len();
    Some(l[..eq + 1 + pad].chars().count() + 1)
}

/// Like [`locate`], with the column where the key starts.
pub(super) fn locate_key(text: &str, field: &str) -> Option<(usize, usize)> {
    let line = locate(text, field)?;
    let l = text.lines().nth(line - 1)?;
    Some((line, l.chars().count() - l.trim_start().chars().count() + 1))
}

/// 1-based line and column of byte `offset` in `text`.
pub(super) fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let column = before
        .rfind('\n')
        .map_or(before.chars().count(), |i| before[i + 1..].chars().count())
        + 1;
    (line, column)
}

/// The table a line belongs to, if the line is a `[table]` or `[[table]]` header.
fn header(line: &str) -> Option<&str> {
    let t = line.trim();
    let t = t.split('#').next().unwrap_or("").trim();
    if let Some(inner) = t.strip_prefix("[[").and_then(|s| s.strip_suffix("]]")) {
        return Some(inner.trim());
    }
    t.strip_prefix('[')
        .and_then(|s| s.strip_suffix(']'))
        .map(str::trim)
}

/// The key a `key = value` line sets.
fn key_of(line: &str) -> Option<&str> {
    let t = line.trim();
    if t.starts_with('#') || t.starts_with('[') {
        return None;
    }
    let (key, _) = t.split_once('=')?;
    Some(key.trim().trim_matches('"'))
}

/// The dotted field at byte `offset`: the enclosing table plus the key of that line.
pub(super) fn field_at(text: &str, offset: usize) -> String {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let line_start = text[..offset].rfind('\n').map_or(0, |i| i + 1);
    let line_end = text[offset..].find('\n').map_or(text.len(), |i| offset + i);
    let line = &text[line_start..line_end];
    if let Some(h) = header(line) {
        return h.to_string();
    }
    let table = text[..line_start].lines().rev().find_map(header);
    // For an inline table (`rush = { rate = -1 }`) name the key nearest before the offset.
    let in_line = &text[line_start..offset];
    let key = match key_of(line) {
        Some(outer) => {
            let inner = in_line
                .rsplit(['{', ','])
                .next()
                .and_then(key_of)
                .filter(|k| *k != outer);
            match inner {
                Some(k) if in_line.contains('{') => format!("{outer}.{k}"),
                _ => outer.to_string(),
            }
        }
        None => in_line.split_whitespace().next().unwrap_or("").to_string(),
    };
    match table {
        Some(t) if !key.is_empty() => format!("{t}.{key}"),
        Some(t) => t.to_string(),
        None => key,
    }
}

/// "missing field `name`" → `name`.
pub(super) fn missing_field(message: &str) -> Option<String> {
    let rest = message.split("missing field `").nth(1)?;
    Some(rest.split('`').next()?.to_string())
}

/// The 1-based line where the dotted `field` is set, or its table's header, or none.
/// `timeline.request[2].body` finds the third `[[timeline.request]]`.
pub(super) fn locate(text: &str, field: &str) -> Option<usize> {
    let parts: Vec<&str> = field.split('.').collect();
    // Longest prefix first: the key itself, then its table.
    for n in (1..=parts.len()).rev() {
        let (table_parts, key) = parts[..n].split_at(n - 1);
        let key = key[0];
        let (key, index) = match key.split_once('[') {
            Some((k, i)) => (k, i.trim_end_matches(']').parse::<usize>().ok()),
            None => (key, None),
        };
        let table = table_parts.join(".");
        let mut current = String::new();
        let mut seen = 0usize;
        for (i, line) in text.lines().enumerate() {
            if let Some(h) = header(line) {
                current = h.to_string();
                let full = if table.is_empty() {
                    key.to_string()
                } else {
                    format!("{table}.{key}")
                };
                if h == full {
                    if index.is_none_or(|want| want == seen) {
                        return Some(i + 1);
                    }
                    seen += 1;
                }
                continue;
            }
            if current == table && key_of(line) == Some(key) {
                return Some(i + 1);
            }
        }
    }
    None
}
