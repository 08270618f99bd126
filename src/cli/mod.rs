//! Command-line entry point. Kept minimal on the `model` branch: just enough to run
//! `idemcalc estimate`; the full CLI lives on main.

pub mod estimate;

use clap::Parser as _;

#[derive(clap::Parser, Debug)]
#[command(
    name = "idemcalc",
    version,
    about = "Size and price idempotency-key stores"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(clap::Subcommand, Debug)]
pub enum Command {
    /// Store size, what the keys save, how late retries arrive, and the cheapest retention.
    Estimate(estimate::EstimateArgs),
}

/// Runs the command line; returns the exit code (0 ok, 2 bad input or failure).
pub fn main() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return e.exit_code();
        }
    };
    let result = match &cli.command {
        Command::Estimate(args) => estimate::run(args),
    };
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("error: {e:#}");
            2
        }
    }
}
