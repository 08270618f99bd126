//! `GET /metrics`: what the server did, in the Prometheus exposition format (OpenMetrics text,
//! through the `prometheus-client` crate), with the seed's "Detection" column as counters to
//! alert on.

use crate::carrier::CarrierStats;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

type Labels = [(&'static str, String); 2];

pub struct Metrics {
    registry: Registry,
    requests: Family<Labels, Counter>,
    latency: Histogram,
    pub keys_in_store: Gauge,
    pub sweeper_batches: Counter,
    pub sweeper_rows: Counter,
    pub sweeper_failures: Counter,
    pub purged_key_requests: Counter,
    pub cross_caller_replays: Counter,
    pub takeovers: Counter,
    pub takeovers_while_owner_alive: Counter,
    pub unlabelled_purchases: Counter,
    carrier_purchases: Counter,
    carrier_replays: Counter,
    carrier_refusals: Counter,
    carrier_duplicate_purchases: Counter,
    pub connections_open: Gauge,
    pub in_flight: Gauge,
    /// 1 while this server is the one that sweeps the store (always, unless it is one of
    /// several replicas: `serve --replica`, `serve::leader`).
    pub sweeper_leader: Gauge,
    /// Times this replica became the sweeping one.
    pub sweeper_elected: Counter,
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("idemcalc");
        let requests = Family::<Labels, Counter>::default();
        registry.register(
            "requests",
            "Requests answered, by HTTP status and outcome (the seed's status table, or the server's own problem code)",
            requests.clone(),
        );
        // 50 µs to about 26 s.
        let latency = Histogram::new(exponential_buckets(0.000_05, 2.0, 20));
        registry.register(
            "request_duration_seconds",
            "Time from a CreateLabel request's headers to its answer, body read and carrier wait included",
            latency.clone(),
        );
        let m = Metrics {
            registry,
            requests,
            latency,
            keys_in_store: Gauge::default(),
            sweeper_batches: Counter::default(),
            sweeper_rows: Counter::default(),
            sweeper_failures: Counter::default(),
            purged_key_requests: Counter::default(),
            cross_caller_replays: Counter::default(),
            takeovers: Counter::default(),
            takeovers_while_owner_alive: Counter::default(),
            unlabelled_purchases: Counter::default(),
            carrier_purchases: Counter::default(),
            carrier_replays: Counter::default(),
            carrier_refusals: Counter::default(),
            carrier_duplicate_purchases: Counter::default(),
            connections_open: Gauge::default(),
            in_flight: Gauge::default(),
            sweeper_leader: Gauge::default(),
            sweeper_elected: Counter::default(),
        };
        m.register_rest()
    }

    fn register_rest(mut self) -> Self {
        let r = &mut self.registry;
        r.register(
            "keys_in_store",
            "Key records in the store, counted after each sweep",
            self.keys_in_store.clone(),
        );
        r.register(
            "sweeper_batches",
            "Batches the sweeper deleted (the seed's batched DELETE, or partitions dropped)",
            self.sweeper_batches.clone(),
        );
        r.register(
            "sweeper_rows",
            "Key records the sweeper purged",
            self.sweeper_rows.clone(),
        );
        r.register(
            "sweeper_failures",
            "Sweeps that failed on the store",
            self.sweeper_failures.clone(),
        );
        r.register(
            "purged_key_requests",
            "Requests claiming a key the sweeper had purged (the seed's alert: each is a possible duplicate). Counted from a Bloom filter of purged keys, so false positives at its rate",
            self.purged_key_requests.clone(),
        );
        r.register(
            "cross_caller_replays",
            "Replays handed to a caller other than the record's creator (possible only under --key-scope global; creators remembered in a bounded recent set)",
            self.cross_caller_replays.clone(),
        );
        r.register(
            "takeovers",
            "Expired leases taken over",
            self.takeovers.clone(),
        );
        r.register(
            "takeovers_while_owner_alive",
            "Takeovers while the attempt that held the lease was still running in this server (lease shorter than the slowest call)",
            self.takeovers_while_owner_alive.clone(),
        );
        r.register(
            "unlabelled_purchases",
            "Labels the carrier sold that the labels table's natural key (one label per parcel) then turned away, answering the parcel's existing label: invoice lines without a label of ours, seen by this server, with the carrier in process or behind HTTP",
            self.unlabelled_purchases.clone(),
        );
        r.register(
            "carrier_purchases",
            "Labels the carrier sold (each billed)",
            self.carrier_purchases.clone(),
        );
        r.register(
            "carrier_replays",
            "Carrier calls answered from the carrier's own key store",
            self.carrier_replays.clone(),
        );
        r.register(
            "carrier_refusals",
            "Carrier calls refused",
            self.carrier_refusals.clone(),
        );
        r.register(
            "carrier_duplicate_purchases",
            "Labels the carrier sold for a parcel that already had one: invoice lines without a label of ours",
            self.carrier_duplicate_purchases.clone(),
        );
        r.register(
            "connections_open",
            "HTTP connections open",
            self.connections_open.clone(),
        );
        r.register(
            "in_flight",
            "CreateLabel requests being handled",
            self.in_flight.clone(),
        );
        r.register(
            "sweeper_leader",
            "1 while this server sweeps the store: always for a server alone, for one replica at a time among several (serve --replica)",
            self.sweeper_leader.clone(),
        );
        r.register(
            "sweeper_elected",
            "Times this server became the one that sweeps",
            self.sweeper_elected.clone(),
        );
        self
    }

    /// Says which replica answers: `idemcalc_replica{replica="NAME"} 1` (an info metric), so
    /// metrics scraped through a balancer, or from every replica, tell their source apart.
    pub fn identify(&mut self, replica: &str) {
        let info = prometheus_client::metrics::info::Info::new(vec![(
            "replica".to_string(),
            replica.to_string(),
        )]);
        self.registry.register(
            "replica",
            "Which replica of the service this is (serve --replica NAME)",
            info,
        );
    }

    pub fn answered(&self, status: u16, outcome: &str, seconds: Option<f64>) {
        self.requests
            .get_or_create(&[
                ("status", status.to_string()),
                ("outcome", outcome.to_string()),
            ])
            .inc();
        if let Some(s) = seconds {
            self.latency.observe(s);
        }
    }

    /// The exposition text, with the carrier's counts as of now.
    pub fn render(&self, carrier: &CarrierStats) -> String {
        let set = |c: &Counter, to: u64| {
            c.inc_by(to.saturating_sub(c.get()));
        };
        set(&self.carrier_purchases, carrier.purchases);
        set(&self.carrier_replays, carrier.replays);
        set(&self.carrier_refusals, carrier.refusals);
        set(
            &self.carrier_duplicate_purchases,
            carrier.duplicate_purchases,
        );
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_names_every_detection_counter() {
        let m = Metrics::new();
        m.answered(201, "created", Some(0.002));
        m.takeovers.inc();
        let text = m.render(&CarrierStats {
            purchases: 3,
            ..CarrierStats::default()
        });
        for needle in [
            r#"idemcalc_requests_total{status="201",outcome="created"} 1"#,
            "idemcalc_takeovers_total 1",
            "idemcalc_carrier_purchases_total 3",
            "idemcalc_purged_key_requests_total 0",
            "idemcalc_request_duration_seconds_count 1",
            "# EOF",
        ] {
            assert!(text.contains(needle), "{needle} not in\n{text}");
        }
    }
}
