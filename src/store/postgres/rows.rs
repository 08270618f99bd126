//! Rows read back into the store's types, by column position: the orders are
//! `sql::KEY_COLUMNS` and `sql::LABEL_COLUMNS`. Also the engine's millisecond clock as
//! `timestamptz`, both ways, since rows and parameters share it.

use crate::clock::Millis;
use crate::store::{KeyRow, KeyState, LabelRow, StoreError};
use postgres::Row;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use uuid::Uuid;

pub(super) fn to_time(ms: Millis) -> SystemTime {
    if ms >= 0 {
        UNIX_EPOCH + Duration::from_millis(ms as u64)
    } else {
        UNIX_EPOCH - Duration::from_millis(ms.unsigned_abs())
    }
}

pub(super) fn to_millis(t: SystemTime) -> Millis {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_millis() as Millis,
        Err(before) => -(before.duration().as_millis() as Millis),
    }
}

pub(super) fn key_row(r: &Row) -> Result<KeyRow, StoreError> {
    let corrupt = |e: postgres::Error| StoreError::Corrupt(format!("idempotency_keys row: {e}"));
    let status: Option<i32> = r.try_get(4).map_err(corrupt)?;
    let response_status = status
        .map(|s| {
            u16::try_from(s).map_err(|_| {
                StoreError::Corrupt(format!("response_status {s} is not an HTTP status"))
            })
        })
        .transpose()?;
    let state: String = r.try_get(1).map_err(corrupt)?;
    Ok(KeyRow {
        request_hash: r.try_get(0).map_err(corrupt)?,
        state: KeyState::parse(&state)?,
        locked_until_ms: r
            .try_get::<_, Option<SystemTime>>(2)
            .map_err(corrupt)?
            .map(to_millis),
        lease_token: r
            .try_get::<_, Option<Uuid>>(3)
            .map_err(corrupt)?
            .map(|u| *u.as_bytes()),
        response_status,
        response_body: r.try_get(5).map_err(corrupt)?,
        created_at_ms: to_millis(r.try_get(6).map_err(corrupt)?),
        expires_at_ms: to_millis(r.try_get(7).map_err(corrupt)?),
    })
}

pub(super) fn label_row(r: &Row) -> Result<LabelRow, StoreError> {
    let corrupt = |e: postgres::Error| StoreError::Corrupt(format!("labels row: {e}"));
    Ok(LabelRow {
        label_id: r.try_get(0).map_err(corrupt)?,
        order_id: r.try_get(1).map_err(corrupt)?,
        parcel_no: r.try_get(2).map_err(corrupt)?,
        label_version: r.try_get(3).map_err(corrupt)?,
        tracking_no: r.try_get(4).map_err(corrupt)?,
        cost_cents: r.try_get(5).map_err(corrupt)?,
        created_by_key: r.try_get(6).map_err(corrupt)?,
        order_space: r.try_get(7).map_err(corrupt)?,
    })
}

pub(super) fn count(r: &Row) -> Result<u64, StoreError> {
    r.try_get::<_, i64>(0)
        .map(|n| n.max(0) as u64)
        .map_err(|e| StoreError::Corrupt(format!("count: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn millis_round_trip_through_system_time() {
        for ms in [0, 1, 1_767_225_600_050, -1_500] {
            assert_eq!(to_millis(to_time(ms)), ms);
        }
    }
}
