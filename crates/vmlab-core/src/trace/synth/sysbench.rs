//! SysBench's memory test (sysbench 1.0, src/tests/memory/sb_memory.c): events that
//! each read or write one block of `block_size` bytes, an int (4 B) at a time.
//!
//! `scope=global` gives every thread one shared buffer of `block_size`; `local` a buffer
//! per thread. An event (`memory_execute_event`) walks its buffer's words in order
//! (`mode=seq`), or makes as many accesses as the block has words, each at a uniformly
//! random word (`mode=rnd`). Events go to the threads in turn. Sysbench stops after
//! `total_size` bytes (`memory_next_event`): `total_size` here sets `accesses` to that
//! many events' words; 0 leaves the run's length to `accesses`.

use super::gen::{below, mmap_rw, page_round, rng, Generator};
use super::params::{base_param, param, Params, WorkloadInfo};
use crate::error::Result;
use crate::trace::{Dep, Record};
use rand::RngCore;
use rand_xoshiro::Xoshiro256PlusPlus;

pub(crate) fn info() -> WorkloadInfo {
    WorkloadInfo {
        name: "sysbench",
        description: "SysBench memory test: events that read or write a block of block_size bytes 4 bytes at a time, in order (seq) or at random words (rnd)",
        params: vec![
            param("block_size", "1K", "bytes of a block, a multiple of 4 (sysbench --memory-block-size)"),
            param(
                "total_size",
                "0",
                "bytes to transfer, setting accesses to (total_size / block_size events) x block_size / 4; 0 = use accesses (--memory-total-size)",
            ),
            param("scope", "global", "global | local: one buffer shared by the threads, or one each (--memory-scope)"),
            param("oper", "write", "read | write (--memory-oper)"),
            param("mode", "seq", "seq | rnd: words in order, or at random (--memory-access-mode)"),
            param("threads", "1", "threads taking events in turn; with scope=local each has its own buffer (--threads)"),
            base_param(),
        ],
    }
}

/// Sysbench's access: an int.
const WORD: u64 = 4;

struct SysBench {
    base: u64,
    /// Bytes between two threads' buffers (scope=local), 0 for the shared one.
    stride: u64,
    buffers: u64,
    threads: u64,
    words: u64,
    write: bool,
    random: bool,
    rng: Xoshiro256PlusPlus,
    /// The current event and the word of it next.
    event: u64,
    word: u64,
}

pub(crate) fn new(p: &mut Params) -> Result<Box<dyn Generator>> {
    Ok(Box::new(build(p)?))
}

fn build(p: &mut Params) -> Result<SysBench> {
    let block = p.bytes("block_size")?;
    let total = p.bytes("total_size")?;
    let local = p.choice("scope", &["global", "local"])? == "local";
    let write = p.choice("oper", &["read", "write"])? == "write";
    let random = p.choice("mode", &["seq", "rnd"])? == "rnd";
    let threads = p.int("threads")?;
    // memory_init: "memory-block-size must be a multiple of 4".
    p.require(block >= WORD && block % WORD == 0, "block_size", "a positive multiple of 4 bytes")?;
    p.require((1..=1024).contains(&threads), "threads", "1 to 1024 threads")?;
    let buffers = if local { threads } else { 1 };
    let stride = if local { page_round(block) } else { 0 };
    p.require(block <= 1 << 56 && buffers * page_round(block) <= 1 << 56, "block_size", "buffers of at most 2^56 bytes in all")?;
    if total > 0 {
        p.require(!p.given("accesses"), "total_size", "0 when `accesses` is given (total_size sets the accesses)")?;
        // memory_next_event hands out blocks while fewer than total_size bytes went.
        let accesses = total.div_ceil(block).checked_mul(block / WORD);
        p.require(accesses.is_some(), "total_size", "at most 2^64 accesses")?;
        p.set("accesses", accesses.unwrap_or(0).to_string());
    }
    Ok(SysBench { base: p.base()?, stride, buffers, threads, words: block / WORD, write, random, rng: rng(p.seed()?), event: 0, word: 0 })
}

impl Generator for SysBench {
    fn base(&self) -> u64 {
        self.base
    }
    fn setup(&mut self, pid: u32, out: &mut Vec<Record>) {
        out.push(mmap_rw(pid, self.base, self.buffers.max(1) * page_round(self.words * WORD)));
    }
    /// Every address is a counter or a random draw: independent.
    fn emit(&mut self, n: u64, pid: u32, out: &mut Vec<Record>) {
        for _ in 0..n {
            let buffer = self.base + (self.event % self.threads) * self.stride;
            let word = if self.random { below(self.rng.next_u64(), self.words) } else { self.word };
            let va = buffer + word * WORD;
            let r = if self.write { Record::write(va, WORD as u16, pid) } else { Record::read(va, WORD as u16, pid) };
            out.push(r.with_dep(Dep::NONE));
            self.word += 1;
            if self.word == self.words {
                self.word = 0;
                self.event += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::params::testing::{assert_refused, params};
    use super::*;

    fn sysbench(kv: &[(&str, &str)]) -> Result<(SysBench, Vec<(String, String)>)> {
        let mut p = params(&info(), kv)?;
        let s = build(&mut p)?;
        Ok((s, p.resolved()))
    }

    fn accesses(s: &mut SysBench, n: u64) -> Vec<Record> {
        let mut out = Vec::new();
        s.setup(1, &mut out);
        s.emit(n, 1, &mut out);
        out
    }

    /// seq: each event writes every int of the block in order; the footprint is the
    /// block (global) or a page-rounded block per thread (local).
    #[test]
    fn a_sequential_event_walks_its_block() {
        let (mut s, _) = sysbench(&[("block_size", "8K")]).unwrap();
        let out = accesses(&mut s, 2 * 2048);
        assert!(matches!(out[0], Record::Mmap { len: 8192, .. }));
        let want: Vec<u64> = (0..2).flat_map(|_| (0..2048).map(|w| DEFAULT + w * 4)).collect();
        let got: Vec<u64> = out[1..]
            .iter()
            .map(|r| {
                if let Record::Access(a) = r {
                    assert_eq!((a.size, a.kind), (4, crate::addr::AccessKind::Write));
                    a.vaddr
                } else {
                    panic!()
                }
            })
            .collect();
        assert_eq!(got, want);

        let (mut s, _) = sysbench(&[("block_size", "6K"), ("scope", "local"), ("threads", "3"), ("oper", "read")]).unwrap();
        let out = accesses(&mut s, 3 * 1536);
        assert!(matches!(out[0], Record::Mmap { len: 24576, .. }));
        // Thread t's event starts at its own buffer, 8 KiB (6 KiB page-rounded) apart.
        let starts: Vec<u64> = [1, 1 + 1536, 1 + 3072].iter().map(|&i| if let Record::Access(a) = out[i] { a.vaddr } else { 0 }).collect();
        assert_eq!(starts, [DEFAULT, DEFAULT + 8192, DEFAULT + 16384]);
    }

    const DEFAULT: u64 = super::super::DEFAULT_BASE;

    /// rnd: block_size / 4 accesses per event, each at a uniformly random int.
    #[test]
    fn a_random_event_hits_random_words_of_its_block() {
        let (mut s, _) = sysbench(&[("block_size", "64K"), ("mode", "rnd")]).unwrap();
        let out = accesses(&mut s, 16384 * 8);
        let mut hist = [0u64; 16];
        for r in &out[1..] {
            let Record::Access(a) = r else { panic!() };
            assert!(a.vaddr >= DEFAULT && a.vaddr + 4 <= DEFAULT + 65536 && a.vaddr % 4 == 0);
            hist[((a.vaddr - DEFAULT) / 4096) as usize] += 1;
        }
        assert!(hist.iter().all(|&h| h.abs_diff(8192) < 600), "{hist:?}");
        assert_eq!(s.event, 8);
    }

    #[test]
    fn total_size_sets_the_accesses() {
        let (_, resolved) = sysbench(&[("block_size", "1K"), ("total_size", "10K")]).unwrap();
        assert!(resolved.contains(&("accesses".to_string(), "2560".to_string())), "{resolved:?}");
        // A partial last block still runs whole (memory_next_event).
        let (_, resolved) = sysbench(&[("block_size", "4K"), ("total_size", "5K")]).unwrap();
        assert!(resolved.contains(&("accesses".to_string(), "2048".to_string())), "{resolved:?}");
    }

    #[test]
    fn bad_parameters_name_themselves() {
        assert_refused(
            sysbench,
            &[
                (&[("block_size", "6")], "block_size"),
                (&[("block_size", "0")], "block_size"),
                (&[("block_size", "1P"), ("scope", "local"), ("threads", "128")], "block_size"),
                (&[("scope", "node")], "scope"),
                (&[("oper", "none")], "oper"),
                (&[("mode", "random")], "mode"),
                (&[("threads", "0")], "threads"),
                (&[("total_size", "1G"), ("accesses", "1000")], "total_size"),
            ],
        );
    }

    #[test]
    fn a_seed_gives_one_stream() {
        let run = |seed: &str| {
            let (mut s, _) = sysbench(&[("mode", "rnd"), ("block_size", "1M"), ("seed", seed)]).unwrap();
            accesses(&mut s, 5000)
        };
        assert_eq!(run("1"), run("1"));
        assert_ne!(run("1"), run("2"));
    }
}
