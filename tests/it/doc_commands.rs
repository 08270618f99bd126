//! Issue 36 item 8: the documentation's commands stay true. Every `idemcalc …` command written
//! in the docs (in code blocks, after a `$ ` prompt or bare, and in inline code) is parsed by
//! the real command line (`idemcalc::cli::parses`): a subcommand or flag renamed or removed
//! fails here, naming the file and line, instead of leaving a reader a command that no longer
//! runs. What a command prints is checked where it is quoted (tests/it/quoted_figures.rs).

use std::path::{Path, PathBuf};

/// The Markdown files a user reads.
fn documents() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![
        root.join("README.md"),
        root.join("ARCHITECTURE.md"),
        root.join("scenarios/README.md"),
    ];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("docs/")
        .map(|e| e.expect("docs/ entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    files
}

/// One documented command: where it is and its text.
struct Documented {
    at: String,
    text: String,
}

/// The command part of a shell line: up to a pipe, a redirection, a `;`, `&&` or a comment.
fn command_part(line: &str) -> &str {
    let mut end = line.len();
    for stop in [" |", " >", " 2>", ";", " &&", " #", " <"] {
        if let Some(i) = line.find(stop) {
            end = end.min(i);
        }
    }
    line[..end].trim()
}

/// `idemcalc …` or `cargo run --release -- …` at the start of `text`, as `idemcalc …`.
fn as_idemcalc(text: &str) -> Option<String> {
    let text = text.trim_start_matches("$ ").trim();
    if let Some(rest) = text.strip_prefix("cargo run --release -- ") {
        return Some(format!("idemcalc {rest}"));
    }
    text.starts_with("idemcalc ").then(|| text.to_string())
}

/// Every command in one Markdown text: lines of code blocks, and inline code in paragraphs
/// (which may wrap across lines).
fn commands_in(name: &str, text: &str) -> Vec<Documented> {
    let mut found = Vec::new();
    let mut in_block = false;
    let lines: Vec<&str> = text.lines().collect();
    // The paragraph being read outside code blocks: its first line and its text.
    let mut paragraph: Option<(usize, String)> = None;
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let fence = line.trim_start().starts_with("```");
        if (fence || in_block || line.trim().is_empty())
            && let Some((at, text)) = paragraph.take()
        {
            inline_commands(&format!("{name}:{at}"), &text, &mut found);
        }
        if fence {
            in_block = !in_block;
        } else if in_block {
            if let Some(start) = as_idemcalc(line) {
                // Continuation lines ending in a backslash are one command.
                let at = format!("{name}:{}", i + 1);
                let mut text = start;
                while text.ends_with('\\') && i + 1 < lines.len() {
                    text.pop();
                    i += 1;
                    text.push(' ');
                    text.push_str(lines[i].trim());
                }
                found.push(Documented {
                    at,
                    text: command_part(&text).to_string(),
                });
            }
        } else if !line.trim().is_empty() {
            let p = paragraph.get_or_insert_with(|| (i + 1, String::new()));
            if !p.1.is_empty() {
                p.1.push(' ');
            }
            p.1.push_str(line.trim());
        }
        i += 1;
    }
    if let Some((at, text)) = paragraph {
        inline_commands(&format!("{name}:{at}"), &text, &mut found);
    }
    found
}

/// Inline code in a paragraph: `idemcalc simulate --retention 3d`.
fn inline_commands(at: &str, paragraph: &str, found: &mut Vec<Documented>) {
    for (n, span) in paragraph.split('`').enumerate() {
        if n % 2 == 1
            && let Some(cmd) = as_idemcalc(span)
        {
            found.push(Documented {
                at: at.to_string(),
                text: command_part(&cmd).to_string(),
            });
        }
    }
}

/// A command written with a placeholder the reader fills in (`…`, `SPEC`, `<url>`,
/// `[--rate 400]`) is checked up to the placeholder: its subcommand and the flags before it.
fn up_to_placeholder(words: Vec<String>) -> Vec<String> {
    let placeholder = |w: &str| {
        w.contains('…')
            || w.contains("...")
            || w.starts_with('<')
            || w.starts_with('[')
            || (w.len() > 1 && w.chars().all(|c| c.is_ascii_uppercase() || c == '_'))
    };
    match words.iter().position(|w| placeholder(w)) {
        // Drop the placeholder and a flag that would then miss its value.
        Some(i) => {
            let mut kept: Vec<String> = words[..i].to_vec();
            if kept.last().is_some_and(|w| w.starts_with("--")) {
                kept.pop();
            }
            kept
        }
        None => words,
    }
}

#[test]
fn every_documented_command_parses() {
    let mut checked = 0;
    let mut failures = Vec::new();
    let subcommands = idemcalc::cli::subcommands();
    for file in documents() {
        let name = file
            .strip_prefix(env!("CARGO_MANIFEST_DIR"))
            .unwrap_or(&file)
            .display()
            .to_string();
        let text = std::fs::read_to_string(&file).expect("read a document");
        for d in commands_in(&name, &text) {
            let Some(words) = shlex::split(&d.text) else {
                failures.push(format!("{}: cannot split `{}`", d.at, d.text));
                continue;
            };
            let words = up_to_placeholder(words);
            // Text that only starts like a command ("idemcalc pid 4242", an output's first
            // line) names no subcommand.
            let Some((_, flags)) = words
                .get(1)
                .and_then(|sub| subcommands.iter().find(|(name, _)| name == sub))
            else {
                continue;
            };
            checked += 1;
            if words.len() == 2 {
                // `idemcalc serve` named in prose: the subcommand exists.
                continue;
            }
            if let Some(last) = words.last().filter(|w| w.starts_with("--"))
                && idemcalc::cli::parses(&words).is_err()
            {
                // `idemcalc simulate --store` named in prose: the flag exists.
                if !flags.contains(last) {
                    failures.push(format!("{}: `{}`: no flag {last}", d.at, d.text));
                }
                continue;
            }
            if let Err(e) = idemcalc::cli::parses(&words) {
                let first = e.lines().next().unwrap_or_default().to_string();
                failures.push(format!("{}: `{}`: {first}", d.at, d.text));
            }
        }
    }
    assert!(
        checked > 50,
        "only {checked} documented commands found: the extractor no longer reads the docs"
    );
    assert!(
        failures.is_empty(),
        "{} documented commands do not parse:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// The extractor itself: a command with a prompt, a continuation, a pipe and a comment, and an
/// inline one; text that only mentions the tool is not a command.
#[test]
fn the_extractor_reads_blocks_and_inline_code() {
    let md = "Run `idemcalc estimate --rate 5` first; idemcalc is a tool.\n\
              ```sh\n$ idemcalc simulate --retention 3d \\\n    --rate 2000 | jq . # note\n```\n";
    let found: Vec<String> = commands_in("x.md", md)
        .into_iter()
        .map(|d| d.text)
        .collect();
    assert_eq!(
        found,
        [
            "idemcalc estimate --rate 5",
            "idemcalc simulate --retention 3d  --rate 2000"
        ]
    );
    assert!(
        idemcalc::cli::parses(&["idemcalc".into(), "simulate".into(), "--nope".into()]).is_err()
    );
}

/// scenarios/README.md documents every field a scenario file takes, each once: it listed
/// `[model] peak_rate` and `bytes_per_record` twice, with different defaults.
#[test]
fn every_scenario_field_is_documented_once() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/README.md");
    let text = std::fs::read_to_string(&path).expect("scenarios/README.md");
    let mut section = String::new();
    let mut documented: Vec<String> = Vec::new();
    for line in text.lines() {
        if let Some(head) = line.strip_prefix("## ") {
            section = match head {
                "Top level" => "top".to_string(),
                _ => head
                    .split('`')
                    .nth(1)
                    .map(|s| s.trim_matches(['[', ']']).to_string())
                    .unwrap_or_default(),
            };
            continue;
        }
        if section.is_empty() || !line.starts_with("| `") {
            continue;
        }
        // `| `backoff_base`, `backoff_cap` | …`: every name in the first cell.
        let cell = line.split('|').nth(1).unwrap_or_default();
        for field in cell.split('`').skip(1).step_by(2) {
            documented.push(match section.as_str() {
                "top" => field.to_string(),
                _ => format!("{section}.{field}"),
            });
        }
    }
    let mut seen = std::collections::BTreeSet::new();
    let twice: Vec<&String> = documented.iter().filter(|f| !seen.insert(*f)).collect();
    assert!(twice.is_empty(), "documented more than once: {twice:?}");
    for k in idemcalc::settings::knobs::KNOBS {
        let Some(field) = k.field else { continue };
        // `traffic.rush.rate` is documented as `traffic.rush`, `carrier.latency.median` as
        // `carrier.latency`.
        let top: String = field.split('.').take(2).collect::<Vec<_>>().join(".");
        assert!(
            documented.contains(&top),
            "{field} (`{}`) is not documented in scenarios/README.md",
            k.flag
        );
    }
}

/// Text with runs of whitespace as one space, and what varies from run to run (wall time)
/// written as `N`.
fn normalised(text: &str) -> String {
    let words: Vec<&str> = text.split_whitespace().collect();
    let mut out = words.join(" ");
    // "3.7 s wall" → "N s wall".
    for marker in [" s wall"] {
        while let Some(i) = out.find(marker) {
            let start = out[..i].rfind(' ').map_or(0, |j| j + 1);
            if &out[start..i] == "N" {
                break;
            }
            out.replace_range(start..i, "N");
        }
    }
    out
}

/// Issue 36 item 8: every command the docs show with its output (`$ idemcalc …` and the
/// lines under it) is run again, and each shown line must be in what it prints today (a line
/// with `…` is an excerpt: each of its pieces, in order). `idemcalc load`'s example needs a live
/// server and is not rerun here; its figures are a measured run's.
#[test]
fn every_shown_output_is_what_the_command_prints() {
    let mut checked = 0;
    let mut stale = Vec::new();
    for file in documents() {
        let text = std::fs::read_to_string(&file).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let mut i = 0;
        while i < lines.len() {
            let Some(cmd) = lines[i].strip_prefix("$ idemcalc ") else {
                i += 1;
                continue;
            };
            let at = format!("{}:{}", file.display(), i + 1);
            let mut shown = Vec::new();
            let mut j = i + 1;
            // The output: the rest of the same block, or the next block when this one ends.
            if lines.get(j).is_some_and(|l| l.starts_with("```")) {
                // The command's block closes; its output is the next block.
                j += 1;
                if lines.get(j).is_some_and(|l| l.starts_with("```")) {
                    j += 1;
                }
            }
            while j < lines.len() && !lines[j].starts_with("```") && !lines[j].starts_with("$ ") {
                shown.push(lines[j]);
                j += 1;
            }
            i = j;
            if cmd.starts_with("load ") || shown.is_empty() {
                continue;
            }
            let words = shlex::split(cmd).unwrap();
            let out = std::process::Command::new(env!("CARGO_BIN_EXE_idemcalc"))
                .current_dir(env!("CARGO_MANIFEST_DIR"))
                .args(&words)
                .env("COLUMNS", "100")
                .stdin(std::process::Stdio::null())
                .output()
                .unwrap();
            let printed = normalised(&format!(
                "{}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
            checked += 1;
            for line in shown {
                let mut from = 0;
                for piece in line.split('…').map(normalised).filter(|p| !p.is_empty()) {
                    match printed[from..].find(&piece) {
                        Some(k) => from += k + piece.len(),
                        None => {
                            stale.push(format!("{at}: `idemcalc {cmd}` no longer prints: {piece}"));
                            break;
                        }
                    }
                }
            }
        }
    }
    assert!(checked >= 4, "only {checked} shown outputs found");
    assert!(
        stale.is_empty(),
        "{} shown lines are stale:\n{}",
        stale.len(),
        stale.join("\n")
    );
}
