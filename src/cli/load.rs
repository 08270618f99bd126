//! `idemcalc load URL`: flags → [`LoadConfig`] → [`crate::load::run`] → text, JSON or
//! Markdown → exit code (1 when the run failed: it checked nothing, its invoice could not be
//! read, or a budget is broken).

use crate::load::{self, Budgets, KeyPolicy, LoadConfig, Spacing, Template};
use crate::run::Plan;
use crate::settings::Settings;
use crate::settings::knobs::KnobId;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LoadFormat {
    Table,
    Json,
    Markdown,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ArrivalsArg {
    Poisson,
    Constant,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum KeyPolicyArg {
    /// `label:{order}:{parcel}:v{version}` (or the template's key pattern).
    Derived,
    /// A random UUID saved before the first attempt.
    RandomSaved,
    /// A new random key on every attempt: the seed's first failure mode, to see it caught.
    NewPerAttempt,
}

fn duration_arg(text: &str) -> Result<Duration, String> {
    crate::duration::clap_parse(text)
}

#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct LoadArgs {
    #[command(subcommand)]
    pub merge: Option<LoadCommand>,
    /// The target's base URL, e.g. http://127.0.0.1:8080 (the template's path is added).
    #[arg(required = true)]
    pub url: Option<String>,
    /// Intents started per second, whatever the server answers (open model). Default: the
    /// --scenario's rate, else the seed's 400/s.
    #[arg(long, value_name = "PER_S")]
    pub rate: Option<f64>,
    /// How intents are spaced: a Poisson process (as `simulate`) or evenly.
    #[arg(long, value_enum, default_value = "poisson")]
    pub arrivals: ArrivalsArg,
    /// How long intents start, and retries are sent.
    #[arg(long, value_parser = duration_arg, default_value = "1m")]
    pub duration: Duration,
    /// Seed of every random choice (arrivals, callers, lost replies, retry delays, keys).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Send shard I of N (I from 0, as Kubernetes' JOB_COMPLETION_INDEX): the intents I+1,
    /// I+1+N, … of the run's one schedule, at rate/N; `load merge` adds the N results. Needs
    /// --first-order, so every shard numbers the same orders.
    #[arg(long, value_name = "I/N")]
    pub shard: Option<String>,
    /// The client's deadline per attempt. Default: the --scenario's, else the seed's 250ms.
    #[arg(long, value_parser = duration_arg)]
    pub deadline: Option<Duration>,
    /// How long after an attempt's deadline the tool keeps listening for its answer, to see a
    /// label made for an attempt its client gave up on.
    #[arg(long, value_parser = duration_arg, default_value = "2s")]
    pub observe: Duration,
    /// Attempts per intent, the first included. Default: the --scenario's, else 4.
    #[arg(long)]
    pub max_attempts: Option<u32>,
    /// Share of replies the network loses on the way back, after the server ran the call; the
    /// client retries them late. Default: the --scenario's timeouts × done fraction, else the
    /// seed's 0.1 % × 60 %.
    #[arg(long, value_name = "FRACTION")]
    pub lose_replies: Option<f64>,
    /// How each intent's key is made.
    #[arg(long, value_enum, default_value = "derived")]
    pub key_policy: KeyPolicyArg,
    /// Seconds of the target's clock per wall second (`idemcalc serve --time-scale`): late
    /// retries come this many times sooner.
    #[arg(long, default_value_t = 1.0)]
    pub time_scale: f64,
    /// The late-retry distribution as a CSV of `delay,cumulative fraction` (as `simulate`).
    #[arg(long, value_name = "FILE")]
    pub retry_cdf: Option<PathBuf>,
    /// The earliest retry, below the distribution's first point (as `simulate`).
    #[arg(long, value_name = "DURATION")]
    pub retry_min_delay: Option<String>,
    /// The latest retry, beyond the distribution's last point (as `simulate`).
    #[arg(long, value_name = "DURATION")]
    pub retry_horizon: Option<String>,
    /// The carrier's invoice, read after the run to count labels bought twice for the run's
    /// orders (a client cannot see them when the service answers with the label it holds),
    /// e.g. http://127.0.0.1:8081/v1/invoice from `idemcalc carrier`.
    #[arg(long, value_name = "URL")]
    pub carrier_invoice: Option<String>,
    /// The most of the invoice that is read; a larger one is not read, and the invoice check is
    /// marked not done. The invoice holds every run's lines, about 200 bytes each: 256MiB is
    /// about a million purchases.
    #[arg(long, value_name = "SIZE", default_value = "256MiB")]
    pub max_invoice_body: String,
    /// How long the invoice may take, connection to last byte; past it the check is marked
    /// not done and the run's report kept (loopback reads 100 MB well within the default).
    #[arg(long, value_parser = duration_arg, value_name = "DURATION", default_value = "10s")]
    pub invoice_timeout: Duration,
    /// The target's retention (as `serve --retention`): `simulate` is run on the same client,
    /// rate and retry distribution, and its duplicate labels per day are shown beside the
    /// count, with whether the two agree.
    #[arg(long, value_name = "DURATION")]
    pub retention: Option<String>,
    /// The target's carrier window (as `serve --carrier-window`), for the prediction; default
    /// the seed's 24h.
    #[arg(long, value_name = "DURATION", requires = "retention")]
    pub carrier_window: Option<String>,
    /// A scenario file (e.g. from `idemcalc fit`): its retry distribution, rate and client.
    #[arg(long, value_name = "FILE")]
    pub scenario: Option<PathBuf>,
    /// A request template (TOML: method, path, key, key_header, key_format, identity, body,
    /// [headers]); default: `idemcalc serve`'s POST /labels.
    #[arg(long, value_name = "FILE")]
    pub template: Option<PathBuf>,
    /// JSON pointer to the label's identity in a 2xx body.
    #[arg(long, value_name = "POINTER")]
    pub identity: Option<String>,
    /// A header on every request, 'Name: value' (repeatable, as curl's -H).
    #[arg(long = "header", short = 'H', value_name = "LINE")]
    pub headers: Vec<String>,
    /// `TOKEN CALLER` per line (the same file as `serve --callers`): intents are spread over
    /// the callers, each sending `Authorization: Bearer TOKEN`.
    #[arg(long, value_name = "FILE")]
    pub callers: Option<PathBuf>,
    /// The first intent's order number. Default: the Unix time × 1,000,000, so a rerun
    /// sends new keys.
    #[arg(long)]
    pub first_order: Option<i64>,
    /// Requests open at once (the connection pool). Default: four deadlines of arrivals.
    #[arg(long)]
    pub max_in_flight: Option<usize>,
    /// The most of one answer's body that is read (e.g. 64KiB, 1MiB); an answer past it is an
    /// error, so a body without end cannot take the machine's memory.
    #[arg(long, value_name = "SIZE", default_value = "1MiB")]
    pub max_body: String,
    /// Speak HTTP/2 without TLS (h2c prior knowledge); over https HTTP/2 is negotiated.
    #[arg(long)]
    pub http2: bool,
    /// Budget: p99 of the 2xx answers.
    #[arg(long, value_parser = duration_arg, value_name = "DURATION")]
    pub budget_p99: Option<Duration>,
    /// Budget: share of attempts answered with an error or nothing.
    #[arg(long, value_name = "FRACTION")]
    pub budget_error_share: Option<f64>,
    /// Budget: duplicate labels allowed.
    #[arg(long, default_value_t = 0)]
    pub budget_duplicates: u64,
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    pub format: LoadFormat,
    /// Also write the result as JSON to this file (whatever --format prints), for CI artifacts.
    /// An existing file is replaced only if `load` wrote it, unless --force.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Replace an --out file that idemcalc did not write.
    #[arg(long)]
    pub force: bool,
    /// No progress bar.
    #[arg(long)]
    pub quiet: bool,
}

/// What marks a result `load --out` wrote: its JSON's achieved-rate field near the start.
fn is_load_result(path: &std::path::Path) -> bool {
    crate::output::contains(&crate::output::head(path, 8192), b"\"achieved_rate_per_s\"")
}

/// Checks `--out` before the run: not one of its input files, not a link, not a file this tool
/// did not write (unless `--force`).
fn check_out(args: &LoadArgs) -> anyhow::Result<()> {
    let Some(path) = &args.out else {
        return Ok(());
    };
    let mut inputs = Vec::new();
    for (what, file) in [
        ("--retry-cdf", &args.retry_cdf),
        ("--scenario", &args.scenario),
        ("--template", &args.template),
        ("--callers", &args.callers),
    ] {
        if let Some(p) = file {
            inputs.push(crate::output::Input { what, path: p });
        }
    }
    check_out_file(path, args.force, &inputs)
}

/// `--out` of a run or a merge: the check of [`crate::output`], with a load result as ours.
fn check_out_file(
    path: &std::path::Path,
    force: bool,
    inputs: &[crate::output::Input],
) -> anyhow::Result<()> {
    let target = crate::output::Target {
        flag: "--out",
        path,
        kind: crate::output::Kind::File,
        ours: &is_load_result,
        mark: "a result `idemcalc load --out` wrote is JSON with \"achieved_rate_per_s\"",
    };
    crate::output::check(&target, force, inputs)?;
    Ok(())
}

impl LoadArgs {
    /// The run's configuration; every error names its flag or file.
    pub fn config(&self) -> anyhow::Result<LoadConfig> {
        let text = self.url.as_deref().unwrap_or_default();
        let url = reqwest::Url::parse(text).map_err(|e| anyhow::anyhow!("URL `{text}`: {e}"))?;
        // The retry distribution and the client's defaults come from the settings `simulate`
        // would use (the scenario's, or the seed's), so both replay the same client.
        let cdf = self.retry_cdf.as_ref().map(|p| p.to_string_lossy());
        let pairs = self.retry_pairs(cdf.as_deref());
        let (settings, source) = self.settings(&pairs)?;
        let plan = Plan::new(&settings)?;
        let retry_source = match (&self.retry_cdf, source.is_empty()) {
            (Some(p), _) => format!("--retry-cdf {}", p.display()),
            (None, false) => source,
            (None, true) => "the seed's table".into(),
        };
        let sim = settings.sim_config(settings.retentions().first().copied().unwrap_or(0.0));
        // The scenario's rate, or the knob table's default (the seed's 400/s).
        let rate = self.rate.unwrap_or(settings.traffic.rate_per_s);
        let duration = self.duration;
        let mut cfg = LoadConfig::seed(url, rate, duration);
        cfg.spacing = match self.arrivals {
            ArrivalsArg::Poisson => Spacing::Poisson,
            ArrivalsArg::Constant => Spacing::Constant,
        };
        cfg.seed = self.seed;
        let ms = |v: crate::clock::Millis| Duration::from_millis(v.max(0) as u64);
        cfg.deadline = self.deadline.unwrap_or(ms(sim.deadline_ms));
        cfg.observe = self.observe;
        cfg.max_attempts = self.max_attempts.unwrap_or(sim.max_attempts);
        cfg.backoff_base = ms(sim.backoff_base_ms);
        cfg.backoff_cap = ms(sim.backoff_cap_ms);
        cfg.retry = plan.retry;
        cfg.retry_source = retry_source;
        cfg.time_scale = self.time_scale;
        cfg.lose_reply_fraction = self
            .lose_replies
            .unwrap_or(sim.timeout_fraction * sim.done_fraction);
        cfg.key_policy = match self.key_policy {
            KeyPolicyArg::Derived => KeyPolicy::Derived,
            KeyPolicyArg::RandomSaved => KeyPolicy::RandomSaved,
            KeyPolicyArg::NewPerAttempt => KeyPolicy::NewPerAttempt,
        };
        cfg.first_order = self.first_order.unwrap_or_else(load::first_order_now);
        if let Some(text) = &self.shard {
            if self.first_order.is_none() {
                anyhow::bail!(
                    "--shard {text}: needs --first-order, so that every shard numbers the same \
                     orders (the default is the start time, which differs between shards)"
                );
            }
            cfg.shard = Some(load::Shard::parse(text)?);
        }
        let mut template = match &self.template {
            Some(path) => Template::from_file(path)?,
            None => Template::default(),
        };
        if let Some(p) = &self.identity {
            template
                .set_identity(p)
                .map_err(|e| anyhow::anyhow!("--identity: {e}"))?;
        }
        for line in &self.headers {
            template.add_header_line(line)?;
        }
        cfg.template = template;
        if let Some(path) = &self.callers {
            cfg.callers = load::request::read_callers(path)?;
        }
        cfg.max_in_flight = self
            .max_in_flight
            .unwrap_or_else(|| load::default_max_in_flight(cfg.sent_rate_per_s(), cfg.deadline));
        cfg.http2_prior_knowledge = self.http2;
        cfg.max_body = load::body::parse_max("--max-body", &self.max_body)?;
        if let Some(share) = self.budget_error_share
            && !(0.0..=1.0).contains(&share)
        {
            anyhow::bail!("--budget-error-share {share}: must be a fraction in 0..1");
        }
        cfg.budgets = Budgets {
            latency_ms_p99: self.budget_p99.map(|d| d.as_secs_f64() * 1000.0),
            error_share: self.budget_error_share,
            duplicate_labels: self.budget_duplicates,
            ..Budgets::default()
        };
        cfg.check()?;
        Ok(cfg)
    }

    /// The retry distribution's flags as knob values (`cdf`: `--retry-cdf` as text), the same
    /// for the run's client and for the prediction.
    fn retry_pairs<'a>(&'a self, cdf: Option<&'a str>) -> Vec<(KnobId, &'a str)> {
        [
            (KnobId::RetryCdf, cdf),
            (KnobId::RetryMinDelay, self.retry_min_delay.as_deref()),
            (KnobId::RetryHorizon, self.retry_horizon.as_deref()),
        ]
        .into_iter()
        .filter_map(|(id, v)| v.map(|v| (id, v)))
        .collect()
    }

    /// The settings `simulate` would use: the scenario's (under the given flags), or the
    /// flags' over the knob table's defaults.
    fn settings(&self, pairs: &[(KnobId, &str)]) -> anyhow::Result<(Settings, String)> {
        load::predict::settings_for(self.scenario.as_deref(), pairs)
    }

    /// With `--retention`: the settings of `simulate`'s prediction for the run `cfg`
    /// describes, and the same as a command line. The lost replies are timed-out calls the
    /// server finished (`load::predict`).
    fn prediction_ask(&self, cfg: &LoadConfig) -> Option<load::predict::Ask> {
        let retention = self.retention.as_ref()?;
        // A shard predicts for what it sent: its share of the run's rate.
        let rate = cfg.sent_rate_per_s().to_string();
        let lose = cfg.lose_reply_fraction.to_string();
        let deadline = format!("{}ms", cfg.deadline.as_millis());
        let attempts = cfg.max_attempts.to_string();
        let callers = cfg.callers.len().max(1).to_string();
        let seed = cfg.seed.to_string();
        let policy = cfg.key_policy.name();
        let mut pairs: Vec<(KnobId, &str)> = vec![
            (KnobId::Retention, retention),
            (KnobId::RatePerS, &rate),
            (KnobId::TimeoutFraction, &lose),
            (KnobId::DoneFraction, "1"),
            (KnobId::Deadline, &deadline),
            (KnobId::MaxAttempts, &attempts),
            (KnobId::KeyPolicy, &policy),
            (KnobId::Callers, &callers),
            (KnobId::Seed, &seed),
        ];
        if let Some(w) = &self.carrier_window {
            pairs.push((KnobId::CarrierWindow, w));
        }
        let cdf = self.retry_cdf.as_ref().map(|p| p.to_string_lossy());
        pairs.extend(self.retry_pairs(cdf.as_deref()));
        Some(load::predict::Ask::new(self.scenario.as_deref(), &pairs))
    }
}

impl LoadArgs {
    /// `--carrier-invoice` with its ceiling and wait, checked before the run.
    fn invoice_source(&self) -> anyhow::Result<Option<load::invoice::InvoiceSource>> {
        let Some(u) = self.carrier_invoice.as_deref() else {
            return Ok(None);
        };
        let url =
            reqwest::Url::parse(u).map_err(|e| anyhow::anyhow!("--carrier-invoice `{u}`: {e}"))?;
        if !matches!(url.scheme(), "http" | "https") {
            anyhow::bail!("--carrier-invoice {url}: only http:// and https:// are spoken");
        }
        if self.invoice_timeout.is_zero() {
            anyhow::bail!("--invoice-timeout: must be above 0");
        }
        Ok(Some(load::invoice::InvoiceSource {
            url,
            max_body: load::body::parse_max("--max-invoice-body", &self.max_invoice_body)?,
            timeout: self.invoice_timeout,
        }))
    }
}

/// Set by Ctrl-C or SIGTERM: the run stops starting intents and reports what it did.
static INTERRUPTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

extern "C" fn on_sigterm(_: libc::c_int) {
    INTERRUPTED.store(true, std::sync::atomic::Ordering::SeqCst);
}

/// SIGTERM ends a run as Ctrl-C does. It is what a CI job's timeout, `timeout(1)` or a
/// container's stop sends, and by default it killed `load` and the report of everything run so
/// far with it. Once only: a second SIGTERM kills, as a supervisor escalating expects.
fn stop_on_sigterm() {
    // SAFETY: the handler only stores to an atomic (async-signal-safe); the action is zeroed
    // and then filled as sigaction(2) asks.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_sigterm as extern "C" fn(libc::c_int) as libc::sighandler_t;
        action.sa_flags = libc::SA_RESETHAND | libc::SA_RESTART;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(libc::SIGTERM, &action, std::ptr::null_mut());
    }
}

pub fn run(args: &LoadArgs) -> anyhow::Result<i32> {
    if let Some(LoadCommand::Merge(m)) = &args.merge {
        return merge(m);
    }
    let cfg = args.config()?;
    check_out(args)?;
    let bar = super::progress_bar(args.quiet, "load");
    let tick = |f: f64| bar.set_position((f.clamp(0.0, 1.0) * 1000.0) as u64);
    // A handler that cannot be installed (one already is) leaves Ctrl-C's default: no report.
    let _ = ctrlc::set_handler(|| INTERRUPTED.store(true, std::sync::atomic::Ordering::SeqCst));
    stop_on_sigterm();
    let invoice = args.invoice_source()?;
    let prediction = args.prediction_ask(&cfg);
    // Checked before the run, so a mistyped knob costs no run.
    if let Some(ask) = &prediction {
        ask.settings()?;
    }
    let (report, tally) = load::run_sharded(&cfg, &tick, &INTERRUPTED)?;
    bar.finish_and_clear();
    let shard = tally.map(|tally| load::shard::ShardBlock {
        format: load::shard::FORMAT,
        budgets: cfg.budgets,
        invoice: invoice.as_ref().map(load::shard::InvoiceAsk::of),
        prediction: prediction.clone(),
        tally,
    });
    let out = Output {
        format: args.format,
        out: args.out.as_deref(),
        shard: shard.as_ref(),
    };
    conclude(
        report,
        invoice.as_ref(),
        prediction.as_ref(),
        &cfg.budgets,
        &out,
    )
}

/// Where a report goes.
struct Output<'a> {
    format: LoadFormat,
    out: Option<&'a std::path::Path>,
    /// A shard's block, written beside its report in the JSON.
    shard: Option<&'a load::shard::ShardBlock>,
}

/// After a run, or shards merged: the invoice reconciled with the run's orders, the prediction
/// set beside the count, the report printed and written, the exit code.
fn conclude(
    mut report: load::LoadReport,
    invoice: Option<&load::invoice::InvoiceSource>,
    prediction: Option<&load::predict::Ask>,
    budgets: &Budgets,
    output: &Output<'_>,
) -> anyhow::Result<i32> {
    if let Some(source) = invoice {
        // A failed read keeps the report: the run is marked failed, with the reason.
        match load::invoice::reconcile(source, report.orders.numbers()) {
            Ok(count) => report.add_invoice(count, budgets.duplicate_labels),
            Err(e) => report.add_invoice_unread(&source.url, format!("{e:#}")),
        }
    }
    if let Some(ask) = prediction {
        let (settings, command) = ask.settings()?;
        report.prediction = Some(load::predict::predict(
            &settings,
            command,
            report.duplicates_to_compare(),
            report.run_days(),
        )?);
    }
    let json = match output.shard {
        Some(shard) => serde_json::to_string_pretty(&load::shard::ShardReport {
            report: &report,
            shard,
        })?,
        None => serde_json::to_string_pretty(&report)?,
    } + "\n";
    let text = match output.format {
        LoadFormat::Table => report.text(),
        LoadFormat::Json => json.clone(),
        LoadFormat::Markdown => report.markdown(),
    };
    if let Some(path) = output.out {
        crate::output::write(path, json.as_bytes())
            .map_err(|e| anyhow::anyhow!("--out {}: {e}", path.display()))?;
    }
    super::print(&text)?;
    // The text ends with the verdict; JSON and Markdown go to files and pipes, so the reasons a
    // run failed are named on stderr too, as k6 names the thresholds crossed.
    if output.format != LoadFormat::Table {
        for f in &report.verdict.failures {
            eprintln!("idemcalc load: FAILED: {f}");
        }
    }
    Ok(if report.run.interrupted_after_s.is_some() {
        super::bench::EXIT_INTERRUPTED
    } else if report.ok {
        0
    } else {
        super::EXIT_BUDGET
    })
}

#[derive(Debug, clap::Subcommand)]
pub enum LoadCommand {
    /// Add the results of `load --shard I/N --out FILE` (one per index) into the one run's
    /// report: counts and HDR histograms added exactly, duplicates found on the union of
    /// labels, the invoice and the prediction redone for the whole run, budgets and verdict
    /// recomputed; exit codes as a run's.
    Merge(MergeArgs),
}

#[derive(Debug, clap::Args)]
pub struct MergeArgs {
    /// The shards' JSON results, every index of one run once.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    pub format: LoadFormat,
    /// Also write the merged result as JSON to this file.
    /// An existing file is replaced only if `load` wrote it, unless --force.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Replace an --out file that idemcalc did not write.
    #[arg(long)]
    pub force: bool,
}

fn merge(args: &MergeArgs) -> anyhow::Result<i32> {
    if let Some(path) = &args.out {
        let inputs: Vec<crate::output::Input> = args
            .files
            .iter()
            .map(|p| crate::output::Input {
                what: "a shard file",
                path: p,
            })
            .collect();
        check_out_file(path, args.force, &inputs)?;
    }
    let merged = load::shard::merge(&args.files)?;
    let out = Output {
        format: args.format,
        out: args.out.as_deref(),
        shard: None,
    };
    conclude(
        merged.report,
        merged.invoice.as_ref(),
        merged.prediction.as_ref(),
        &merged.budgets,
        &out,
    )
}
