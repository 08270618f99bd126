//! The one table of settings: every knob's flag, scenario-file field, default, limits and unit.
//!
//! A command-line flag and a scenario file field are two spellings of one knob, so they share
//! one row: the same default, the same limits, the same check ([`Knob::check`]). Limits are
//! TigerBeetle-style, on everything, with the reason next to them where it is not obvious.
//!
//! Adding a knob: add a row to [`KNOBS`], a field to [`super::Settings`] and one line in
//! `Settings::from_values`. The flag appears on every subcommand in its `commands`, the field
//! in every scenario file, both with the same default and the same error messages.

/// The subcommands a knob is a flag of (a bit set).
pub const SIMULATE: u8 = 1;
pub const ESTIMATE: u8 = 2;
/// `idemcalc serve`: the engine, carrier and sweeper knobs of a running server.
pub const SERVE: u8 = 4;
/// `idemcalc carrier`: the simulated carrier's own knobs, behind HTTP.
pub const CARRIER: u8 = 8;
/// A scenario-file field only (no flag yet).
pub const FILE_ONLY: u8 = 0;

mod check;
pub use check::{Raw, Refusal, Value};

/// What values a knob takes. Every bound is inclusive unless `above` says "strictly above".
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Kind {
    /// A duration like `24h`; `above_zero` refuses `0s`; `min` (seconds, and why) refuses
    /// anything shorter where a short value is a runaway rather than a choice.
    Duration {
        above_zero: bool,
        min: Option<(f64, &'static str)>,
        max_s: f64,
    },
    /// A real number in `min..=max` (`above_min`: strictly above `min`).
    Number { min: f64, above_min: bool, max: f64 },
    /// A fraction in 0..=1, written `0.001` or `0.1%`.
    Fraction,
    /// A whole number in `min..=max`.
    Count { min: u64, max: u64 },
    /// One of these words; `-` and `_` are interchangeable so flags read `new-per-attempt` and
    /// files `new_per_attempt`.
    Choice(&'static [&'static str]),
    /// A rate per day: a number, or `1/month`, `2/week`, `5/day`.
    PerDay,
    /// A file path.
    Path,
    /// On or off: a flag without a value on the command line, `true`/`false` in a file.
    Switch,
    /// A size distribution (`payload::SizeDist`): `300`, `2kB`, `median=300B,p99=2kB`, or in a
    /// file `{ median = "300B", p99 = "2kB" }` / `{ histogram = [[bytes, weight], …] }`.
    Size,
}

#[derive(Debug, Clone, Copy)]
pub struct Knob {
    pub id: KnobId,
    /// The key in [`super::Values`] and the field of `Settings` it fills; unit last.
    pub name: &'static str,
    /// The flag, e.g. `--timeout-fraction`.
    pub flag: &'static str,
    /// Older flag spellings, accepted but hidden from `--help`.
    pub aliases: &'static [&'static str],
    /// The dotted scenario-file field, e.g. `traffic.timeout_fraction`; `None` for flags only.
    pub field: Option<&'static str>,
    pub kind: Kind,
    /// A comma-separated list on the command line, a TOML array in a file; at most this many.
    pub list_max: Option<usize>,
    /// The default as it would be typed; `None`: absent unless given.
    pub default: Option<&'static str>,
    pub commands: u8,
    /// `--help` text; the unit is in `value_name`.
    pub help: &'static str,
    pub value_name: &'static str,
}

const DAY_S: f64 = 86_400.0;
/// A run of more than 90 simulated days is a typo: the retry distribution's horizon is 30 days.
pub const MAX_SIMULATED_S: f64 = 90.0 * DAY_S;
/// 10⁶ creates/s is 500 times the seed's peak: beyond it the model's store size is fantasy.
const MAX_RATE_PER_S: f64 = 1e6;
/// One call in 11.6 days: less than ten calls in the 90-day limit of simulated time, so any
/// lower rate is a typo (`1e-320` would size a store of 0 B).
const MIN_RATE_PER_S: f64 = 1e-6;
const MAX_USD: f64 = 1e6;

const fn duration(above_zero: bool, max_s: f64) -> Kind {
    Kind::Duration {
        above_zero,
        min: None,
        max_s,
    }
}
/// A duration of at least `min_s`, for the reason `why` (shown in the refusal).
const fn duration_from(min_s: f64, why: &'static str, max_s: f64) -> Kind {
    Kind::Duration {
        above_zero: true,
        min: Some((min_s, why)),
        max_s,
    }
}

/// The shortest sweep period: 1ns over the default day and a half of simulated time is 10¹⁴
/// sweeps (the run takes over an hour instead of seconds), while retentions and the carrier's
/// window are whole seconds at the least, so below 1 s no figure changes.
const MIN_SWEEP_PERIOD_S: f64 = 1.0;
const SWEEP_PERIOD_WHY: &str = "the sweeper runs once per period of simulated time, and a run simulates hours to days, so a shorter period only multiplies the sweeps (1ns would take hours) without changing any figure";
const fn above(min: f64, max: f64) -> Kind {
    Kind::Number {
        min,
        above_min: true,
        max,
    }
}
const fn at_least(min: f64, max: f64) -> Kind {
    Kind::Number {
        min,
        above_min: false,
        max,
    }
}

const BOTH: u8 = SIMULATE | ESTIMATE;

macro_rules! knob {
    (@aliases) => { &[] };
    (@aliases $a:expr) => { $a };
    (@list) => { None };
    (@list $l:expr) => { Some($l) };
    ($id:ident, $name:literal, $flag:literal, $field:expr, $kind:expr, $default:expr, $commands:expr, $vn:literal, $help:literal $(, aliases = $aliases:expr)? $(, list = $list:expr)?) => {
        Knob {
            id: KnobId::$id,
            name: $name,
            flag: $flag,
            aliases: knob!(@aliases $($aliases)?),
            field: $field,
            kind: $kind,
            list_max: knob!(@list $($list)?),
            default: $default,
            commands: $commands,
            help: $help,
            value_name: $vn,
        }
    };
}

/// The table itself: one list gives both [`KnobId`] and [`KNOBS`], so an id and its row cannot
/// drift apart, and `KNOBS[id as usize]` is that id's row.
macro_rules! knob_table {
    ($($id:ident => ($($row:tt)*)),* $(,)?) => {
        /// A knob, as the compiler knows it: code asks [`super::Values`] for a knob by this id,
        /// so a misspelt name is a compile error rather than a budget that silently vanishes.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum KnobId {
            $($id),*
        }

        /// Every knob, in `--help` order.
        pub const KNOBS: &[Knob] = &[$(knob!($id, $($row)*)),*];
    };
}

knob_table! {
    Seed => (
        "seed",
        "--seed",
        Some("seed"),
        Kind::Count {
            min: 0,
            max: u64::MAX
        },
        Some("1"),
        SIMULATE | SERVE | CARRIER,
        "SEED",
        "Seed for every random choice; the same seed and inputs give the same JSON."
    ),
    // Traffic
    RatePerS => (
        "rate_per_s",
        "--rate",
        Some("traffic.rate"),
        at_least(MIN_RATE_PER_S, MAX_RATE_PER_S),
        Some("400"),
        BOTH,
        "CALLS_PER_S",
        "Average label creates per second (the seed's average is 400, its peak 2000)."
    ),
    RushRatePerS => (
        "rush_rate_per_s",
        "--rush-rate",
        Some("traffic.rush.rate"),
        at_least(0.0, MAX_RATE_PER_S),
        None,
        SIMULATE,
        "CALLS_PER_S",
        "A daily rush at this rate in place of --rate, e.g. 2000 (see --rush-start, --rush-duration)."
    ),
    RushStart => (
        "rush_start",
        "--rush-start",
        Some("traffic.rush.start"),
        duration(false, DAY_S),
        Some("16h"),
        SIMULATE,
        "DURATION",
        "When the daily rush starts, after midnight."
    ),
    RushDuration => (
        "rush_duration",
        "--rush-duration",
        Some("traffic.rush.duration"),
        duration(true, DAY_S),
        Some("4h"),
        SIMULATE,
        "DURATION",
        "How long the daily rush lasts.",
        aliases = &["rush-for"]
    ),
    PeakRatePerS => (
        "peak_rate_per_s",
        "--peak-rate",
        Some("model.peak_rate"),
        at_least(MIN_RATE_PER_S, MAX_RATE_PER_S),
        Some("2000"),
        BOTH,
        "CALLS_PER_S",
        "Peak creates per second that size the worst-case store (the seed's pre-holiday rush); the traffic's own peak if higher."
    ),
    Arrival => (
        "arrival",
        "--duration",
        Some("traffic.duration"),
        duration(true, MAX_SIMULATED_S),
        None,
        SIMULATE,
        "DURATION",
        "How long traffic arrives, in simulated time (default: one retention plus half a retention, at least 6 h, rounded up to whole days under a daily rush). At most 90d."
    ),
    Sample => (
        "sample",
        "--sample",
        Some("traffic.sample"),
        Kind::Number {
            min: 0.0,
            above_min: true,
            max: 1.0
        },
        None,
        SIMULATE,
        "FRACTION",
        "Fraction of ordinary calls replayed, in (0, 1]; 1 is full fidelity (default: about --target intents)."
    ),
    TargetIntents => (
        "target_intents",
        "--target",
        Some("traffic.target"),
        at_least(1.0, 1e8),
        Some("40000"),
        SIMULATE,
        "INTENTS",
        "How many ordinary intents the automatic sample aims for: run time against interval width."
    ),
    // 64 replicates at 40,000 intents each is already minutes on two cores.
    Replicates => (
        "replicates",
        "--replicates",
        Some("traffic.replicates"),
        Kind::Count { min: 1, max: 64 },
        Some("1"),
        SIMULATE,
        "N",
        "Independent replicates, run in parallel and pooled into the intervals (at most 64)."
    ),
    TimeoutFraction => (
        "timeout_fraction",
        "--timeout-fraction",
        Some("traffic.timeout_fraction"),
        Kind::Fraction,
        Some("0.001"),
        BOTH,
        "FRACTION",
        "Share of calls that time out, like 0.001 or 0.1% (seed: 0.1%).",
        aliases = &["timeout-rate"]
    ),
    KeyBytes => (
        "key_bytes",
        "--key-bytes",
        Some("traffic.key_bytes"),
        Kind::Size,
        Some("36B"),
        BOTH | SERVE,
        "SIZE",
        "Idempotency-key length: a size (36, 36B) or median=SIZE,p99=SIZE (seed: keys of up to ~36 B)."
    ),
    ResponseBytes => (
        "response_bytes",
        "--response-bytes",
        Some("traffic.response_bytes"),
        Kind::Size,
        Some("300B"),
        BOTH | SERVE,
        "SIZE",
        "Saved 201 response size: a size (300B, 2kB) or median=SIZE,p99=SIZE (seed: ~300 B)."
    ),
    RequestLog => (
        "request_log",
        "--request-log",
        None,
        Kind::Path,
        None,
        SIMULATE,
        "FILE",
        "Also write the requests the simulator replays (first retention, replicate 1) to this .parquet, .csv or .ndjson file, in the columns `idemcalc fit` reads."
    ),
    NetworkLossFraction => (
        "network_loss_fraction",
        "--network-loss",
        Some("traffic.network_loss"),
        Kind::Fraction,
        None,
        SIMULATE,
        "FRACTION",
        "Share of calls the network loses, request or reply (default: calibrated so that --timeout-fraction holds at the seed's latencies; a slower carrier then adds its own timeouts)."
    ),
    DoneFraction => (
        "done_fraction",
        "--done-fraction",
        Some("traffic.done_fraction"),
        Kind::Fraction,
        Some("0.6"),
        BOTH,
        "FRACTION",
        "Share of timed-out calls already done server-side (seed: 60%)."
    ),
    KeyPolicy => (
        "key_policy",
        "--key-policy",
        Some("traffic.key_policy"),
        Kind::Choice(&["derived", "random_saved", "new_per_attempt"]),
        Some("derived"),
        SIMULATE,
        "POLICY",
        "How clients make keys: derived (the seed's), random-saved, or new-per-attempt (the bug)."
    ),
    Callers => (
        "callers",
        "--callers",
        Some("traffic.callers"),
        Kind::Count {
            min: 1,
            max: 10_000
        },
        Some("1"),
        SIMULATE,
        "N",
        "Callers (tenants) sharing order numbering; with global keys they collide."
    ),
    CrashFraction => (
        "crash_fraction",
        "--crash-fraction",
        Some("traffic.crash_fraction"),
        Kind::Fraction,
        Some("0"),
        SIMULATE,
        "FRACTION",
        "Fraction of attempts killed mid-flight (at --crash-point).",
        aliases = &["crash-rate"]
    ),
    CrashPoint => (
        "crash_point",
        "--crash-point",
        Some("traffic.crash_point"),
        Kind::Choice(&["after_txn1", "after_carrier", "inside_txn2"]),
        Some("after_carrier"),
        SIMULATE,
        "POINT",
        "Where a killed attempt dies."
    ),
    // A client that tries more than 100 times in-process is a bug of its own.
    MaxAttempts => (
        "max_attempts",
        "--max-attempts",
        Some("traffic.max_attempts"),
        Kind::Count { min: 1, max: 100 },
        Some("4"),
        SIMULATE,
        "N",
        "Attempts per intent in the client's in-process retry loop, the first included."
    ),
    Deadline => (
        "deadline",
        "--deadline",
        Some("traffic.deadline"),
        duration(true, 3_600.0),
        Some("250ms"),
        SIMULATE,
        "DURATION",
        "The client's deadline for one attempt (seed: 250 ms)."
    ),
    BackoffBase => (
        "backoff_base",
        "--backoff-base",
        Some("traffic.backoff_base"),
        duration(true, 3_600.0),
        Some("100ms"),
        SIMULATE,
        "DURATION",
        "First backoff between in-process attempts (exponential, full jitter)."
    ),
    BackoffCap => (
        "backoff_cap",
        "--backoff-cap",
        Some("traffic.backoff_cap"),
        duration(true, DAY_S),
        Some("5s"),
        SIMULATE,
        "DURATION",
        "Longest backoff between in-process attempts."
    ),
    SweepPeriod => (
        "sweep_period",
        "--sweep-period",
        Some("traffic.sweep_period"),
        duration_from(MIN_SWEEP_PERIOD_S, SWEEP_PERIOD_WHY, DAY_S),
        Some("60s"),
        SIMULATE | SERVE,
        "DURATION",
        "How often the sweeper runs, in simulated time (at least 1s)."
    ),
    SweepBatch => (
        "sweep_batch",
        "--sweep-batch",
        Some("traffic.sweep_batch"),
        Kind::Count {
            min: 1,
            max: 1_000_000
        },
        Some("10000"),
        SIMULATE | SERVE,
        "RECORDS",
        "Records the sweeper deletes per batch."
    ),
    Sweeper => (
        "sweeper",
        "--sweeper",
        Some("traffic.sweeper"),
        Kind::Choice(crate::sweeper::SweeperPlan::NAMES),
        Some("delete"),
        SIMULATE | SERVE,
        "STRATEGY",
        "How expired records go on PostgreSQL: batched DELETE (the seed's), or partitions by expiry dropped whole."
    ),
    // A partition per second of retention would be a typo: every lookup probes every partition.
    PartitionPeriod => (
        "partition_period",
        "--partition-period",
        Some("traffic.partition_period"),
        duration(true, 30.0 * DAY_S),
        None,
        SIMULATE | SERVE,
        "DURATION",
        "With --sweeper partitions: the range of one partition (default: a quarter of the retention, at least 1 min)."
    ),
    // Each point is a row in the series tables and a vertex in the chart.
    SeriesPoints => (
        "series_points",
        "--series-points",
        Some("traffic.series_points"),
        Kind::Count {
            min: 2,
            max: 100_000
        },
        Some("240"),
        SIMULATE,
        "N",
        "Points of the keys-in-the-store time series."
    ),
    // Engine
    Retention => (
        "retention",
        "--retention",
        Some("engine.retention"),
        duration(true, 365.0 * DAY_S),
        Some("24h"),
        BOTH | SERVE,
        "DURATION",
        "Retention after completion, e.g. 24h or 3d; simulate takes a comma-separated list (1h,24h,3d) and runs each.",
        list = 32
    ),
    Lease => (
        "lease",
        "--lease",
        Some("engine.lease"),
        duration(true, DAY_S),
        Some("30s"),
        SIMULATE | SERVE,
        "DURATION",
        "Lease length (seed: 30s)."
    ),
    CarrierTimeout => (
        "carrier_timeout",
        "--carrier-timeout",
        Some("engine.carrier_timeout"),
        duration(true, DAY_S),
        Some("20s"),
        SIMULATE | SERVE,
        "DURATION",
        "Carrier call timeout (seed: 20s, inside the lease)."
    ),
    KeyScope => (
        "key_scope",
        "--key-scope",
        Some("engine.key_scope"),
        Kind::Choice(&["per_caller", "global"]),
        Some("per_caller"),
        SIMULATE | SERVE,
        "SCOPE",
        "Key scope: per-caller (correct) or global (the seed's collision failure)."
    ),
    OrderSpace => (
        "order_space",
        "--order-space",
        Some("engine.order_space"),
        Kind::Choice(&["shared", "per_tenant"]),
        Some("shared"),
        SIMULATE | SERVE,
        "SPACE",
        "Whose orders an order id names: shared by all callers (the seed's: one label per parcel across callers) or per-tenant (tenants number their own orders; labels unique per tenant)."
    ),
    RecordPlacement => (
        "record_placement",
        "--record-placement",
        Some("engine.record_placement"),
        Kind::Choice(&["same_transaction", "separate_store"]),
        Some("same_transaction"),
        SIMULATE | SERVE,
        "PLACEMENT",
        "Key record and label in one transaction, or separate-store (not atomic)."
    ),
    CarrierKey => (
        "carrier_key",
        "--carrier-key",
        Some("engine.carrier_key"),
        Kind::Choice(&["derived", "none"]),
        Some("derived"),
        SIMULATE | SERVE,
        "KEY",
        "What the carrier call carries: the derived key, or none."
    ),
    // Carrier
    CarrierLatency => (
        "carrier_latency",
        "--carrier-latency",
        Some("carrier.latency"),
        duration(false, 3_600.0),
        None,
        SIMULATE | SERVE | CARRIER,
        "DURATION",
        "A fixed carrier latency, instead of the log-normal of --carrier-median and --carrier-p99."
    ),
    // The latencies the seed's 0.1 % timeout rate is calibrated against (sim::replay::
    // SEED_CARRIER_LATENCY): with a 250 ms deadline a log-normal of 30 ms / 100 ms outlasts it
    // on 2.2e-5 of calls, where 40 ms / 200 ms would on 0.4 %, four times the seed's whole rate.
    CarrierLatencyMedian => (
        "carrier_latency_median",
        "--carrier-median",
        Some("carrier.latency.median"),
        duration(true, 3_600.0),
        Some("30ms"),
        SIMULATE | SERVE | CARRIER,
        "DURATION",
        "Median carrier latency (log-normal)."
    ),
    CarrierLatencyP99 => (
        "carrier_latency_p99",
        "--carrier-p99",
        Some("carrier.latency.p99"),
        duration(true, 3_600.0),
        Some("100ms"),
        SIMULATE | SERVE | CARRIER,
        "DURATION",
        "99th-percentile carrier latency (log-normal)."
    ),
    // 0s is a carrier that keeps no key: every late retry then misses its window.
    CarrierWindow => (
        "carrier_window",
        "--carrier-window",
        Some("carrier.window"),
        duration(false, 365.0 * DAY_S),
        Some("24h"),
        BOTH | SERVE | CARRIER,
        "DURATION",
        "How long the carrier recognises our derived key."
    ),
    LabelPriceUsd => (
        "label_price_usd",
        "--label-price",
        Some("carrier.label_price_usd"),
        at_least(0.0, MAX_USD),
        Some("6"),
        BOTH | SERVE | CARRIER,
        "USD",
        "Price of one label (seed: $6.00)."
    ),
    HangFraction => (
        "hang_fraction",
        "--carrier-hang-fraction",
        Some("carrier.hang_fraction"),
        Kind::Fraction,
        Some("0"),
        SIMULATE | SERVE | CARRIER,
        "FRACTION",
        "Fraction of carrier calls that hang past the timeout after buying the label.",
        aliases = &["carrier-hang-rate"]
    ),
    ErrorFraction => (
        "error_fraction",
        "--carrier-error-fraction",
        Some("carrier.error_fraction"),
        Kind::Fraction,
        Some("0"),
        SIMULATE | SERVE | CARRIER,
        "FRACTION",
        "Fraction of carrier calls refused outright."
    ),
    // Model
    BytesPerRecord => (
        "bytes_per_record",
        "--bytes-per-record",
        Some("model.bytes_per_record"),
        above(0.0, 1e6),
        None,
        BOTH,
        "BYTES",
        "Stored size of one key record with index overhead, as the model assumes it (default: key + 32 B hash + response + 144 B of row and index overhead, 512 B at the seed's sizes; the simulator measures its own)."
    ),
    Replicas => (
        "replicas",
        "--replicas",
        Some("model.replicas"),
        at_least(1.0, 100.0),
        Some("2"),
        BOTH,
        "COPIES",
        "Full copies of the store paid for: a primary and a standby are 2."
    ),
    StorageUsdPerGbMonth => (
        "storage_usd_per_gb_month",
        "--storage-price",
        Some("model.storage_usd_per_gb_month"),
        at_least(0.0, 1e4),
        Some("0.1"),
        BOTH,
        "USD_PER_GB_MONTH",
        "Storage price per GB-month (decimal GB)."
    ),
    // Managed in-memory stores list at about $0.2/h for a 13 GiB node: ~$12 per GB-month,
    // a hundred times disk. Used where a store keeps its records in RAM (Redis).
    MemoryUsdPerGbMonth => (
        "memory_usd_per_gb_month",
        "--memory-price",
        Some("model.memory_usd_per_gb_month"),
        at_least(0.0, 1e4),
        Some("12"),
        FILE_ONLY,
        "USD_PER_GB_MONTH",
        "Memory price per GB-month, for a store that keeps its records in RAM (Redis in the report's store comparison)."
    ),
    UnlabelledParcelUsd => (
        "unlabelled_parcel_usd",
        "--unlabelled-cost",
        Some("model.unlabelled_parcel_usd"),
        at_least(0.0, MAX_USD),
        Some("10"),
        BOTH,
        "USD",
        "Cost of one parcel left without a label."
    ),
    // The late-retry distribution
    RetryCdf => (
        "retry_cdf",
        "--retry-cdf",
        None,
        Kind::Path,
        None,
        BOTH,
        "FILE",
        "Measured late-retry distribution: CSV lines of `delay,cumulative fraction`, e.g. `90s,0.85`."
    ),
    RetryHead => (
        "retry_head",
        "--retry-head",
        None,
        Kind::Choice(&["log_uniform", "at_first_point"]),
        Some("log_uniform"),
        BOTH,
        "HEAD",
        "How retries below the first point are spread: log-uniform from --retry-min-delay, or all at the first point."
    ),
    RetryMinDelay => (
        "retry_min_delay",
        "--retry-min-delay",
        None,
        duration(true, 3_600.0),
        Some("250ms"),
        BOTH,
        "DURATION",
        "Earliest retry for a log-uniform head."
    ),
    RetryTail => (
        "retry_tail",
        "--retry-tail",
        None,
        Kind::Choice(&["log_linear", "at_horizon"]),
        Some("log_linear"),
        BOTH,
        "TAIL",
        "How retries beyond the last point are spread: log-linear to 100% at --retry-horizon, or all at it."
    ),
    RetryHorizon => (
        "retry_horizon",
        "--retry-horizon",
        None,
        duration(true, 365.0 * DAY_S),
        Some("30d"),
        BOTH,
        "DURATION",
        "Delay by which every retry has arrived."
    ),
    // Budgets: limits on the simulated figures.
    MaxStoreGb => (
        "max_store_gb",
        "--max-store-gb",
        Some("budgets.max_store_gb"),
        at_least(0.0, 1e9),
        None,
        BOTH,
        "GB",
        "Steady-state store size budget, decimal GB; the decision recommends no retention whose store exceeds it."
    ),
    MaxDuplicatesPerDay => (
        "max_duplicates_per_day",
        "--max-duplicates-per-day",
        Some("budgets.max_duplicates_per_day"),
        Kind::PerDay,
        None,
        BOTH,
        "LABELS",
        "Real duplicate labels per day budget; for `estimate`, the decision's duplicates target (default: fewer than one a month, 1/30 a day)."
    ),
    WithoutCarrierWindow => (
        "without_carrier_window",
        "--without-carrier-window",
        Some("budgets.without_carrier_window"),
        Kind::Switch,
        Some("false"),
        BOTH,
        "",
        "Decide on our keys alone: count every retry after our purge as a duplicate, even while the carrier still knows its derived key."
    ),
    MaxCostPerDay => (
        "max_cost_per_day",
        "--max-cost-per-day",
        Some("budgets.max_cost_per_day"),
        at_least(0.0, 1e12),
        None,
        BOTH,
        "USD",
        "Storage plus duplicate labels budget, USD per day."
    ),
    MaxStoreGrowth => (
        "max_store_growth",
        "--max-store-growth",
        Some("budgets.max_store_growth"),
        at_least(0.0, 1e6),
        None,
        FILE_ONLY,
        "FRACTION",
        "Largest growth of the store size against `report --baseline`, as a fraction (0.10: 10 %); only a change the intervals call real counts."
    ),
}

/// The range of a rate-per-day knob (budgets in duplicates a day).
const PER_DAY_RANGE: (f64, f64) = (0.0, 1e12);

impl Knob {
    /// The numbers this knob takes, `(lowest, highest)` in its unit (seconds for durations,
    /// bytes for sizes), for code that offers the knob's values elsewhere (the report's
    /// what-if panel checks a link's values against it); `None` for words, paths and switches.
    pub fn numeric_range(&self) -> Option<(f64, f64)> {
        match self.kind {
            Kind::Duration { min, max_s, .. } => Some((min.map_or(0.0, |(m, _)| m), max_s)),
            Kind::Number { min, max, .. } => Some((min, max)),
            Kind::Fraction => Some((0.0, 1.0)),
            Kind::Count { min, max } => Some((min as f64, max as f64)),
            Kind::PerDay => Some(PER_DAY_RANGE),
            Kind::Size => Some((1.0, crate::payload::MAX_SIZE_BYTES)),
            Kind::Choice(_) | Kind::Path | Kind::Switch => None,
        }
    }
}

/// The knob `id` names.
pub fn knob(id: KnobId) -> &'static Knob {
    &KNOBS[id as usize]
}

/// The knob called `name` (its `Settings` field name), for names that come from outside the
/// code: the page's what-if controls.
pub fn by_name(name: &str) -> Option<&'static Knob> {
    KNOBS.iter().find(|k| k.name == name)
}

#[cfg(test)]
mod ids {
    use super::*;

    #[test]
    fn every_id_is_its_own_row() {
        for (i, k) in KNOBS.iter().enumerate() {
            assert_eq!(k.id as usize, i, "{}", k.name);
            assert!(std::ptr::eq(knob(k.id), k));
        }
    }
}
