//! The store's tables: their DDL per schema version, and the migration that creates them once,
//! under a lock, refusing a schema another program or a newer idemcalc wrote.

use super::config::{Sweeper, quote_ident};
use super::pool::PoolInner;
use crate::store::{StoreError, pg_message};
use postgres::Client;
use postgres::error::SqlState;

/// Bumped whenever the schema changes; each version's DDL is applied once, in order, and a schema
/// written by a newer idemcalc is refused rather than misread.
pub const SCHEMA_VERSION: i32 = 2;

/// Version 1 of the schema. `{s}` is the quoted schema name; `{key}` (the key table's primary
/// key), `{partitioning}` and `{expires_index}` depend on the sweeper (see [`schema_v1`]). Columns are
/// ordered for the heap tuple's alignment (8-byte timestamps first, then 4-byte, then
/// byte-aligned and variable width): in the seed's order each `timestamptz` after a text column
/// costs up to 7 bytes of padding. The state is the seed's enum: 4 bytes where `text`
/// 'completed' takes 10.
const SCHEMA_V1: &str = "
CREATE TYPE {s}.key_state AS ENUM ('started', 'completed');
CREATE TABLE {s}.idempotency_keys (
    created_at      timestamptz    NOT NULL,
    expires_at      timestamptz    NOT NULL,
    locked_until    timestamptz,
    response_status int4,
    state           {s}.key_state NOT NULL,
    lease_token     uuid,
    request_hash    bytea          NOT NULL,
    caller_id       text           NOT NULL,
    idem_key        text           NOT NULL,
    -- text, not the seed's jsonb: jsonb re-renders JSON (spaces after ':' and ',', keys reordered
    -- by length), and a replay must return the saved body byte for byte.
    response_body   text,
    {key}
){partitioning};
{expires_index}
CREATE TABLE {s}.labels (
    -- Insertion order, as SQLite's rowid gives it, so both stores list labels alike.
    label_seq      bigserial NOT NULL,
    order_id       bigint    NOT NULL,
    parcel_no      bigint    NOT NULL,
    label_version  bigint    NOT NULL,
    cost_cents     bigint    NOT NULL,
    label_id       text      NOT NULL,
    tracking_no    text      NOT NULL,
    created_by_key text      NOT NULL,
    caller_id      text      NOT NULL DEFAULT '',
    CONSTRAINT labels_pkey PRIMARY KEY (label_id),
    CONSTRAINT labels_parcel_version UNIQUE (caller_id, order_id, parcel_no, label_version)
);
";

/// Version 2: the labels' tenant column becomes the order space, empty when every caller shares
/// one (the seed's `UNIQUE (order_id, parcel_no)` across callers), the tenant otherwise
/// (`engine::OrderSpace`). A rename: rows keep their values, and a store written by version 1
/// held per-caller order spaces.
const SCHEMA_V2: &str = "
ALTER TABLE {s}.labels RENAME COLUMN caller_id TO order_space;
ALTER TABLE {s}.labels RENAME CONSTRAINT labels_parcel_version TO labels_order_parcel_version;
";

/// Version 1's DDL for a sweeper. With partitions, the key table is partitioned by range of
/// `expires_at`, and a primary key on a partitioned table must contain the partition key: the
/// seed's `UNIQUE (caller_id, idem_key)` cannot be declared, so claims serialise on a per-key
/// advisory lock instead (see
/// [`Statements`](super::statements::Statements)). No `expires_at` index: a partition is dropped
/// whole, never searched by expiry.
fn schema_v1(sweeper: Sweeper) -> String {
    let (key, partitioning, expires_index) = match sweeper {
        Sweeper::Delete => (
            "CONSTRAINT idempotency_keys_pkey PRIMARY KEY (caller_id, idem_key)",
            "",
            "CREATE INDEX idempotency_keys_expires_at ON {s}.idempotency_keys (expires_at);",
        ),
        Sweeper::Partitions { .. } => (
            "CONSTRAINT idempotency_keys_pkey PRIMARY KEY (caller_id, idem_key, expires_at)",
            " PARTITION BY RANGE (expires_at)",
            "",
        ),
    };
    SCHEMA_V1
        .replace("{key}", key)
        .replace("{partitioning}", partitioning)
        .replace("{expires_index}", expires_index)
}

impl PoolInner {
    /// A transaction holding the schema's catalog lock: `CREATE … IF NOT EXISTS` alone is not
    /// safe against a concurrent identical create.
    pub(super) fn catalog_tx<'c>(
        &self,
        client: &'c mut Client,
    ) -> Result<postgres::Transaction<'c>, StoreError> {
        let mut tx = client.transaction().map_err(|e| self.pg_err(e))?;
        tx.execute(
            "SELECT pg_advisory_xact_lock($1)",
            &[&migration_lock_key(&self.options.schema)],
        )
        .map_err(|e| self.pg_err(e))?;
        Ok(tx)
    }

    /// Creates the schema and applies every missing version, under a transaction-scoped advisory
    /// lock so two processes opening a new schema at once do not race on the catalog (`CREATE …
    /// IF NOT EXISTS` alone is not safe against a concurrent identical create).
    pub(super) fn migrate(&self, client: &mut Client) -> Result<(), StoreError> {
        let schema = quote_ident(&self.options.schema);
        let mut tx = self.catalog_tx(client)?;
        tx.batch_execute(&format!(
            "CREATE SCHEMA IF NOT EXISTS {schema};
             CREATE TABLE IF NOT EXISTS {schema}.schema_version (version int4 NOT NULL PRIMARY KEY);"
        ))
        .map_err(|e| {
            let text = pg_message(&e);
            self.open_err(format!(
                "cannot create schema `{}` ({text}); the user needs CREATE on the database, or an administrator can create the schema and grant it",
                self.options.schema
            ))
        })?;
        let version: i32 = tx
            .query_one(
                &format!("SELECT COALESCE(MAX(version), 0) FROM {schema}.schema_version"),
                &[],
            )
            .and_then(|r| r.try_get(0))
            .map_err(|e| self.pg_err(e))?;
        if version > SCHEMA_VERSION {
            return Err(self.open_err(format!(
                "the schema has version {version}, newer than this idemcalc understands ({SCHEMA_VERSION}); use a newer idemcalc or another schema (?schema=NAME)"
            )));
        }
        let migrations: [String; 2] = [schema_v1(self.options.sweeper), SCHEMA_V2.to_string()];
        for (i, ddl) in migrations.iter().enumerate() {
            let v = i as i32 + 1;
            if v <= version {
                continue;
            }
            tx.batch_execute(&ddl.replace("{s}", &schema))
                .map_err(|e| {
                    if e.code() == Some(&SqlState::DUPLICATE_TABLE)
                        || e.code() == Some(&SqlState::DUPLICATE_OBJECT)
                    {
                        self.open_err(format!(
                            "schema `{}` already holds tables idemcalc did not create ({}); name another schema with ?schema=NAME",
                            self.options.schema,
                            pg_message(&e)
                        ))
                    } else {
                        self.pg_err(e)
                    }
                })?;
            tx.execute(
                &format!("INSERT INTO {schema}.schema_version (version) VALUES ($1)"),
                &[&v],
            )
            .map_err(|e| self.pg_err(e))?;
        }
        let partitioned: bool = tx
            .query_one(
                "SELECT EXISTS (SELECT 1 FROM pg_partitioned_table
                                 WHERE partrelid = to_regclass($1))",
                &[&format!("{schema}.idempotency_keys")],
            )
            .and_then(|r| r.try_get(0))
            .map_err(|e| self.pg_err(e))?;
        let wanted = self.options.sweeper.partitioned();
        if let (true, Sweeper::Partitions { period_ms }) = (partitioned, self.options.sweeper) {
            // Partitions of two lengths would overlap: a schema keeps the period it began with.
            tx.batch_execute(&format!(
                "CREATE TABLE IF NOT EXISTS {schema}.partitioning (period_ms int8 NOT NULL)"
            ))
            .map_err(|e| self.pg_err(e))?;
            let kept: Option<i64> = tx
                .query_opt(&format!("SELECT period_ms FROM {schema}.partitioning"), &[])
                .and_then(|r| r.map(|r| r.try_get(0)).transpose())
                .map_err(|e| self.pg_err(e))?;
            match kept {
                None => {
                    tx.execute(
                        &format!("INSERT INTO {schema}.partitioning (period_ms) VALUES ($1)"),
                        &[&period_ms],
                    )
                    .map_err(|e| self.pg_err(e))?;
                }
                Some(p) if p != period_ms => {
                    return Err(self.open_err(format!(
                        "schema `{}` is partitioned by periods of {p} ms, not {period_ms} ms; give that --partition-period or name another schema with ?schema=NAME",
                        self.options.schema
                    )));
                }
                Some(_) => {}
            }
        }
        if partitioned != wanted {
            let made_for = if partitioned { "partitions" } else { "delete" };
            return Err(self.open_err(format!(
                "schema `{}` was created for --sweeper {made_for}, and a schema keeps its layout; name another schema with ?schema=NAME",
                self.options.schema
            )));
        }
        tx.commit().map_err(|e| self.pg_err(e))
    }
}

/// A stable 64-bit key for the schema's migration lock (FNV-1a of a prefix and the name), so
/// different schemas migrate independently.
fn migration_lock_key(schema: &str) -> i64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in "idemcalc-migrate:".bytes().chain(schema.bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h as i64
}
