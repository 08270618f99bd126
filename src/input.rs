//! The one way a user's input file is opened: regular files only, of bounded size, with bounded
//! lines. A FIFO blocked the run for ever, a symlink to `/dev/zero` named `.ndjson` was read
//! until memory ran out, and a directory gave "No such device"; each is refused here, naming the
//! file, before a byte is read.

use std::io::{BufRead, Read as _};
use std::path::Path;

/// Input files (scenarios, retry CDFs) are small hand-written text; 1 MiB is a thousand times
/// the largest bundled one. Reading stops there, so `scenario /dev/zero` is refused at once.
pub const MAX_INPUT_BYTES: u64 = 1 << 20;

/// The longest line read from a line-oriented log (NDJSON): a request is a few hundred bytes.
pub const MAX_LINE_BYTES: usize = 1 << 20;

fn invalid(message: String) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidInput, message)
}

/// `Ok` when `path` names a regular file (after following links), else why not, in words: the
/// check is made on the path's metadata, so a FIFO is never opened (opening one blocks).
pub fn check_regular(path: &Path) -> Result<std::fs::Metadata, std::io::Error> {
    let meta = std::fs::metadata(path)?;
    if meta.file_type().is_file() {
        return Ok(meta);
    }
    Err(invalid(format!(
        "is {}; give a regular file",
        file_kind(&meta)
    )))
}

/// A file's type in words, for an error about an input or an output.
pub fn file_kind(meta: &std::fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt as _;
    let t = meta.file_type();
    if t.is_dir() {
        "a directory"
    } else if t.is_file() {
        "a file"
    } else if t.is_fifo() {
        "a named pipe (FIFO)"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_char_device() || t.is_block_device() {
        "a device"
    } else {
        "not a regular file"
    }
}

/// Opens `path` for reading if it is a regular file. Opened first, then checked: a check of
/// the path followed by an open raced with a link flipped between a file and a FIFO in
/// between (the open then blocked for ever). `O_NONBLOCK` makes opening a FIFO return at once,
/// and the check is of what was opened, by its descriptor; on a regular file the flag changes
/// nothing, and it is cleared before the file is returned.
pub fn open(path: &Path) -> Result<std::fs::File, std::io::Error> {
    use std::os::unix::fs::OpenOptionsExt as _;
    use std::os::unix::io::AsRawFd as _;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.file_type().is_file() {
        return Err(invalid(format!(
            "is {}; give a regular file",
            file_kind(&meta)
        )));
    }
    // SAFETY: fcntl on a descriptor this function owns, with flags read from it just before.
    unsafe {
        let fd = file.as_raw_fd();
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags >= 0 {
            libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK);
        }
    }
    Ok(file)
}

/// Reads a text input file, refusing one larger than [`MAX_INPUT_BYTES`] before reading it all.
pub fn read_limited(path: &Path) -> Result<String, std::io::Error> {
    let bytes = read_limited_bytes(path, MAX_INPUT_BYTES)?;
    String::from_utf8(bytes)
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "not UTF-8 text"))
}

/// Reads at most `limit` bytes of `path`, failing on a larger file rather than truncating it.
pub fn read_limited_bytes(path: &Path, limit: u64) -> Result<Vec<u8>, std::io::Error> {
    let file = open(path)?;
    let mut bytes = Vec::new();
    file.take(limit + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "larger than the {} KiB limit for an input file",
                limit / 1024
            ),
        ));
    }
    Ok(bytes)
}

/// The next line of `reader` (without its newline) into `line`, or `Ok(false)` at the end; a
/// line longer than [`MAX_LINE_BYTES`] is an error, found without reading more of it than that.
pub fn next_line(reader: &mut impl BufRead, line: &mut Vec<u8>) -> Result<bool, std::io::Error> {
    line.clear();
    let limit = MAX_LINE_BYTES as u64 + 1;
    let n = reader.by_ref().take(limit).read_until(b'\n', line)?;
    if n == 0 {
        return Ok(false);
    }
    if line.last() == Some(&b'\n') {
        line.pop();
        if line.last() == Some(&b'\r') {
            line.pop();
        }
    } else if line.len() > MAX_LINE_BYTES {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "a line longer than {} KiB: not a request log of one request per line",
                MAX_LINE_BYTES / 1024
            ),
        ));
    }
    Ok(true)
}

/// Whether two paths name the same file (the same device and inode), so a log given twice is
/// not counted twice.
pub fn same_file(a: &std::fs::Metadata, b: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    a.dev() == b.dev() && a.ino() == b.ino()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directories_and_devices_are_refused_in_words() {
        let dir = tempfile::tempdir().unwrap();
        let e = check_regular(dir.path()).unwrap_err().to_string();
        assert!(e.contains("is a directory"), "{e}");
        let e = check_regular(Path::new("/dev/zero"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("is a device"), "{e}");
    }

    #[test]
    fn a_long_line_is_refused_without_reading_it_all() {
        let text = vec![b'x'; MAX_LINE_BYTES * 3];
        let mut reader = std::io::BufReader::new(&text[..]);
        let mut line = Vec::new();
        assert!(next_line(&mut reader, &mut line).is_err());
        assert!(line.len() <= MAX_LINE_BYTES + 1);
        let mut reader = std::io::BufReader::new(&b"a\r\nb"[..]);
        assert!(next_line(&mut reader, &mut line).unwrap());
        assert_eq!(line, b"a");
        assert!(next_line(&mut reader, &mut line).unwrap());
        assert_eq!(line, b"b");
        assert!(!next_line(&mut reader, &mut line).unwrap());
    }
}
