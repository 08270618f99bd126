//! Logs larger than memory: once the requests read pass [`SPILL_ROWS`], every request goes to
//! one of several hundred temporary files chosen by its (caller, key) hash, so each key's
//! requests land in one partition. [`Tally`]s of partitions merge exactly (they share no key),
//! so `fit` tallies one partition at a time and its memory stays near one partition's
//! requests, whatever the log's size.
//!
//! The partitions are unnamed files (`O_TMPFILE`, or created and unlinked at once) in the
//! temporary directory: the system frees them when their descriptors close, so no exit, no
//! signal (SIGKILL included) and no crash leaves any behind, and there is no name for another
//! user to plant a link at. Each is written, then read back through the same descriptor.

use std::fs::File;
use std::io::{BufWriter, Read as _, Seek as _, SeekFrom, Write as _};
use std::path::PathBuf;

use rayon::prelude::*;

use super::aggregates::Tally;
use super::request::{Req, order};
use super::{FitError, file_err};

/// Requests held in memory before they are spilled: about 670 MB of [`Req`]s.
pub(super) const SPILL_ROWS: usize = 1 << 24;

/// Requests a partition is sized for: 160 MB in memory, sorted in place.
const PARTITION_ROWS: u64 = 4 << 20;

/// At least this many partitions, and at most that many: 900 open files are within the usual
/// limit of 1,024, and 900 partitions of 40 M requests (1.6 GB each) hold 36 billion.
const MIN_PARTITIONS: usize = 256;
const MAX_PARTITIONS: usize = 900;

/// The shortest a request's row can be in a log file (time, key, status and separators): the
/// input's size over it bounds the requests it can hold.
const MIN_ROW_BYTES: u64 = 24;

/// A request on disk: key, time, caller, response bytes, weight, status, key bytes, replayed.
const RECORD: usize = 8 + 8 + 4 + 4 + 4 + 2 + 2 + 1;

/// The partition files of one `fit`, freed when dropped.
pub(super) struct Spill {
    /// Where the unnamed partitions live, for messages.
    dir: PathBuf,
    /// The most the partitions can take for this log: every row as short as a row can be.
    bytes_needed_max: u64,
    partitions: usize,
    writers: Vec<BufWriter<File>>,
    pub(super) rows: u64,
}

impl Spill {
    /// Partitions for logs of `input_bytes` in all: enough that each holds about
    /// [`PARTITION_ROWS`] requests even if every row is as short as a row can be.
    pub(super) fn new(input_bytes: u64) -> Result<Spill, FitError> {
        let partitions = usize::try_from(input_bytes / MIN_ROW_BYTES / PARTITION_ROWS)
            .unwrap_or(MAX_PARTITIONS)
            .clamp(MIN_PARTITIONS, MAX_PARTITIONS);
        let dir = std::env::temp_dir();
        let bytes_needed_max = input_bytes / MIN_ROW_BYTES * RECORD as u64;
        ignore_file_size_signal();
        let mut spill = Spill {
            dir,
            bytes_needed_max,
            partitions,
            writers: Vec::with_capacity(partitions),
            rows: 0,
        };
        for _ in 0..partitions {
            let file = tempfile::tempfile_in(&spill.dir).map_err(|e| spill.err(&e))?;
            spill.writers.push(BufWriter::with_capacity(1 << 15, file));
        }
        Ok(spill)
    }

    /// Writes the requests to their partitions.
    pub(super) fn write(&mut self, reqs: &[Req]) -> Result<(), FitError> {
        for r in reqs {
            let p = partition(r.key, self.partitions);
            self.writers[p]
                .write_all(&encode(r))
                .map_err(|e| self.err(&e))?;
        }
        self.rows += reqs.len() as u64;
        Ok(())
    }

    /// Every partition's tally, merged: one partition in memory at a time.
    pub(super) fn tally(mut self) -> Result<Tally, FitError> {
        let writers = std::mem::take(&mut self.writers);
        let mut files = Vec::with_capacity(writers.len());
        for w in writers {
            files.push(w.into_inner().map_err(|e| self.err(e.error()))?);
        }
        let mut total: Option<Tally> = None;
        let mut bytes = Vec::new();
        for mut file in files {
            bytes.clear();
            file.seek(SeekFrom::Start(0))
                .and_then(|_| file.read_to_end(&mut bytes))
                .map_err(|e| self.err(&e))?;
            // The partition's disk space goes back now, not when the last one is read.
            drop(file);
            let mut reqs: Vec<Req> = bytes.chunks_exact(RECORD).map(decode).collect();
            if reqs.is_empty() {
                continue;
            }
            reqs.par_sort_unstable_by(order);
            let t = Tally::of_sorted(&reqs);
            total = Some(match total {
                Some(acc) => acc.merge(t),
                None => t,
            });
        }
        Ok(total.unwrap_or_else(Tally::empty))
    }

    /// A failed spill names the directory and the room this log needs there.
    fn err(&self, e: &std::io::Error) -> FitError {
        file_err(
            &self.dir,
            format!(
                "cannot write fit's temporary partitions ({e}): a log this size needs up to {} \
                 there ({RECORD} bytes a request, {} requests written so far); set TMPDIR to a \
                 directory on a disk with room",
                crate::format::human_bytes(self.bytes_needed_max as f64),
                self.rows
            ),
        )
    }
}

/// A file-size limit (`ulimit -f`) kills a process writing past it with SIGXFSZ, silently;
/// ignored, the write fails with EFBIG instead and [`Spill::err`] says what happened.
fn ignore_file_size_signal() {
    // SAFETY: setting a signal's disposition to SIG_IGN installs no handler code; it only
    // changes what the kernel does on SIGXFSZ, for this process.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
}

/// Which partition a key's requests go to: the hash's top bits, after a multiply so keys
/// that differ only in low bits spread too.
fn partition(key: u64, partitions: usize) -> usize {
    ((u128::from(key.wrapping_mul(0x9E37_79B9_7F4A_7C15)) * partitions as u128) >> 64) as usize
}

fn encode(r: &Req) -> [u8; RECORD] {
    let mut b = [0u8; RECORD];
    b[0..8].copy_from_slice(&r.key.to_le_bytes());
    b[8..16].copy_from_slice(&r.time_s.to_le_bytes());
    b[16..20].copy_from_slice(&r.caller.to_le_bytes());
    b[20..24].copy_from_slice(&r.response_bytes.to_le_bytes());
    b[24..28].copy_from_slice(&r.weight.to_le_bytes());
    b[28..30].copy_from_slice(&r.status.to_le_bytes());
    b[30..32].copy_from_slice(&r.key_bytes.to_le_bytes());
    b[32] = r.replayed;
    b
}

fn decode(b: &[u8]) -> Req {
    let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
    let u16_at = |i: usize| u16::from_le_bytes([b[i], b[i + 1]]);
    let mut k = [0u8; 8];
    k.copy_from_slice(&b[0..8]);
    let mut t = [0u8; 8];
    t.copy_from_slice(&b[8..16]);
    Req {
        key: u64::from_le_bytes(k),
        time_s: f64::from_le_bytes(t),
        caller: u32_at(16),
        response_bytes: u32_at(20),
        weight: f32::from_bits(u32_at(24)),
        status: u16_at(28),
        key_bytes: u16_at(30),
        replayed: b[32],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_survives_the_disk() {
        let r = Req {
            key: 0xdead_beef_0123_4567,
            caller: 7,
            time_s: 1_764_633_600.123,
            status: 201,
            response_bytes: u32::MAX,
            replayed: 2,
            key_bytes: 36,
            weight: 2.5,
        };
        let d = decode(&encode(&r));
        assert_eq!(order(&r, &d), std::cmp::Ordering::Equal);
        assert_eq!((d.caller, d.key_bytes), (7, 36));
    }
}
