//! The simulator's request log (`simulate --request-log`): what each caller sent and got back,
//! in the columns `idemcalc fit` reads, so a fitted scenario can be checked against the
//! simulation that produced its log.

use serde::Serialize;
use std::collections::HashMap;

/// One request as its caller saw it: a row of the request log `simulate --request-log` writes
/// and `fit` reads.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LogRow {
    pub time: f64,
    pub caller: String,
    pub idempotency_key: String,
    /// 0 when the caller heard nothing (a lost request or a lost reply).
    pub status: u16,
    pub response_bytes: Option<u64>,
    pub replayed: Option<bool>,
    /// How many real requests this row stands for (the simulator replays a weighted sample).
    pub weight: f64,
}

/// The simulator's request log: filled from two calls in the replay loop when asked for, and
/// nothing at all otherwise.
#[derive(Debug, Clone, Default)]
pub struct RequestLog {
    enabled: bool,
    rows: Vec<LogRow>,
    by_send: HashMap<u64, usize>,
}

impl RequestLog {
    pub fn new(enabled: bool) -> Self {
        RequestLog {
            enabled,
            ..RequestLog::default()
        }
    }

    /// A request put on the wire; it stays "no answer" unless [`Self::replied`] follows.
    pub fn sent(&mut self, send_id: u64, at_ms: i64, caller: &str, key: &str, weight: f64) {
        if !self.enabled {
            return;
        }
        self.by_send.insert(send_id, self.rows.len());
        self.rows.push(LogRow {
            time: at_ms as f64 / 1000.0,
            caller: caller.to_string(),
            idempotency_key: key.to_string(),
            status: 0,
            response_bytes: None,
            replayed: None,
            weight,
        });
    }

    /// The answer reached the caller.
    pub fn replied(&mut self, send_id: u64, response: &crate::engine::Response) {
        if let Some(i) = self.by_send.remove(&send_id) {
            let row = &mut self.rows[i];
            row.status = response.status;
            row.response_bytes = Some(response.body.len() as u64);
            row.replayed = Some(response.replayed);
        }
    }

    /// Rows in the order the requests were sent.
    pub fn rows(&self) -> Vec<LogRow> {
        let mut rows = self.rows.clone();
        rows.sort_by(|a, b| a.time.total_cmp(&b.time));
        rows
    }
}
