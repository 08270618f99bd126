use crate::serve::carrier::CarrierServeConfig;
use crate::settings::flags::Flags;
use crate::settings::knobs::CARRIER;
use std::net::SocketAddr;

#[derive(Debug, clap::Args)]
#[command(after_help = "\
Routes: POST /v1/labels buys a label: Idempotency-Key (the label service's derived key; absent,
a call without a key) and {\"order_id\", \"parcel_no\", \"label_version\", \"service\",
\"weight_g\"}; 201 with {\"label_id\", \"tracking_no\", \"cost_cents\"} after the carrier's
latency (Idempotent-Replayed: true when the key was seen within --carrier-window), 422 with
{\"reason\"} when refused (nothing bought; reason idempotency_key_reused when the key was used
within the window for another purchase), 400 with {\"reason\"} for a purchase no label service
sends (order, parcel or version below 1, weight not above 0, an empty key, two key headers).
A request head must arrive within 10 s, its body too (at most 64 KiB). GET /v1/invoice: every
billed purchase, to reconcile against the labels a service stored. GET /healthz.

--time-scale N runs the carrier's clock (its latencies, its key window) N times faster than the
wall, as `idemcalc serve --time-scale N` does the engine's; give both the same N.

SIGTERM or Ctrl-C stops it.")]
pub struct CarrierArgs {
    /// The carrier's knobs, as `simulate` and `serve` take them.
    #[command(flatten)]
    pub knobs: Flags<CARRIER>,
    /// Address and port to listen on; port 0 picks a free one (printed at start).
    #[arg(long, value_name = "ADDR:PORT", default_value = "127.0.0.1:8081")]
    pub listen: SocketAddr,
    /// Run the carrier's clock this many times faster than the wall (1 to 1000000).
    #[arg(long, value_name = "N", default_value_t = 1.0)]
    pub time_scale: f64,
    /// The most invoice lines kept in memory (about 550 B each), 1 to 100000000: past it the
    /// oldest are dropped and GET /v1/invoice says how many in its Idemcalc-Invoice-Dropped
    /// header. What it remembers of sales, to number tracking numbers and count duplicates, is
    /// kept for its key window only.
    #[arg(long, value_name = "LINES", default_value_t = 1_000_000,
          value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
    pub invoice_lines: u64,
}

pub fn run(args: &CarrierArgs) -> anyhow::Result<i32> {
    if !(1.0..=1e6).contains(&args.time_scale) {
        anyhow::bail!(
            "--time-scale {}: give a factor from 1 (real time) to 1000000",
            args.time_scale
        );
    }
    let settings = args.knobs.settings()?;
    let config = CarrierServeConfig {
        listen: args.listen,
        carrier: settings.carrier_config(),
        time_scale: args.time_scale,
        invoice_lines: args.invoice_lines as usize,
    };
    let mut printed = Ok(());
    crate::serve::carrier::run(config, |addr| {
        // The one line on stdout, for scripts (and tests) that start the carrier on port 0.
        printed = super::print(&format!("listening on http://{addr}\n"));
    })?;
    printed?;
    Ok(0)
}
