#!/usr/bin/env bash
# Runs each fuzz target for SECONDS (default 30), starting from its committed seeds (seeds/NAME)
# plus whatever earlier runs found (corpus/NAME, not committed). A crash stops the script with
# libFuzzer's report; the input is saved under artifacts/NAME/ and is to be kept as a regression
# test (tests/it/props.rs or the module's own tests).
#
#   fuzz/run.sh 30                 # every target, 30 s each (2 min plus one build)
#   fuzz/run.sh 3600 body          # one target for an hour
#
# The toolchain is stable: cargo-fuzz passes nightly-only -Z flags (the sanitizer), which
# RUSTC_BOOTSTRAP=1 lets stable rustc accept. Needs `cargo install cargo-fuzz`.
set -euo pipefail

seconds="${1:-30}"
if ! [[ "$seconds" =~ ^[1-9][0-9]{0,6}$ ]]; then
    echo "usage: fuzz/run.sh SECONDS [TARGET...]  (SECONDS: a whole number of seconds, 1 to 9999999)" >&2
    exit 2
fi
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    targets=(body scenario duration retry_cdf)
fi

cd "$(dirname "$0")"
if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "cargo-fuzz is not installed: cargo install cargo-fuzz" >&2
    exit 2
fi
export RUSTC_BOOTSTRAP=1

for t in "${targets[@]}"; do
    if [ ! -d "seeds/$t" ]; then
        echo "no fuzz target $t (have: $(ls seeds | tr '\n' ' '))" >&2
        exit 2
    fi
    mkdir -p "corpus/$t"
    echo "== $t: ${seconds} s"
    # -max_len bounds one input (scenario files are a few KB); -timeout and -rss_limit_mb turn a
    # hang or a runaway allocation into a finding instead of a stuck run.
    cargo fuzz run "$t" "corpus/$t" "seeds/$t" -- \
        -max_total_time="$seconds" -max_len=8192 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
done
