//! A fixed number of first-run creates on the engine or the raw-SQL baseline, for an
//! instruction counter: `scripts/callgrind-create` runs it under callgrind and divides the
//! instructions of `CreateLoop::run` by the creates (docs/bench.md, "Instructions per create").
//!
//! ```text
//! cargo build --release --example callgrind_create
//! target/release/examples/callgrind_create engine 5000        # SIDE CREATES [PREFILL]
//! ```

use idemcalc::bench::creates::{CreateLoop, Side};

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: callgrind_create engine|baseline CREATES [PREFILL]";
    let side = args
        .first()
        .and_then(|s| Side::parse(s))
        .ok_or_else(|| anyhow::anyhow!("{usage}: the side must be engine or baseline"))?;
    let creates: u64 = args
        .get(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| anyhow::anyhow!("{usage}: CREATES must be a whole number"))?;
    let prefill: u64 = match args.get(2) {
        None => 10_000,
        Some(s) => s
            .parse()
            .map_err(|_| anyhow::anyhow!("{usage}: PREFILL must be a whole number, not {s}"))?,
    };
    let dir = tempfile::tempdir()?;
    let mut side_loop = CreateLoop::open(side, dir.path(), prefill)?;
    let done = side_loop.run(creates).map_err(anyhow::Error::msg)?;
    let labels = side_loop.store().count_labels()?;
    if labels != prefill + done {
        anyhow::bail!("{labels} labels in the store, expected {}", prefill + done);
    }
    println!("{done} creates; {labels} labels in the store");
    Ok(())
}
