//! Compressed importer inputs, told by their first bytes rather than by their names (a
//! `.gz` that is plain, or a plain name that is xz, reads right). Every importer of a
//! binary format (ChampSim, drmemtrace) opens its files here, so they accept and refuse
//! the same compressions with the same words.

use crate::error::{Error, Result};
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

/// A file's compression, by magic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Compression {
    None,
    Gzip,
    Xz,
    Zstd,
    /// A zip archive (drmemtrace's `.trace.zip`): not a stream, so the drmemtrace
    /// importer reads its members itself.
    Zip,
    Bzip2,
    Lz4,
    /// Snappy's framing format (drmemtrace's legacy `.sz` files).
    Snappy,
}

impl Compression {
    const MAGICS: [(Compression, &'static [u8]); 7] = [
        (Compression::Gzip, &[0x1F, 0x8B, 0x08]),
        (Compression::Xz, &[0xFD, b'7', b'z', b'X', b'Z', 0x00]),
        (Compression::Zstd, &[0x28, 0xB5, 0x2F, 0xFD]),
        (Compression::Zip, b"PK\x03\x04"),
        (Compression::Bzip2, b"BZh"),
        (Compression::Lz4, &[0x04, 0x22, 0x4D, 0x18]),
        (Compression::Snappy, b"\xFF\x06\x00\x00sNaPpY"),
    ];

    /// The compression whose magic `head` starts with; [`Compression::None`] otherwise.
    pub(crate) fn sniff(head: &[u8]) -> Compression {
        Self::MAGICS.iter().find(|(_, m)| head.starts_with(m)).map_or(Compression::None, |&(c, _)| c)
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Xz => "xz",
            Compression::Zstd => "zstd",
            Compression::Zip => "zip",
            Compression::Bzip2 => "bzip2",
            Compression::Lz4 => "lz4",
            Compression::Snappy => "snappy",
        }
    }
}

/// The streams vmlab decompresses itself, for errors.
pub(crate) const STREAMED: &str = "plain, gzip, xz or zstd";

/// `input`, decompressed as its first bytes say, and the compression found. `path`
/// names it in errors; `accepted` says what the importer reads, for the error that
/// names a compression vmlab does not read ("ChampSim traces plain, gzip, xz or zstd").
pub(crate) fn open_stream<R: Read + Send + 'static>(input: R, path: &Path, accepted: &str) -> Result<(Compression, Box<dyn Read + Send>)> {
    let mut f = BufReader::with_capacity(1 << 20, input);
    let c = Compression::sniff(f.fill_buf().map_err(|e| Error::io(path, e))?);
    let stream: Box<dyn Read + Send> = match c {
        Compression::None => Box::new(f),
        // Multi-member: `cat a.gz b.gz` is one stream, as gunzip reads it.
        Compression::Gzip => Box::new(flate2::read::MultiGzDecoder::new(f)),
        Compression::Xz => Box::new(xz2::read::XzDecoder::new_multi_decoder(f)),
        Compression::Zstd => Box::new(zstd::stream::read::Decoder::with_buffer(f).map_err(|e| Error::io(path, e))?),
        other => return Err(unread(path, other, accepted)),
    };
    Ok((c, stream))
}

/// The error for a compression vmlab does not read.
pub(crate) fn unread(path: &Path, c: Compression, accepted: &str) -> Error {
    let msg = format!("{}-compressed; vmlab reads {accepted} (decompress it first)", c.name());
    Error::Trace { file: path.to_path_buf(), offset: 0, msg }
}
