//! Importer for valgrind lackey logs (`--tool=lackey --trace-mem=yes`, optionally
//! `--trace-syscalls=yes`). Mapping rules: docs/importers.md.
//!
//! - `I addr,size` is an instruction fetch, ` L` a read, ` S` a write, and ` M`
//!   (modify) one write access.
//! - Successful mmap, munmap, mprotect, mremap and brk syscalls become OS events; clone
//!   (fork) becomes a Fork; exit_group an Exit.
//! - Valgrind's own `==pid==` lines are skipped (they name the process).

use super::{MapFlags, Record, TraceMeta, TraceSource, BATCH};
use crate::addr::{AccessKind, Pid};
use crate::error::{Error, Result};
use std::io::BufRead;

const MAP_SHARED: u64 = 0x01;
const MAP_ANONYMOUS: u64 = 0x20;

/// A syscall line whose result has not been printed yet.
#[derive(Clone, Debug)]
struct PendingCall {
    pid: Pid,
    name: String,
    args: Vec<u64>,
}

/// The longest line a lackey log has (its longest are syscall lines of a few hundred
/// bytes).
const MAX_LINE: usize = 64 << 10;

pub struct LackeyReader<R: BufRead> {
    input: R,
    source_name: String,
    meta: TraceMeta,
    line: Vec<u8>,
    line_no: u64,
    pid: Pid,
    /// The process named by the log's banner, and its parent.
    banner_pid: Option<Pid>,
    parent_pid: Option<Pid>,
    pending: Vec<PendingCall>,
    done: bool,
}

impl<R: BufRead> LackeyReader<R> {
    /// `pid` is used until the log names its process.
    pub fn new(input: R, source_name: &str, pid: Pid) -> LackeyReader<R> {
        LackeyReader {
            input,
            source_name: source_name.to_string(),
            meta: TraceMeta { source: "valgrind-lackey".into(), source_page_size: Some(4096), ..Default::default() },
            line: Vec::with_capacity(256),
            line_no: 0,
            pid,
            banner_pid: None,
            parent_pid: None,
            pending: Vec::new(),
            done: false,
        }
    }

    #[cfg(test)]
    /// The process this log belongs to, once its banner has been read.
    pub(crate) fn banner_pid(&self) -> Option<Pid> {
        self.banner_pid
    }
    /// The parent of that process, from the banner's `Parent PID:` line.
    pub(crate) fn parent_pid(&self) -> Option<Pid> {
        self.parent_pid
    }

    fn err(&self, msg: impl Into<String>) -> Error {
        Error::Import { source_name: self.source_name.clone(), line: self.line_no, msg: msg.into() }
    }

    /// Parse one line, appending its records to `out`.
    fn parse_line(&mut self, raw: &[u8], out: &mut Vec<Record>) -> Result<()> {
        let line = trim_end(raw);
        if line.is_empty() {
            return Ok(());
        }
        // Accesses: "I  addr,size", " L addr,size", " S ...", " M ...".
        let (kind, rest) = match line {
            [b'I', b' ', rest @ ..] => (Some(AccessKind::Fetch), rest),
            [b' ', b'L', b' ', rest @ ..] => (Some(AccessKind::Read), rest),
            [b' ', b'S', b' ', rest @ ..] | [b' ', b'M', b' ', rest @ ..] => (Some(AccessKind::Write), rest),
            _ => (None, line),
        };
        if let Some(kind) = kind {
            let (va, size) = parse_access(rest).ok_or_else(|| self.err(format!("malformed access `{}`", quote(line))))?;
            if size > u16::MAX as u64 {
                return Err(self.err(format!("access size {size} exceeds 65535")));
            }
            out.push(Record::access(kind, va, size as u16, self.pid));
            return Ok(());
        }
        if line.starts_with(b"==") || line.starts_with(b"--") || line.starts_with(b"**") {
            return self.valgrind_line(line);
        }
        if line.starts_with(b"SYSCALL[") {
            return self.syscall_line(line, out);
        }
        let text = String::from_utf8_lossy(line).into_owned();
        if text.trim_start().starts_with("-->") {
            // The result of the most recent syscall, printed after intervening output.
            if let Some(call) = self.pending.pop() {
                self.complete(call, &text, out);
            }
            return Ok(());
        }
        Err(self.err(format!("not a lackey line: `{}`", quote(text.as_bytes()))))
    }

    fn valgrind_line(&mut self, line: &[u8]) -> Result<()> {
        let text = String::from_utf8_lossy(line);
        let mut parts = text.splitn(3, "==");
        let _ = parts.next();
        if let Some(Ok(pid)) = parts.next().map(|p| p.trim().parse::<Pid>()) {
            if self.banner_pid.is_none() {
                self.banner_pid = Some(pid);
            }
            self.pid = pid;
            if let Some(rest) = parts.next() {
                if let Some(pp) = rest.trim().strip_prefix("Parent PID:") {
                    self.parent_pid = pp.trim().parse().ok();
                }
            }
        }
        Ok(())
    }

    fn syscall_line(&mut self, line: &[u8], out: &mut Vec<Record>) -> Result<()> {
        let text = String::from_utf8_lossy(line).into_owned();
        // SYSCALL[pid,tid](nr) name ( args ) ... result
        let close = text.find(']').ok_or_else(|| self.err("malformed SYSCALL line"))?;
        let pid: Pid = text[8..close].split(',').next().and_then(|p| p.trim().parse().ok()).ok_or_else(|| self.err("malformed SYSCALL pid"))?;
        self.pid = pid;
        let after = text[close + 1..].split_once(')').map(|x| x.1).unwrap_or("").trim_start();
        if after.starts_with("...") {
            // "... [async] --> Success(..)": the result of an earlier async call of this pid.
            if let Some(i) = self.pending.iter().rposition(|c| c.pid == pid) {
                let call = self.pending.remove(i);
                self.complete(call, after, out);
            }
            return Ok(());
        }
        let name_end = after.find([' ', '(']).unwrap_or(after.len());
        let name = after[..name_end].trim_start_matches("sys_").to_string();
        let args = match (after.find('('), after.find(')')) {
            (Some(a), Some(b)) if a < b => after[a + 1..b].split(',').map(|s| parse_num(s.trim()).unwrap_or(0)).collect(),
            _ => Vec::new(),
        };
        let call = PendingCall { pid, name, args };
        if call.name == "clone" || call.name == "clone3" || call.name == "fork" || call.name == "vfork" {
            // "clone(fork): process P created child C" (threads share the address space).
            if let Some(i) = text.find("created child ") {
                if let Ok(child) = text[i + 14..].split_whitespace().next().unwrap_or("").parse::<Pid>() {
                    if text.contains("clone(fork)") || call.name != "clone" {
                        out.push(Record::Fork { parent: pid, child });
                    }
                }
            }
            return Ok(());
        }
        if call.name == "exit_group" {
            out.push(Record::Exit { pid });
            return Ok(());
        }
        if text.contains("Success(") || text.contains("Failure(") {
            self.complete(call, &text, out);
        } else if matches!(call.name.as_str(), "mmap" | "munmap" | "mprotect" | "brk" | "mremap") {
            self.pending.push(call);
        }
        Ok(())
    }

    /// Turn a finished syscall into OS events (failures produce none).
    fn complete(&mut self, call: PendingCall, result_text: &str, out: &mut Vec<Record>) {
        let Some(i) = result_text.find("Success(") else { return };
        let Some(ret) = result_text[i + 8..].split(')').next().and_then(|s| parse_num(s.trim())) else { return };
        address_space_records(&call.name, call.pid, &call.args, ret, out);
    }
}

/// The OS events of a successful address-space system call `name` (mmap, munmap,
/// mprotect, brk, mremap) of process `pid`, with arguments `args` and result `ret`
/// (docs/importers.md). Both live-tracing engines report system calls through it.
pub(crate) fn address_space_records(name: &str, pid: Pid, args: &[u64], ret: u64, out: &mut Vec<Record>) {
    let a = |k: usize| args.get(k).copied().unwrap_or(0);
    match name {
        "mmap" => {
            let mut flags = MapFlags::PRIVATE;
            if a(3) & MAP_SHARED != 0 {
                flags = flags.union(MapFlags::SHARED);
            }
            if a(3) & MAP_ANONYMOUS == 0 {
                flags = flags.union(MapFlags::FILE);
            }
            out.push(Record::Mmap { pid, start: ret, len: a(1), prot: (a(2) & 7) as u8, flags });
        }
        "munmap" => out.push(Record::Munmap { pid, start: a(0), len: a(1) }),
        "mprotect" => out.push(Record::Mprotect { pid, start: a(0), len: a(1), prot: (a(2) & 7) as u8 }),
        "brk" => out.push(Record::Brk { pid, end: ret }),
        "mremap" => {
            // The old range goes away and the new one appears (read/write, private).
            out.push(Record::Munmap { pid, start: a(0), len: a(1) });
            out.push(Record::Mmap { pid, start: ret, len: a(2), prot: 3, flags: MapFlags::PRIVATE });
        }
        _ => {}
    }
}

impl<R: BufRead> TraceSource for LackeyReader<R> {
    fn meta(&self) -> &TraceMeta {
        &self.meta
    }

    fn next_batch(&mut self, buf: &mut Vec<Record>) -> Result<bool> {
        buf.clear();
        while buf.len() < BATCH - 2 && !self.done {
            self.line.clear();
            // A line is read up to a bound: a file without newlines is an error, not a
            // line the size of the file.
            let n =
                std::io::Read::take(&mut self.input, MAX_LINE as u64).read_until(b'\n', &mut self.line).map_err(|e| self.err(format!("read error: {e}")))?;
            if n == 0 {
                self.done = true;
                break;
            }
            self.line_no += 1;
            if n == MAX_LINE && self.line.last() != Some(&b'\n') {
                return Err(self.err(format!("line longer than {} KiB: not a lackey log", MAX_LINE >> 10)));
            }
            let line = std::mem::take(&mut self.line);
            let r = self.parse_line(&line, buf);
            self.line = line;
            r?;
        }
        Ok(!buf.is_empty())
    }
}

fn trim_end(l: &[u8]) -> &[u8] {
    let mut e = l.len();
    while e > 0 && matches!(l[e - 1], b'\n' | b'\r' | b' ') {
        e -= 1;
    }
    &l[..e]
}

/// " 1ffefffd48,8" -> (0x1ffefffd48, 8), skipping leading spaces.
#[inline]
fn parse_access(s: &[u8]) -> Option<(u64, u64)> {
    let mut i = 0;
    while i < s.len() && s[i] == b' ' {
        i += 1;
    }
    let mut va: u64 = 0;
    let start = i;
    while i < s.len() && s[i] != b',' {
        let d = (s[i] as char).to_digit(16)? as u64;
        va = va.checked_mul(16)?.checked_add(d)?;
        i += 1;
    }
    if i == start || i >= s.len() || i - start > 16 {
        return None;
    }
    i += 1;
    let mut size: u64 = 0;
    let sstart = i;
    while i < s.len() {
        let d = (s[i] as char).to_digit(10)? as u64;
        size = size.checked_mul(10)?.checked_add(d)?;
        i += 1;
    }
    (i > sstart).then_some((va, size))
}

/// Decimal or 0x-hex, ignoring a "(...)" annotation after it.
fn parse_num(s: &str) -> Option<u64> {
    let s = s.split('(').next()?.trim();
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse::<u64>().ok().or_else(|| s.parse::<i64>().ok().map(|v| v as u64)),
    }
}

/// A line as an error quotes it: its first 80 characters, control characters escaped
/// (a binary file's NUL bytes never reach the terminal).
fn quote(line: &[u8]) -> String {
    let text = String::from_utf8_lossy(trim_end(line));
    let mut out: String = text.chars().take(80).flat_map(|c| if c.is_control() { c.escape_default().collect::<Vec<_>>() } else { vec![c] }).collect();
    if text.chars().nth(80).is_some() {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Vec<Record>> {
        let mut r = LackeyReader::new(std::io::Cursor::new(text.as_bytes().to_vec()), "test.log", 7);
        let mut all = Vec::new();
        let mut buf = Vec::new();
        while r.next_batch(&mut buf)? {
            all.extend_from_slice(&buf);
        }
        Ok(all)
    }

    #[test]
    fn accesses_and_modify() {
        let recs = parse("I  04010173,3\n L 1ffefffd48,8\n S 1ffefffd40,4\n M 0403a2c8,8\n").unwrap();
        assert_eq!(
            recs,
            vec![Record::fetch(0x0401_0173, 3, 7), Record::read(0x1f_feff_fd48, 8, 7), Record::write(0x1f_feff_fd40, 4, 7), Record::write(0x0403_a2c8, 8, 7),]
        );
    }

    #[test]
    fn banner_names_the_process_and_syscalls_become_events() {
        let log = concat!(
            "==22182== Command: /tmp/fk\n",
            "==22182== Parent PID: 22172\n",
            "I  0401ab70,3\n",
            "SYSCALL[22182,1](12) sys_brk ( 0x0 ) --> [pre-success] Success(0x4035000) \n",
            "SYSCALL[22182,1](9) sys_mmap ( 0x0, 8192, 3, 34, 4294967295, 0 ) --> [pre-success] Success(0x4835000) \n",
            "SYSCALL[22182,1](9) sys_mmap ( 0x4838000, 4096, 5, 2066, 4, 4096 ) --> [pre-success] Success(0x4838000) \n",
            "SYSCALL[22182,1](10) sys_mprotect ( 0x4a14000, 16384, 1 )[sync] --> Success(0x0) \n",
            "SYSCALL[22182,1](11) sys_munmap ( 0x483c000, 33699 )[sync] --> Success(0x0) \n",
            "SYSCALL[22182,1](21) sys_access ( 0x402a2a0(/etc/ld.so.preload), 4 )[sync] --> Failure(0x2) \n",
            "SYSCALL[22182,1](56) sys_clone ( 1200011, 0x0, 0x0, 0x4a27a10, 0x0 )   clone(fork): process 22182 created child 22183\n",
            " L 1ffefffd48,8\n",
            " --> [pre-success] Success(0x56a7) \n",
            "SYSCALL[22182,1](12) sys_brk ( 0x4056000 ) --> [async] ... \n",
            " S 1ffefffd48,8\n",
            "SYSCALL[22182,1](12) ... [async] --> Success(0x4056000) \n",
            "SYSCALL[22182,1](231) exit_group( 0 ) --> [pre-success] Success(0x0) \n",
        );
        let mut r = LackeyReader::new(std::io::Cursor::new(log.as_bytes().to_vec()), "t", 1);
        let mut recs = Vec::new();
        let mut buf = Vec::new();
        while r.next_batch(&mut buf).unwrap() {
            recs.extend_from_slice(&buf);
        }
        assert_eq!(r.banner_pid(), Some(22182));
        assert_eq!(r.parent_pid(), Some(22172));
        let p = 22182;
        assert_eq!(
            recs,
            vec![
                Record::fetch(0x0401ab70, 3, p),
                Record::Brk { pid: p, end: 0x4035000 },
                Record::Mmap { pid: p, start: 0x4835000, len: 8192, prot: 3, flags: MapFlags::PRIVATE },
                Record::Mmap { pid: p, start: 0x4838000, len: 4096, prot: 5, flags: MapFlags::FILE },
                Record::Mprotect { pid: p, start: 0x4a14000, len: 16384, prot: 1 },
                Record::Munmap { pid: p, start: 0x483c000, len: 33699 },
                Record::Fork { parent: p, child: 22183 },
                Record::read(0x1ffefffd48, 8, p),
                Record::write(0x1ffefffd48, 8, p),
                Record::Brk { pid: p, end: 0x4056000 },
                Record::Exit { pid: p },
            ]
        );
    }

    #[test]
    fn bad_lines_name_the_line() {
        let e = parse("I  0401,3\nhello there\n").unwrap_err().to_string();
        assert_eq!(e, "test.log: line 2: not a lackey line: `hello there`");
        let e = parse(" L zzzz,8\n").unwrap_err().to_string();
        assert!(e.contains("line 1") && e.contains("malformed access"), "{e}");
        let e = parse(" L 1000,70000\n").unwrap_err().to_string();
        assert!(e.contains("exceeds 65535"), "{e}");
        let e = parse(" L 11112222333344445,8\n").unwrap_err().to_string();
        assert!(e.contains("malformed access"), "{e}");
    }
}
