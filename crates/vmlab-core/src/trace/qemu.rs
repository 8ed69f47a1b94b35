//! `vmlab trace --engine qemu -- CMD`: run a program under QEMU user mode with vmlab's
//! tracing plugin (crates/vmlab-qemu) and turn the plugin's binary stream into records
//! as it arrives (docs/importers.md, "The QEMU engine").
//!
//! The plugin writes chunks (trace/qemu_wire.rs) into one end of a Unix
//! `SOCK_SEQPACKET` socket pair; every process forked from the program inherits it, and
//! each chunk arrives whole, tagged with its process. This side reads the chunks in
//! arrival order: a `ContextSwitch` before the first access of a process other than the
//! last one, a child's `Fork` first in its stream (the parent wrote everything before
//! the fork beforehand), and an `Exit` where each process ends. A process whose exec
//! succeeded runs natively from then on and writes nothing more: it gets its `Exit` at
//! the end of the trace.

use super::lackey::address_space_records;
use super::live::{LiveOptions, LiveSummary, Reaper};
use super::qemu_wire as wire;
use super::{Record, BATCH};
use crate::addr::{AccessKind, Pid};
use crate::error::{Error, Result};
use std::collections::BTreeSet;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// The plugin's file name, as cargo builds it.
pub(crate) const PLUGIN_FILE: &str = "libvmlab_qemu.so";

/// The QEMU user-mode emulator for this host's architecture.
pub(crate) fn default_qemu() -> String {
    format!("qemu-{}", std::env::consts::ARCH)
}

/// `qemu --version`'s first line, or an error saying how to install it.
pub(crate) fn qemu_version(qemu: &str) -> Result<String> {
    match Command::new(qemu).arg("--version").stdin(Stdio::null()).output() {
        Ok(o) => Ok(String::from_utf8_lossy(&o.stdout).lines().next().unwrap_or("").trim().to_string()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(Error::Tracing(format!("{qemu} not found; install it (apt-get install qemu-user)"))),
        Err(e) => Err(Error::Tracing(format!("cannot run {qemu}: {e}"))),
    }
}

/// Where the plugin is: `explicit`, else `$VMLAB_QEMU_PLUGIN`, else beside the running
/// executable (cargo puts it beside the `vmlab` binary; the Python package sets the
/// variable to its own copy).
pub(crate) fn find_plugin(explicit: Option<&Path>) -> Result<PathBuf> {
    let candidate = explicit
        .map(Path::to_path_buf)
        .or_else(|| std::env::var_os("VMLAB_QEMU_PLUGIN").filter(|v| !v.is_empty()).map(PathBuf::from))
        .or_else(|| std::env::current_exe().ok().and_then(|exe| exe.parent().map(|d| d.join(PLUGIN_FILE))));
    match candidate {
        Some(p) if p.is_file() => {
            if p.to_string_lossy().contains(',') {
                return Err(Error::Tracing(format!("the QEMU plugin's path {} has a comma, which QEMU's -plugin option cannot take", p.display())));
            }
            // An x86-64 ELF shared object (e_type ET_DYN), or QEMU would refuse it with
            // its own message after starting.
            let mut head = [0u8; 20];
            let n = std::fs::File::open(&p).and_then(|mut f| f.read(&mut head)).map_err(|e| Error::io(&p, e))?;
            let shared = n == 20 && head.starts_with(b"\x7fELF") && head[4] == 2 && head[16] == 3 && u16::from_le_bytes([head[18], head[19]]) == 62;
            if !shared {
                return Err(Error::Tracing(format!("the QEMU tracing plugin {} is not an x86-64 shared library (VMLAB_QEMU_PLUGIN)", p.display())));
            }
            Ok(p)
        }
        Some(p) => Err(Error::Tracing(format!(
            "the QEMU tracing plugin is not at {} (build it with scripts/setup.sh, or cargo build --release -p vmlab-qemu and set VMLAB_QEMU_PLUGIN)",
            p.display()
        ))),
        None => Err(Error::Tracing("the QEMU tracing plugin was not found (set VMLAB_QEMU_PLUGIN)".into())),
    }
}

/// How deep `#!` interpreters may nest (Linux allows a few).
const MAX_INTERPRETERS: usize = 4;

/// The command as QEMU must be given it: the program's path found on `$PATH`, and a
/// `#!` script run by its interpreter (QEMU loads ELF programs only). An error says why
/// the command cannot start.
pub(crate) fn resolve_command(cmd: &[String]) -> Result<Vec<String>> {
    resolve(cmd, 0).map_err(|why| Error::Tracing(format!("`{}` did not start under qemu: {why}; no trace written", cmd.join(" "))))
}

fn resolve(cmd: &[String], depth: usize) -> std::result::Result<Vec<String>, String> {
    let prog = cmd.first().ok_or("no command")?;
    let path = find_program(prog).ok_or_else(|| match Path::new(prog) {
        p if p.is_file() => format!("{prog}: not executable"),
        p if p.is_dir() => format!("{prog}: a directory, not a program"),
        _ => format!("{prog}: no such program"),
    })?;
    let mut head = [0u8; 256];
    let n = std::fs::File::open(&path).and_then(|mut f| f.read(&mut head)).map_err(|e| format!("{}: {e}", path.display()))?;
    let head = &head[..n];
    let rest = cmd[1..].iter().cloned();
    if head.starts_with(b"\x7fELF") {
        // ELFCLASS64, e_machine EM_X86_64 (62).
        if n < 20 || head[4] != 2 || u16::from_le_bytes([head[18], head[19]]) != 62 {
            return Err(format!("{} is not an x86-64 program (--engine lackey traces what valgrind runs)", path.display()));
        }
        return Ok(std::iter::once(path.display().to_string()).chain(rest).collect());
    }
    if let Some(line) = head.strip_prefix(b"#!") {
        if depth >= MAX_INTERPRETERS {
            return Err(format!("{}: #! interpreters nest too deep", path.display()));
        }
        let line = line.split(|&b| b == b'\n').next().unwrap_or(&[]);
        let line = String::from_utf8_lossy(line);
        let line = line.trim();
        // Linux: the interpreter, then at most one argument (the rest of the line).
        let (interp, arg) = match line.split_once([' ', '\t']) {
            Some((i, a)) => (i, Some(a.trim())),
            None => (line, None),
        };
        if interp.is_empty() {
            return Err(format!("{}: empty #! line", path.display()));
        }
        let mut inner = vec![interp.to_string()];
        inner.extend(arg.filter(|a| !a.is_empty()).map(str::to_string));
        inner.push(path.display().to_string());
        inner.extend(rest);
        return resolve(&inner, depth + 1);
    }
    Err(format!("{} is neither an ELF program nor a #! script", path.display()))
}

/// Whether `cmd` is a `#!` script (QEMU would run its interpreter; the programs a script
/// runs are exec'd, which the QEMU engine does not follow).
pub(crate) fn is_script(cmd: &[String]) -> bool {
    let Some(path) = cmd.first().and_then(|p| find_program(p)) else { return false };
    let mut head = [0u8; 2];
    std::fs::File::open(path).and_then(|mut f| f.read_exact(&mut head)).is_ok() && head == *b"#!"
}

/// `prog` if it names a path, else the first executable file of that name on `$PATH`.
fn find_program(prog: &str) -> Option<PathBuf> {
    let executable = |p: &Path| p.is_file() && p.metadata().is_ok_and(|m| m.permissions().mode() & 0o111 != 0);
    if prog.contains('/') {
        let p = PathBuf::from(prog);
        return executable(&p).then_some(p);
    }
    std::env::split_paths(&std::env::var_os("PATH")?).map(|d| d.join(prog)).find(|p| executable(p))
}

/// Run `cmd` under QEMU with the plugin and hand its records to `sink` in batches.
pub(crate) fn trace_command(cmd: &[String], opts: &LiveOptions, sink: &mut dyn FnMut(&[Record]) -> Result<()>) -> Result<LiveSummary> {
    let version = qemu_version(&opts.qemu)?;
    let plugin = find_plugin(opts.qemu_plugin.as_deref())?;
    let argv = resolve_command(cmd)?;
    let (ours, theirs) = crate::host::seqpacket_pair().map_err(|e| Error::Tracing(format!("cannot make the trace socket: {e}")))?;
    let inherited = crate::host::inheritable(&theirs).map_err(|e| Error::Tracing(format!("cannot pass the trace socket on: {e}")))?;
    drop(theirs);
    use std::os::fd::AsRawFd;
    let child = Command::new(&opts.qemu)
        .arg("-plugin")
        .arg(format!("{},fd={}", plugin.display(), inherited.as_raw_fd()))
        // The program sees the name it was called by, not the path found for it.
        .arg("-0")
        .arg(&cmd[0])
        .args(&argv)
        .stdin(Stdio::inherit())
        .stdout(Stdio::inherit())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| Error::Tracing(format!("cannot start {}: {e}", opts.qemu)))?;
    // Only the traced processes hold the writing end now: the reads end when they do.
    drop(inherited);
    let mut reaper = Reaper::new(child, "qemu");
    let mut socket = UnixStream::from(ours);
    socket.set_read_timeout(Some(Duration::from_millis(50))).map_err(|e| Error::Tracing(format!("trace socket: {e}")))?;
    let mut decoder = Decoder::default();
    let mut chunk = vec![0u8; wire::CHUNK_BYTES + 8];
    loop {
        crate::interrupt::check()?;
        match socket.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => {
                decoder.chunk(&chunk[..n], sink)?;
                if reaper.pids.len() < decoder.seen.len() {
                    reaper.pids.extend(decoder.seen.iter().copied());
                }
                // A process that exec'd runs its program natively, and is still the command's.
                reaper.also.clone_from(&decoder.exec_pending);
            }
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut | std::io::ErrorKind::Interrupted) => {}
            Err(e) => return Err(Error::Tracing(format!("reading the QEMU plugin's stream: {e}"))),
        }
    }
    decoder.finish(sink)?;
    // Every tracer has closed its end; the command itself may still run natively (an exec).
    let status = loop {
        crate::interrupt::check()?;
        match reaper.child.try_wait().map_err(|e| Error::Tracing(format!("waiting for {}: {e}", opts.qemu)))? {
            Some(s) => break s,
            None => std::thread::sleep(Duration::from_millis(20)),
        }
    };
    reaper.finished = true;
    Ok(LiveSummary {
        exit_code: status.code().unwrap_or(-1),
        records: decoder.records,
        processes: decoder.seen,
        engine: "qemu".into(),
        engine_version: version,
        untraced_execs: decoder.untraced_execs,
    })
}

/// Turns the plugin's chunks into records, in arrival order.
#[derive(Default)]
pub struct Decoder {
    /// The process of the last `ContextSwitch` emitted.
    running: Option<Pid>,
    /// Processes whose last word was an exec: gone, unless they write again.
    exec_pending: BTreeSet<Pid>,
    /// Processes in the order they were first seen.
    pub(crate) seen: Vec<Pid>,
    pub(crate) records: u64,
    /// Processes whose exec succeeded: the programs they started ran untraced.
    pub(crate) untraced_execs: u64,
    /// Bytes of the stream read so far (for errors).
    offset: u64,
    batch: Vec<Record>,
}

impl Decoder {
    fn err(&self, at: u64, msg: impl std::fmt::Display) -> Error {
        Error::Trace { file: "the QEMU plugin's stream".into(), offset: at, msg: msg.to_string() }
    }

    /// One chunk, as one read of the socket returned it.
    pub fn chunk(&mut self, bytes: &[u8], sink: &mut dyn FnMut(&[Record]) -> Result<()>) -> Result<()> {
        let at = self.offset;
        self.offset += bytes.len() as u64;
        if bytes.len() < wire::HEADER_WORDS * 8 || !bytes.len().is_multiple_of(8) || bytes.len() > wire::CHUNK_BYTES {
            return Err(self.err(at, format!("a chunk of {} bytes", bytes.len())));
        }
        let word = |i: usize| u64::from_le_bytes(bytes[i * 8..i * 8 + 8].try_into().expect("8 bytes"));
        let (h0, h1) = (word(0), word(1));
        let n = bytes.len() / 8 - wire::HEADER_WORDS;
        if h0 as u32 != wire::MAGIC || (h0 >> 32) as usize != n {
            return Err(self.err(at, format!("not a chunk of the vmlab plugin (header {h0:#x}, {n} words)")));
        }
        let pid = h1 as u32;
        if !self.seen.contains(&pid) {
            self.seen.push(pid);
        }
        // Writing again: its exec failed.
        self.exec_pending.remove(&pid);
        let mut i = wire::HEADER_WORDS;
        let end = wire::HEADER_WORDS + n;
        while i < end {
            let w = word(i);
            i += 1;
            match wire::entry(w) {
                wire::Entry::Access { kind, va, size } => self.access(pid, kind, va, size),
                wire::Entry::Wide { kind, size } => {
                    if i >= end {
                        return Err(self.err(at, "a wide access without its address"));
                    }
                    let va = word(i);
                    i += 1;
                    self.access(pid, kind, va, size);
                }
                wire::Entry::Event { code, args } => {
                    if i + args > end {
                        return Err(self.err(at, format!("event {code} runs past its chunk")));
                    }
                    let a: Vec<u64> = (i..i + args).map(word).collect();
                    i += args;
                    self.event(pid, code, &a).map_err(|m| self.err(at, m))?;
                }
                wire::Entry::Bad => return Err(self.err(at, format!("unknown entry {w:#018x}"))),
            }
            if self.batch.len() >= BATCH {
                self.emit(sink)?;
            }
        }
        self.emit(sink)
    }

    #[inline]
    fn access(&mut self, pid: Pid, kind: u64, va: u64, size: u64) {
        if self.running != Some(pid) {
            self.batch.push(Record::ContextSwitch { pid });
            self.running = Some(pid);
        }
        let kind = match kind {
            wire::READ => AccessKind::Read,
            wire::WRITE => AccessKind::Write,
            _ => AccessKind::Fetch,
        };
        self.batch.push(Record::access(kind, va, size.clamp(1, u16::MAX as u64) as u16, pid));
    }

    fn event(&mut self, pid: Pid, code: u64, a: &[u64]) -> std::result::Result<(), String> {
        let want = |n: usize| if a.len() == n { Ok(()) } else { Err(format!("event {code} with {} arguments, not {n}", a.len())) };
        match code {
            wire::EV_SYSCALL => {
                want(7)?;
                if let Some(name) = wire::x86_64::memory_call(a[0]) {
                    address_space_records(name, pid, &a[1..6], a[6], &mut self.batch);
                }
            }
            wire::EV_FORK => {
                want(1)?;
                self.batch.push(Record::Fork { parent: a[0] as Pid, child: pid });
            }
            wire::EV_EXIT => self.batch.push(Record::Exit { pid }),
            wire::EV_EXEC => {
                self.exec_pending.insert(pid);
            }
            wire::EV_EXEC_FAILED => {
                self.exec_pending.remove(&pid);
            }
            wire::EV_LOST => return Err("the QEMU plugin lost records: the program ran more threads at once than it keeps buffers for (4096)".into()),
            _ => return Err(format!("unknown event {code}")),
        }
        Ok(())
    }

    fn emit(&mut self, sink: &mut dyn FnMut(&[Record]) -> Result<()>) -> Result<()> {
        if !self.batch.is_empty() {
            sink(&self.batch)?;
            self.records += self.batch.len() as u64;
            self.batch.clear();
        }
        Ok(())
    }

    /// The stream has ended: a process that exec'd a program (which ran natively) ends.
    pub fn finish(&mut self, sink: &mut dyn FnMut(&[Record]) -> Result<()>) -> Result<()> {
        for pid in std::mem::take(&mut self.exec_pending) {
            self.batch.push(Record::Exit { pid });
            self.untraced_execs += 1;
        }
        self.emit(sink)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(pid: u32, payload: &[u64]) -> Vec<u8> {
        let mut words = vec![wire::header0(payload.len()), wire::header1(pid, 0)];
        words.extend_from_slice(payload);
        words.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    fn decode(chunks: &[Vec<u8>]) -> Result<Vec<Record>> {
        let mut d = Decoder::default();
        let mut out = Vec::new();
        let mut sink = |rs: &[Record]| {
            out.extend_from_slice(rs);
            Ok(())
        };
        for c in chunks {
            d.chunk(c, &mut sink)?;
        }
        d.finish(&mut sink)?;
        Ok(out)
    }

    #[test]
    fn chunks_become_records_with_switches_forks_and_exits() {
        let short = |k, va, size| wire::short_access(k, va, size).unwrap();
        let mmap = [wire::event(wire::EV_SYSCALL, 7), 9, 0, 0x2000, 3, 0x22, u64::MAX, 0x7000_0000];
        let mut parent = vec![short(wire::FETCH, 0x40_1000, 4), short(wire::READ, 0x7fff_0000, 8)];
        parent.extend_from_slice(&mmap);
        let child = [wire::event(wire::EV_FORK, 1), 7, short(wire::WRITE, 0x7000_0000, 16), wire::event(wire::EV_EXEC, 0)];
        let wide = [wire::wide_access(wire::READ, 8), 0xffff_ffff_ff60_0000, wire::event(wire::EV_EXIT, 0)];
        let recs = decode(&[chunk(7, &parent), chunk(8, &child), chunk(7, &wide)]).unwrap();
        assert_eq!(
            recs,
            vec![
                Record::ContextSwitch { pid: 7 },
                Record::fetch(0x40_1000, 4, 7),
                Record::read(0x7fff_0000, 8, 7),
                Record::Mmap { pid: 7, start: 0x7000_0000, len: 0x2000, prot: 3, flags: crate::trace::MapFlags::PRIVATE },
                Record::Fork { parent: 7, child: 8 },
                Record::ContextSwitch { pid: 8 },
                Record::write(0x7000_0000, 16, 8),
                Record::ContextSwitch { pid: 7 },
                Record::read(0xffff_ffff_ff60_0000, 8, 7),
                Record::Exit { pid: 7 },
                // The child's exec succeeded (it wrote nothing more): it ends with the trace.
                Record::Exit { pid: 8 },
            ]
        );
    }

    #[test]
    fn a_failed_exec_keeps_the_process() {
        let recs = decode(&[chunk(5, &[wire::event(wire::EV_EXEC, 0)]), chunk(5, &[wire::event(wire::EV_EXEC_FAILED, 0)])]).unwrap();
        assert!(!recs.contains(&Record::Exit { pid: 5 }), "{recs:?}");
    }

    #[test]
    fn a_bad_stream_is_an_error_naming_the_byte() {
        let good = chunk(3, &[wire::short_access(wire::READ, 0x1000, 8).unwrap()]);
        let mut bad_magic = good.clone();
        bad_magic[0] ^= 1;
        let e = decode(&[good.clone(), bad_magic]).unwrap_err().to_string();
        assert!(e.contains("at byte offset 24") && e.contains("not a chunk"), "{e}");
        let e = decode(&[chunk(3, &[wire::event(wire::EV_SYSCALL, 7), 9])]).unwrap_err().to_string();
        assert!(e.contains("runs past its chunk"), "{e}");
        let e = decode(&[chunk(3, &[0])]).unwrap_err().to_string();
        assert!(e.contains("unknown entry"), "{e}");
        let e = decode(&[chunk(3, &[wire::event(wire::EV_LOST, 1), wire::LOST_THREADS])]).unwrap_err().to_string();
        assert!(e.contains("lost records"), "{e}");
        let e = decode(&[good[..20].to_vec()]).unwrap_err().to_string();
        assert!(e.contains("a chunk of 20 bytes"), "{e}");
    }

    #[test]
    fn commands_resolve_through_path_and_scripts() {
        let sh = resolve_command(&["sh".into(), "-c".into(), "true".into()]).unwrap();
        assert!(sh[0].ends_with("/sh") && sh[1..] == ["-c", "true"], "{sh:?}");
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("s");
        std::fs::write(&script, "#!/bin/sh -e\ntrue\n").unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        let r = resolve_command(&[script.display().to_string(), "x".into()]).unwrap();
        assert_eq!(r, vec!["/bin/sh".to_string(), "-e".into(), script.display().to_string(), "x".into()]);
        assert!(is_script(&[script.display().to_string()]) && !is_script(&["sh".into()]));
        let e = resolve_command(&["/nonexistent/cmd".into()]).unwrap_err().to_string();
        assert!(e.contains("did not start") && e.contains("/nonexistent/cmd") && e.contains("no such program"), "{e}");
        let files = tempfile::tempdir().unwrap();
        let plain = files.path().join("plain");
        std::fs::write(&plain, "x").unwrap();
        std::fs::set_permissions(&plain, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = resolve_command(&[plain.display().to_string()]).unwrap_err().to_string();
        assert!(e.contains("plain: not executable"), "{e}");
        let text = dir.path().join("t");
        std::fs::write(&text, "hello").unwrap();
        std::fs::set_permissions(&text, std::fs::Permissions::from_mode(0o755)).unwrap();
        let e = resolve_command(&[text.display().to_string()]).unwrap_err().to_string();
        assert!(e.contains("neither an ELF program nor a #! script"), "{e}");
    }
}
