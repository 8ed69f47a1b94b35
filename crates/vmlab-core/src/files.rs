//! Files vmlab reads and writes whole. Files it writes (traces, stats documents) go to a
//! temporary file beside the target, renamed over it only once complete, so a failed or
//! interrupted write never leaves a half-written file, nor destroys the one that was
//! there. Text files it reads whole (configs, fragmentation histories) are read up to a
//! bound, so that a wrong path (`/dev/zero`, a trace) is an error, not gigabytes.

use crate::error::{Error, Result};
use std::fs::File;
use std::io::Read as _;
use std::path::{Path, PathBuf};

/// The most bytes [`read_text`] reads: far above any config or history vmlab reads.
pub(crate) const TEXT_LIMIT: u64 = 16 << 20;

/// The UTF-8 text of the file at `path`, at most [`TEXT_LIMIT`] bytes. Errors name the
/// file and never quote its contents.
pub(crate) fn read_text(path: &Path) -> Result<String> {
    let f = File::open(path).map_err(|e| Error::io(path, e))?;
    let mut bytes = Vec::new();
    f.take(TEXT_LIMIT + 1).read_to_end(&mut bytes).map_err(|e| Error::io(path, e))?;
    if bytes.len() as u64 > TEXT_LIMIT {
        let msg = format!("larger than {} MiB: not a text file vmlab reads", TEXT_LIMIT >> 20);
        return Err(Error::io(path, std::io::Error::other(msg)));
    }
    String::from_utf8(bytes).map_err(|e| {
        let msg = format!("not UTF-8 text (byte offset {})", e.utf8_error().valid_up_to());
        Error::io(path, std::io::Error::other(msg))
    })
}

/// A file being written in place of `target`. [`AtomicFile::commit`] puts it there; if
/// it is dropped uncommitted (an error on the way), the temporary file is removed and
/// the target left as it was.
#[derive(Debug)]
pub(crate) struct AtomicFile {
    target: PathBuf,
    /// The temporary file; `None` when the target is written directly (a device or a
    /// FIFO, such as `/dev/stdout`, which cannot be renamed over).
    tmp: Option<PathBuf>,
}

impl AtomicFile {
    /// Open the file that will become `target`. Errors name `target`.
    pub(crate) fn create(target: &Path) -> Result<(AtomicFile, File)> {
        let special = std::fs::metadata(target).is_ok_and(|m| !m.is_file());
        if special {
            let f = File::create(target).map_err(|e| Error::io(target, e))?;
            return Ok((AtomicFile { target: target.to_path_buf(), tmp: None }, f));
        }
        let name = target.file_name().ok_or_else(|| Error::io(target, std::io::Error::other("not a file name")))?;
        // Hidden, and unique to this process: two writers of one target never share it.
        let mut tmp_name = std::ffi::OsString::from(".");
        tmp_name.push(name);
        tmp_name.push(format!(".vmlab-tmp{}", std::process::id()));
        let tmp = target.with_file_name(tmp_name);
        let f = File::create(&tmp).map_err(|e| Error::io(target, e))?;
        crate::interrupt::pending(&tmp, true);
        Ok((AtomicFile { target: target.to_path_buf(), tmp: Some(tmp) }, f))
    }

    /// The file is complete (written and flushed by its writer): put it in place.
    pub(crate) fn commit(mut self) -> Result<()> {
        match self.tmp.take() {
            Some(tmp) => {
                let done = std::fs::rename(&tmp, &self.target).map_err(|e| {
                    let _ = std::fs::remove_file(&tmp);
                    Error::io(&self.target, e)
                });
                crate::interrupt::pending(&tmp, false);
                done
            }
            None => Ok(()),
        }
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        if let Some(tmp) = &self.tmp {
            let _ = std::fs::remove_file(tmp);
            crate::interrupt::pending(tmp, false);
        }
    }
}

/// Write `bytes` to `target` atomically.
pub(crate) fn write(target: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write as _;
    let (file, mut f) = AtomicFile::create(target)?;
    f.write_all(bytes).and_then(|_| f.flush()).map_err(|e| Error::io(target, e))?;
    drop(f);
    file.commit()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;

    #[test]
    fn the_target_changes_only_on_commit() {
        let dir = std::env::temp_dir().join(format!("vmlab-files-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let target = dir.join("out.txt");
        std::fs::write(&target, "old").unwrap();
        // Dropped uncommitted: the old file stays, no temporary file is left.
        {
            let (_file, mut f) = AtomicFile::create(&target).unwrap();
            f.write_all(b"half").unwrap();
        }
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "old");
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1, "the temporary file is removed");
        write(&target, b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "new");
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
        // A target in a missing directory: an error naming it.
        let e = write(&dir.join("no/such/dir.txt"), b"x").unwrap_err().to_string();
        assert!(e.contains("no/such/dir.txt"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn text_is_read_up_to_a_bound_and_never_quoted() {
        let e = read_text(Path::new("/dev/zero")).unwrap_err().to_string();
        assert!(e.starts_with("/dev/zero: larger than 16 MiB"), "{e}");
        let dir = std::env::temp_dir().join(format!("vmlab-readtext-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let bin = dir.join("bin");
        std::fs::write(&bin, b"secret\xff\xfe").unwrap();
        let e = read_text(&bin).unwrap_err().to_string();
        assert!(e.contains("not UTF-8 text (byte offset 6)") && !e.contains("secret"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
