//! The binary stream the QEMU tracing plugin (crates/vmlab-qemu) writes into vmlab's
//! pipe (docs/importers.md, "The QEMU engine"). Both sides compile this one file: the
//! plugin includes it by path, so it depends on `core` alone.
//!
//! The stream is a sequence of chunks, each one message of a Unix `SOCK_SEQPACKET`
//! socket: processes forked from the traced program share the socket, and their chunks
//! interleave but never mix (a pipe would keep only writes up to `PIPE_BUF`, 4 KiB,
//! whole, and a sixteenth of the system calls is worth the socket). A chunk is a header
//! ([`HEADER_WORDS`] little-endian words) and up to [`PAYLOAD_WORDS`] words of entries;
//! an entry never straddles two chunks.
//!
//! - Header word 0: [`MAGIC`] in the low 32 bits, the payload's length in words above.
//!   Word 1: the writing process's pid (low 32 bits) and the vCPU (thread) index.
//! - A short access is one word: the kind in bits 60-63 ([`READ`], [`WRITE`],
//!   [`FETCH`]), the size in bytes in bits 48-59 (1 to 4095), the virtual address in
//!   bits 0-47.
//! - A wide access (an address at or above 2^48, or a size above 4095) is [`WIDE`] in
//!   bits 60-63 with the kind in bits 16-19 and the size in bits 0-15, then the address.
//! - An event is [`EVENT`] in bits 60-63, its code in bits 0-15 and its argument count
//!   in bits 16-23, then the arguments.
#![allow(dead_code)]

/// The largest chunk, in bytes (well within a Unix socket's default send buffer).
pub const CHUNK_BYTES: usize = 64 << 10;
pub const HEADER_WORDS: usize = 2;
pub const PAYLOAD_WORDS: usize = CHUNK_BYTES / 8 - HEADER_WORDS;
/// "VMQ1".
pub const MAGIC: u32 = 0x3151_4d56;

pub const READ: u64 = 1;
pub const WRITE: u64 = 2;
pub const FETCH: u64 = 3;
pub const WIDE: u64 = 0xd;
pub const EVENT: u64 = 0xe;

/// The largest address and size a short access holds.
pub const SHORT_VA_LIMIT: u64 = 1 << 48;
pub const SHORT_SIZE_LIMIT: u64 = 1 << 12;

/// A system call that changed the address space, after it succeeded: the call's number
/// (the guest's), its first five arguments, and its result (7 arguments).
pub const EV_SYSCALL: u64 = 1;
/// This process was forked from the process whose pid is the argument: the first
/// entry a forked child writes.
pub const EV_FORK: u64 = 2;
/// The process is exiting: the last entry it writes.
pub const EV_EXIT: u64 = 3;
/// The process is calling execve: if the call succeeds, the new program runs natively
/// and writes nothing more.
pub const EV_EXEC: u64 = 4;
/// The execve announced by [`EV_EXEC`] failed: the process goes on.
pub const EV_EXEC_FAILED: u64 = 5;
/// The plugin lost records: the argument says why ([`LOST_THREADS`]).
pub const EV_LOST: u64 = 6;

/// More threads at once than the plugin keeps buffers for.
pub const LOST_THREADS: u64 = 1;

/// The first header word of a chunk of `words` payload words.
#[inline(always)]
pub const fn header0(words: usize) -> u64 {
    MAGIC as u64 | (words as u64) << 32
}

/// The second header word.
#[inline(always)]
pub const fn header1(pid: u32, vcpu: u32) -> u64 {
    pid as u64 | (vcpu as u64) << 32
}

/// A short access, if it fits in one word.
#[inline(always)]
pub const fn short_access(kind: u64, va: u64, size: u64) -> Option<u64> {
    if va < SHORT_VA_LIMIT && size > 0 && size < SHORT_SIZE_LIMIT {
        Some(kind << 60 | size << 48 | va)
    } else {
        None
    }
}

/// The first word of a wide access (the address follows).
#[inline(always)]
pub const fn wide_access(kind: u64, size: u64) -> u64 {
    WIDE << 60 | kind << 16 | (size & 0xffff)
}

/// The first word of an event with `args` arguments.
#[inline(always)]
pub const fn event(code: u64, args: u64) -> u64 {
    EVENT << 60 | args << 16 | code
}

/// What the first word of an entry says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Entry {
    /// An access in one word: kind, address, size.
    Access {
        kind: u64,
        va: u64,
        size: u64,
    },
    /// A wide access: the address is the next word.
    Wide {
        kind: u64,
        size: u64,
    },
    /// An event: code, and the number of argument words that follow.
    Event {
        code: u64,
        args: usize,
    },
    Bad,
}

#[inline(always)]
pub const fn entry(w: u64) -> Entry {
    match w >> 60 {
        k @ (READ | WRITE | FETCH) => Entry::Access { kind: k, va: w & (SHORT_VA_LIMIT - 1), size: w >> 48 & 0xfff },
        WIDE => Entry::Wide { kind: w >> 16 & 0xf, size: w & 0xffff },
        EVENT => Entry::Event { code: w & 0xffff, args: (w >> 16 & 0xff) as usize },
        _ => Entry::Bad,
    }
}

/// The x86-64 Linux system calls the plugin reports.
pub mod x86_64 {
    pub const MMAP: u64 = 9;
    pub const MPROTECT: u64 = 10;
    pub const MUNMAP: u64 = 11;
    pub const BRK: u64 = 12;
    pub const MREMAP: u64 = 25;
    pub const CLONE: u64 = 56;
    pub const FORK: u64 = 57;
    pub const VFORK: u64 = 58;
    pub const EXECVE: u64 = 59;
    pub const EXECVEAT: u64 = 322;
    pub const CLONE3: u64 = 435;

    /// The name the lackey importer knows the call by, for those that change the
    /// address space.
    pub const fn memory_call(nr: u64) -> Option<&'static str> {
        match nr {
            MMAP => Some("mmap"),
            MPROTECT => Some("mprotect"),
            MUNMAP => Some("munmap"),
            BRK => Some("brk"),
            MREMAP => Some("mremap"),
            _ => None,
        }
    }
}
