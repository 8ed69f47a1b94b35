//! vmlab's QEMU user-mode tracing plugin: `vmlab trace --engine qemu` runs
//! `qemu-x86_64 -plugin libvmlab_qemu.so,fd=N CMD ARGS...`, and this plugin writes the
//! program's instruction fetches, loads and stores, and the system calls that shape its
//! address space, into the socket at descriptor N in the binary form of
//! `vmlab-core/src/trace/qemu_wire.rs` (docs/importers.md, "The QEMU engine").
//!
//! Each guest thread fills a buffer of its own (a vCPU, in QEMU's terms) and writes it
//! as one chunk when it is full, at a fork or exec, and when the process exits. What
//! each record means follows lackey's, so that the two engines' traces compare:
//! an instruction's load and store of the same bytes (`add [m], r`) are one write, as
//! lackey's `M`; the pieces QEMU splits a wide access into (a 16-byte SSE load is two
//! 8-byte loads) are one access.

mod host;
#[path = "../../vmlab-core/src/trace/qemu_wire.rs"]
mod wire;

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, Ordering};
use wire::x86_64 as nr;

/// The pipe to vmlab (moved above the descriptors a program uses).
static OUT: AtomicI32 = AtomicI32::new(-1);
/// The process this is (a forked child updates it).
static PID: AtomicU32 = AtomicU32::new(0);
/// The socket's inode: a program that closes descriptors it did not open (`closefrom`,
/// `close_range`, as Python's subprocess does before an exec) must not have its own
/// files written to if it reuses the number.
static SOCKET: AtomicU64 = AtomicU64::new(0);
/// The program closed the socket: this process's records go nowhere from now on.
static DETACHED: AtomicBool = AtomicBool::new(false);
static LOST: AtomicBool = AtomicBool::new(false);

/// Where the pipe's descriptor moves to.
const HIGH_FD: i32 = 900;

fn install(target: &str, system: bool, args: &[String]) -> Result<(), String> {
    if system {
        return Err("runs under QEMU user mode (qemu-x86_64), not system emulation".into());
    }
    if target != "x86_64" {
        return Err(format!("traces x86_64 programs; this QEMU runs {target} guests"));
    }
    let mut fd = None;
    for a in args {
        match a.split_once('=') {
            Some(("fd", v)) => fd = Some(v.parse::<i32>().map_err(|_| format!("fd=`{v}`: expected a descriptor number"))?),
            _ => return Err(format!("unknown argument `{a}` (expected fd=N)")),
        }
    }
    let fd = fd.ok_or("no fd=N argument: the descriptor of vmlab's pipe")?;
    let fd = host::move_fd(fd, HIGH_FD)?;
    SOCKET.store(host::socket_inode(fd).ok_or(format!("descriptor {fd} is not a socket"))?, Ordering::Relaxed);
    OUT.store(fd, Ordering::Relaxed);
    PID.store(host::getpid(), Ordering::Relaxed);
    Ok(())
}

/// An instruction's address and length, as the user data of its execution callback:
/// the length in bits 48-55, the address's low 48 bits below (a canonical x86-64
/// address is its bit 47 extended).
fn pack_insn(va: u64, size: u64) -> u64 {
    (size & 0xff) << 48 | (va & (wire::SHORT_VA_LIMIT - 1))
}

fn unpack_insn(u: u64) -> (u64, u64) {
    let low = u & (wire::SHORT_VA_LIMIT - 1);
    let va = if low >> 47 & 1 == 1 { low | !(wire::SHORT_VA_LIMIT - 1) } else { low };
    (va, u >> 48 & 0xff)
}

/// A thread's buffer: one chunk, header included, so that it goes out in one write.
pub(crate) struct Vcpu {
    chunk: Box<[u64]>,
    /// Payload words filled.
    len: usize,
    index: u32,
    /// The payload index + 1 of the current instruction's last short data access, for
    /// merging (0: none yet).
    last: usize,
    /// The address-space call in progress: its number and first five arguments.
    pending: [u64; 6],
}

impl Vcpu {
    fn new(index: u32) -> Vcpu {
        // On the heap: a chunk on the stack would make every callback that can create
        // a buffer probe 64 KiB of stack.
        Vcpu { chunk: vec![0; wire::HEADER_WORDS + wire::PAYLOAD_WORDS].into_boxed_slice(), len: 0, index, last: 0, pending: [u64::MAX; 6] }
    }

    #[inline(always)]
    fn room(&mut self, words: usize) {
        if self.len + words > wire::PAYLOAD_WORDS {
            self.flush();
        }
    }

    #[inline(always)]
    fn push(&mut self, w: u64) {
        self.chunk[wire::HEADER_WORDS + self.len] = w;
        self.len += 1;
    }

    /// Write the buffer as one chunk.
    fn flush(&mut self) {
        self.last = 0;
        if self.len == 0 {
            return;
        }
        self.chunk[0] = wire::header0(self.len);
        self.chunk[1] = wire::header1(PID.load(Ordering::Relaxed), self.index);
        let n = wire::HEADER_WORDS + self.len;
        self.len = 0;
        let fd = OUT.load(Ordering::Relaxed);
        if DETACHED.load(Ordering::Relaxed) || host::socket_inode(fd) != Some(SOCKET.load(Ordering::Relaxed)) {
            DETACHED.store(true, Ordering::Relaxed);
            return;
        }
        if !host::write_words(fd, &self.chunk[..n]) {
            // vmlab stopped reading (it was interrupted, or failed): stop too.
            host::exit_now();
        }
    }

    fn record(&mut self, kind: u64, va: u64, size: u64) {
        match wire::short_access(kind, va, size) {
            Some(w) => {
                self.room(1);
                self.push(w);
            }
            None => {
                self.room(2);
                self.push(wire::wide_access(kind, size.min(0xffff)));
                self.push(va);
            }
        }
    }

    fn event(&mut self, code: u64, args: &[u64]) {
        self.room(1 + args.len());
        self.push(wire::event(code, args.len() as u64));
        for &a in args {
            self.push(a);
        }
    }

    /// An instruction executes: its fetch.
    #[inline(always)]
    fn fetch(&mut self, packed: u64) {
        let (va, size) = unpack_insn(packed);
        self.last = 0;
        self.record(wire::FETCH, va, size);
    }

    /// A load or store of the current instruction, merged with its previous one as
    /// lackey reports them: a store to the bytes it just loaded makes the load a write
    /// (a modify), and a piece adjacent to the previous one of the same kind extends it.
    #[inline(always)]
    fn access(&mut self, store: bool, va: u64, size: u64) {
        let kind = if store { wire::WRITE } else { wire::READ };
        if self.last > 0 {
            let i = wire::HEADER_WORDS + self.last - 1;
            if let wire::Entry::Access { kind: pk, va: pva, size: psize } = wire::entry(self.chunk[i]) {
                if pk == wire::READ && store && pva == va && psize == size {
                    self.chunk[i] = wire::short_access(wire::WRITE, va, size).expect("the same address and size fit");
                    return;
                }
                if pk == kind && pva + psize == va {
                    if let Some(w) = wire::short_access(kind, pva, psize + size) {
                        self.chunk[i] = w;
                        return;
                    }
                }
            }
        }
        self.record(kind, va, size);
        self.last = if wire::short_access(kind, va, size).is_some() { self.len } else { 0 };
    }

    fn syscall(&mut self, num: u64, a: [u64; 5]) {
        match num {
            nr::MMAP | nr::MPROTECT | nr::MUNMAP | nr::BRK | nr::MREMAP => self.pending = [num, a[0], a[1], a[2], a[3], a[4]],
            // What the parent did before the fork is in the pipe before the child can
            // write anything: the child's copy of the address space is the parent's.
            nr::CLONE | nr::FORK | nr::VFORK | nr::CLONE3 => self.flush(),
            nr::EXECVE | nr::EXECVEAT => {
                self.event(wire::EV_EXEC, &[]);
                self.flush();
            }
            _ => {}
        }
    }

    fn syscall_ret(&mut self, num: u64, ret: i64) {
        match num {
            nr::MMAP | nr::MPROTECT | nr::MUNMAP | nr::BRK | nr::MREMAP if self.pending[0] == num => {
                let p = self.pending;
                self.pending[0] = u64::MAX;
                let ok = match num {
                    nr::BRK => true,
                    nr::MUNMAP | nr::MPROTECT => ret == 0,
                    _ => !(-4095..0).contains(&ret),
                };
                if ok {
                    self.event(wire::EV_SYSCALL, &[num, p[1], p[2], p[3], p[4], p[5], ret as u64]);
                }
            }
            nr::CLONE | nr::FORK | nr::VFORK | nr::CLONE3 if ret == 0 => {
                let me = host::getpid();
                let parent = PID.swap(me, Ordering::Relaxed);
                if parent != me {
                    // A forked child: only this thread exists here, and the other
                    // buffers hold the parent's records, which the parent writes.
                    let index = self.index;
                    host::each_vcpu(&mut |v| {
                        if v.index != index {
                            v.len = 0;
                            v.last = 0;
                        }
                    });
                    self.event(wire::EV_FORK, &[parent as u64]);
                    // Sent at once: the child may close the socket before its buffer fills.
                    self.flush();
                }
            }
            nr::EXECVE | nr::EXECVEAT => self.event(wire::EV_EXEC_FAILED, &[]),
            _ => {}
        }
    }
}

/// The process exits: every thread's records, then the exit.
fn exit() {
    host::each_vcpu(&mut |v| v.flush());
    let mut last = Vcpu::new(0);
    if LOST.load(Ordering::Relaxed) {
        last.event(wire::EV_LOST, &[wire::LOST_THREADS]);
    }
    last.event(wire::EV_EXIT, &[]);
    last.flush();
}

/// A thread beyond the buffers the plugin keeps: its records are lost, and vmlab is
/// told (once) so that the trace is refused rather than silently short.
#[cold]
#[inline(never)]
fn lost_threads() {
    if !LOST.swap(true, Ordering::Relaxed) {
        let mut v = Vcpu::new(u32::MAX);
        v.event(wire::EV_LOST, &[wire::LOST_THREADS]);
        v.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(v: &Vcpu) -> Vec<wire::Entry> {
        v.chunk[wire::HEADER_WORDS..wire::HEADER_WORDS + v.len].iter().map(|&w| wire::entry(w)).collect()
    }

    #[test]
    fn an_instructions_accesses_merge_as_lackey_reports_them() {
        use wire::Entry::Access;
        let mut v = Vcpu::new(0);
        // add [m], r: a load and a store of the same 8 bytes are one write.
        v.fetch(pack_insn(0x40_1000, 3));
        v.access(false, 0x7000, 8);
        v.access(true, 0x7000, 8);
        // A 16-byte SSE load, split by QEMU into two 8-byte loads, is one read.
        v.fetch(pack_insn(0x40_1003, 5));
        v.access(false, 0x8000, 8);
        v.access(false, 0x8008, 8);
        // Two instructions' adjacent loads stay two.
        v.fetch(pack_insn(0x40_1008, 4));
        v.access(false, 0x8010, 8);
        v.fetch(pack_insn(0x40_100c, 4));
        v.access(false, 0x8018, 8);
        // A load and a store of different bytes stay two.
        v.fetch(pack_insn(0x40_1010, 4));
        v.access(false, 0x9000, 8);
        v.access(true, 0x9100, 8);
        assert_eq!(
            entries(&v),
            vec![
                Access { kind: wire::FETCH, va: 0x40_1000, size: 3 },
                Access { kind: wire::WRITE, va: 0x7000, size: 8 },
                Access { kind: wire::FETCH, va: 0x40_1003, size: 5 },
                Access { kind: wire::READ, va: 0x8000, size: 16 },
                Access { kind: wire::FETCH, va: 0x40_1008, size: 4 },
                Access { kind: wire::READ, va: 0x8010, size: 8 },
                Access { kind: wire::FETCH, va: 0x40_100c, size: 4 },
                Access { kind: wire::READ, va: 0x8018, size: 8 },
                Access { kind: wire::FETCH, va: 0x40_1010, size: 4 },
                Access { kind: wire::READ, va: 0x9000, size: 8 },
                Access { kind: wire::WRITE, va: 0x9100, size: 8 },
            ]
        );
    }

    #[test]
    fn wide_accesses_and_events_take_their_words() {
        let mut v = Vcpu::new(0);
        v.fetch(pack_insn(0xffff_ffff_ff60_0000, 5));
        v.syscall(nr::MMAP, [0, 0x2000, 3, 0x22, u64::MAX]);
        v.syscall_ret(nr::MMAP, 0x7000_0000);
        // A failed call reports nothing.
        v.syscall(nr::MUNMAP, [0x1000, 0x1000, 0, 0, 0]);
        v.syscall_ret(nr::MUNMAP, -22);
        assert_eq!(entries(&v)[0], wire::Entry::Wide { kind: wire::FETCH, size: 5 });
        assert_eq!(v.chunk[wire::HEADER_WORDS + 1], 0xffff_ffff_ff60_0000);
        assert_eq!(wire::entry(v.chunk[wire::HEADER_WORDS + 2]), wire::Entry::Event { code: wire::EV_SYSCALL, args: 7 });
        assert_eq!(v.chunk[wire::HEADER_WORDS + 3..wire::HEADER_WORDS + 10], [nr::MMAP, 0, 0x2000, 3, 0x22, u64::MAX, 0x7000_0000]);
        assert_eq!(v.len, 10);
    }

    #[test]
    fn instruction_addresses_pack_and_unpack_canonically() {
        for &(va, size) in &[(0x40_1000, 3), (0x7fff_ffff_f000, 15), (0xffff_ffff_ff60_0000, 5), (0, 1)] {
            assert_eq!(unpack_insn(pack_insn(va, size)), (va, size));
        }
    }
}
