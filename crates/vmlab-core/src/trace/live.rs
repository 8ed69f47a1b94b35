//! `vmlab trace -- CMD`: run a program under a tracing engine and convert what it
//! reports to records on the fly: valgrind lackey (here), or QEMU user mode with
//! vmlab's plugin (trace/qemu.rs), the faster one, chosen where it can run.
//!
//! Valgrind writes one log per process (`--log-file=DIR/vg.%p`; a forked child reopens
//! its own, while a socket or fd would be shared and interleave). A reader thread tails
//! each log as it grows, parses it, and punches holes behind its read position
//! (`fallocate(PUNCH_HOLE)`), so disk use stays bounded by the reader's lag rather than
//! the log's length. A merger interleaves the processes' record batches, emitting a
//! `ContextSwitch` at every change of process and holding a child's records until its
//! parent's `Fork` has been emitted. Details and limits: docs/importers.md.

use super::lackey::LackeyReader;
use super::{Record, TraceMeta, TraceSource};
use crate::addr::Pid;
use crate::error::{Error, Result};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;
use std::time::Duration;

/// Which program runs the traced command.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Engine {
    /// QEMU where it can run (qemu-user installed, the plugin built, an x86-64 host and
    /// program, not a `#!` script), else lackey.
    #[default]
    Auto,
    /// QEMU user mode with vmlab's plugin (crates/vmlab-qemu): tens of times faster;
    /// follows forks, not execs.
    Qemu,
    /// valgrind lackey: follows forks and execs.
    Lackey,
}

#[derive(Clone, Debug)]
pub struct LiveOptions {
    pub engine: Engine,
    /// The valgrind executable.
    pub valgrind: String,
    /// Follow children (lackey: `--trace-children=yes`; QEMU follows forks always).
    pub follow_children: bool,
    /// Extra valgrind arguments.
    pub valgrind_args: Vec<String>,
    /// The QEMU user-mode emulator.
    pub qemu: String,
    /// The plugin, if not where [`super::qemu::find_plugin`] looks.
    pub qemu_plugin: Option<PathBuf>,
}

impl Default for LiveOptions {
    fn default() -> Self {
        LiveOptions {
            engine: Engine::Auto,
            valgrind: "valgrind".into(),
            follow_children: true,
            valgrind_args: Vec::new(),
            qemu: super::qemu::default_qemu(),
            qemu_plugin: None,
        }
    }
}

impl LiveOptions {
    /// The engine that will trace `cmd`: `Auto` becomes QEMU if it can run here, else
    /// lackey (with a note on stderr saying why).
    pub(crate) fn engine_for(&self, cmd: &[String]) -> Engine {
        if self.engine != Engine::Auto {
            return self.engine;
        }
        let why_not = if std::env::consts::ARCH != "x86_64" {
            Some(format!("the QEMU engine traces x86-64 programs, and this host is {}", std::env::consts::ARCH))
        } else if let Err(e) = super::qemu::qemu_version(&self.qemu) {
            Some(e.to_string())
        } else if let Err(e) = super::qemu::find_plugin(self.qemu_plugin.as_deref()) {
            Some(e.to_string())
        } else {
            match super::qemu::resolve_command(cmd) {
                // A command that cannot start fails the same under either engine.
                Err(e) if !e.to_string().contains("no such program") => Some(e.to_string()),
                // A script's work is in the programs it execs, which only lackey follows.
                Ok(_) if super::qemu::is_script(cmd) => {
                    Some(format!("`{}` is a #! script, whose programs only lackey follows; --engine qemu traces its interpreter alone", cmd[0]))
                }
                _ => None,
            }
        };
        match why_not {
            None => Engine::Qemu,
            Some(why) => {
                eprintln!("vmlab: tracing with valgrind lackey ({})", why.trim_start_matches("trace: "));
                Engine::Lackey
            }
        }
    }
}

#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct LiveSummary {
    /// Exit status of the traced command (the engine passes it through).
    pub exit_code: i32,
    pub(crate) records: u64,
    /// Processes seen (in the order they were first seen).
    pub processes: Vec<Pid>,
    /// `lackey` or `qemu`, and that program's version.
    pub(crate) engine: String,
    pub(crate) engine_version: String,
    /// Programs exec'd by a traced process that ran untraced (the QEMU engine follows
    /// forks, not execs).
    pub(crate) untraced_execs: u64,
}

enum Msg {
    Start {
        pid: Pid,
        parent: Option<Pid>,
    },
    Batch {
        pid: Pid,
        records: Vec<Record>,
    },
    /// The process's log was truncated: valgrind re-opened it after an exec.
    Exec {
        pid: Pid,
    },
    Done {
        pid: Pid,
    },
    Failed(Error),
}

/// Reads a log file that another process is still writing; reports end of file only
/// once the writer is gone. Punches holes behind what it has read.
struct Tail {
    file: File,
    path: PathBuf,
    pid: Pid,
    pos: u64,
    punched: u64,
    stop: Arc<AtomicBool>,
    exec_seen: Arc<AtomicBool>,
}

const PUNCH_EVERY: u64 = 4 << 20;

impl Tail {
    fn writer_alive(&self) -> bool {
        // A zombie (state Z) has finished writing; a missing /proc entry too.
        match std::fs::read_to_string(format!("/proc/{}/stat", self.pid)) {
            Ok(s) => s.rsplit(')').next().map(|r| !r.trim_start().starts_with('Z')).unwrap_or(false),
            Err(_) => false,
        }
    }

    fn punch(&mut self) {
        #[cfg(target_os = "linux")]
        if self.pos - self.punched >= PUNCH_EVERY {
            use std::os::unix::io::AsRawFd;
            // SAFETY: a valid fd of ours; failure only means the space is kept.
            unsafe {
                libc::fallocate(
                    self.file.as_raw_fd(),
                    libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                    self.punched as libc::off_t,
                    (self.pos - self.punched) as libc::off_t,
                );
            }
            self.punched = self.pos;
        }
    }
}

impl Read for Tail {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            let n = self.file.read(buf)?;
            if n > 0 {
                self.pos += n as u64;
                self.punch();
                return Ok(n);
            }
            let len = self.file.metadata()?.len();
            if len < self.pos {
                // Truncated: valgrind restarted this process's log after an exec.
                self.exec_seen.store(true, Ordering::SeqCst);
                self.file.seek(SeekFrom::Start(0))?;
                self.pos = 0;
                self.punched = 0;
                return Err(std::io::Error::other("exec"));
            }
            if !self.writer_alive() || self.stop.load(Ordering::SeqCst) {
                // One more read: the writer may have written just before exiting.
                let n = self.file.read(buf)?;
                self.pos += n as u64;
                if n > 0 || self.file.metadata()?.len() <= self.pos {
                    return Ok(n);
                }
                continue;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

fn read_log(path: PathBuf, pid: Pid, stop: Arc<AtomicBool>, tx: SyncSender<Msg>) {
    let file = match File::open(&path) {
        Ok(f) => f,
        Err(e) => {
            let _ = tx.send(Msg::Failed(Error::io(&path, e)));
            return;
        }
    };
    let exec_seen = Arc::new(AtomicBool::new(false));
    let mut tail = Tail { file, path: path.clone(), pid, pos: 0, punched: 0, stop, exec_seen: exec_seen.clone() };
    loop {
        let mut reader = LackeyReader::new(BufReader::with_capacity(1 << 16, &mut tail), &path.display().to_string(), pid);
        let mut started = false;
        let mut buf = Vec::new();
        loop {
            match reader.next_batch(&mut buf) {
                Ok(true) => {
                    if !started {
                        started = true;
                        let _ = tx.send(Msg::Start { pid, parent: reader.parent_pid() });
                    }
                    if tx.send(Msg::Batch { pid, records: std::mem::take(&mut buf) }).is_err() {
                        return;
                    }
                }
                Ok(false) => {
                    let _ = tx.send(Msg::Done { pid });
                    return;
                }
                Err(_) if exec_seen.swap(false, Ordering::SeqCst) => {
                    let _ = tx.send(Msg::Exec { pid });
                    break;
                }
                Err(e) => {
                    let _ = tx.send(Msg::Failed(e));
                    return;
                }
            }
        }
        let _ = &tail.path;
    }
}

/// Run `cmd` under the engine `opts` choose and hand its records to `sink` in batches.
pub fn trace_command(cmd: &[String], opts: &LiveOptions, mut sink: impl FnMut(&[Record]) -> Result<()>) -> Result<LiveSummary> {
    if cmd.is_empty() {
        return Err(Error::Tracing("no command to trace (vmlab trace -o OUT.vmt -- CMD ARGS...)".into()));
    }
    match opts.engine_for(cmd) {
        Engine::Qemu => super::qemu::trace_command(cmd, opts, &mut sink),
        _ => trace_with_lackey(cmd, opts, &mut sink),
    }
}

/// Run `cmd` under valgrind lackey.
fn trace_with_lackey(cmd: &[String], opts: &LiveOptions, sink: &mut dyn FnMut(&[Record]) -> Result<()>) -> Result<LiveSummary> {
    let version = valgrind_version(&opts.valgrind)?;
    let dir = std::env::temp_dir().join(format!(
        "vmlab-trace-{}-{}",
        std::process::id(),
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0)
    ));
    std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
    let result = run_and_merge(cmd, opts, &dir, sink);
    let _ = std::fs::remove_dir_all(&dir);
    let mut summary = result?;
    summary.engine = "lackey".into();
    summary.engine_version = version;
    Ok(summary)
}

fn valgrind_version(valgrind: &str) -> Result<String> {
    match Command::new(valgrind).arg("--version").output() {
        Ok(o) => Ok(String::from_utf8_lossy(&o.stdout).trim().to_string()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(Error::Tracing(format!("{valgrind} not found; install it (apt-get install valgrind)"))),
        Err(e) => Err(Error::Tracing(format!("cannot run {valgrind}: {e}"))),
    }
}

fn run_and_merge(cmd: &[String], opts: &LiveOptions, dir: &Path, sink: &mut dyn FnMut(&[Record]) -> Result<()>) -> Result<LiveSummary> {
    let child = Command::new(&opts.valgrind)
        .arg("--tool=lackey")
        .arg("--trace-mem=yes")
        .arg("--trace-syscalls=yes")
        // No gdbserver: its FIFOs in $TMPDIR would outlive a valgrind killed on an interrupt.
        .arg("--vgdb=no")
        .arg(format!("--trace-children={}", if opts.follow_children { "yes" } else { "no" }))
        .arg(format!("--log-file={}/vg.%p", dir.display()))
        .args(&opts.valgrind_args)
        .arg("--")
        .args(cmd)
        .stdin(Stdio::inherit())
        .stdout(Stdio::inherit())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| Error::Tracing(format!("cannot start valgrind: {e}")))?;
    let root = child.id();
    let mut reaper = Reaper::new(child, "valgrind");
    let stop = reaper.stop.clone();
    let (tx, rx) = sync_channel::<Msg>(64);
    let mut readers: HashMap<Pid, std::thread::JoinHandle<()>> = HashMap::new();
    let mut merger = Merger::new(root);
    let mut exit_code = None;
    loop {
        crate::interrupt::check()?;
        // Start a reader for every new log.
        if let Ok(entries) = std::fs::read_dir(dir) {
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if let Some(pid) = name.strip_prefix("vg.").and_then(|p| p.parse::<Pid>().ok()) {
                    if let std::collections::hash_map::Entry::Vacant(slot) = readers.entry(pid) {
                        let (path, stop, tx) = (e.path(), stop.clone(), tx.clone());
                        slot.insert(std::thread::spawn(move || read_log(path, pid, stop, tx)));
                        merger.expect(pid);
                        reaper.pids.insert(pid);
                    }
                }
            }
        }
        drain(&rx, &mut merger, sink, Duration::from_millis(5))?;
        if exit_code.is_none() {
            if let Some(status) = reaper.child.try_wait().map_err(|e| Error::Tracing(format!("waiting for valgrind: {e}")))? {
                exit_code = Some(status.code().unwrap_or(-1));
                stop.store(true, Ordering::SeqCst);
            }
        }
        if exit_code.is_some() && merger.all_done() {
            // One last look for logs created just before the end.
            let new_logs = std::fs::read_dir(dir)
                .map(|rd| {
                    rd.flatten().any(|e| {
                        let n = e.file_name().to_string_lossy().into_owned();
                        n.strip_prefix("vg.").and_then(|p| p.parse::<Pid>().ok()).is_some_and(|p| !readers.contains_key(&p))
                    })
                })
                .unwrap_or(false);
            if !new_logs {
                break;
            }
        }
    }
    reaper.finished = true;
    for (_, h) in readers {
        let _ = h.join();
    }
    merger.flush_held(sink)?;
    Ok(LiveSummary { exit_code: exit_code.unwrap_or(-1), records: merger.records, processes: merger.seen_order.clone(), ..Default::default() })
}

/// Ends the traced processes if tracing stops before they do (an interrupt, a
/// simulation error downstream): the tracer must not run on, reparented to init, once
/// vmlab is gone. Both engines use it.
pub(crate) struct Reaper {
    pub(crate) child: std::process::Child,
    /// Every traced process seen so far (a followed child runs a tracer of its own).
    pub(crate) pids: BTreeSet<Pid>,
    /// Seen processes that no longer run the tracer but are still the command's (the
    /// QEMU engine's processes that exec'd a program natively).
    pub(crate) also: BTreeSet<Pid>,
    /// What a traced process's executable is named after (`valgrind`, `qemu`).
    pub(crate) tracer: &'static str,
    /// Raised when tracing stops, for the engine's reader threads.
    pub(crate) stop: Arc<AtomicBool>,
    pub(crate) finished: bool,
}

impl Reaper {
    pub(crate) fn new(child: std::process::Child, tracer: &'static str) -> Reaper {
        Reaper { child, pids: BTreeSet::new(), also: BTreeSet::new(), tracer, stop: Arc::new(AtomicBool::new(false)), finished: false }
    }
}

impl Drop for Reaper {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if self.finished {
            return;
        }
        // Only a process still running the tracer (a pid that exited may have been
        // reused), or one the engine vouches for, and what they started (a natively
        // exec'd program's children run untraced): found before any is killed, while
        // their parent links still lead to the command.
        let traced = |pid: Pid| std::fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|exe| exe.to_string_lossy().contains(self.tracer));
        let mut roots: BTreeSet<Pid> = self.pids.iter().copied().filter(|&p| traced(p) || self.also.contains(&p)).collect();
        roots.insert(self.child.id());
        for pid in descendants(&roots).into_iter().chain(roots.iter().copied().filter(|&p| p != self.child.id())) {
            crate::host::kill(pid);
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The live descendants of `roots`, by the parent links in /proc.
fn descendants(roots: &BTreeSet<Pid>) -> Vec<Pid> {
    let mut children: HashMap<Pid, Vec<Pid>> = HashMap::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<Pid>().ok()) else { continue };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        // `pid (comm) state ppid ...`; comm may hold spaces and parentheses: the last `)`
        // ends it.
        let ppid = stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().nth(1)).and_then(|p| p.parse::<Pid>().ok());
        if let Some(ppid) = ppid {
            children.entry(ppid).or_default().push(pid);
        }
    }
    let mut found = Vec::new();
    let mut todo: Vec<Pid> = roots.iter().copied().collect();
    while let Some(p) = todo.pop() {
        for &c in children.get(&p).into_iter().flatten() {
            if !roots.contains(&c) && !found.contains(&c) {
                found.push(c);
                todo.push(c);
            }
        }
    }
    found
}

fn drain(rx: &Receiver<Msg>, m: &mut Merger, sink: &mut dyn FnMut(&[Record]) -> Result<()>, wait: Duration) -> Result<()> {
    let mut first = true;
    loop {
        let msg = if first { rx.recv_timeout(wait).ok() } else { rx.try_recv().ok() };
        first = false;
        match msg {
            Some(msg) => m.handle(msg, sink)?,
            None => return Ok(()),
        }
    }
}

/// Orders the per-process streams into one.
struct Merger {
    root: Pid,
    /// Processes whose records may be emitted (root, or forked by an emitted Fork).
    introduced: HashSet<Pid>,
    /// Batches of processes waiting for their parent's Fork.
    held: HashMap<Pid, Vec<Vec<Record>>>,
    running: HashSet<Pid>,
    last_pid: Option<Pid>,
    records: u64,
    seen_order: Vec<Pid>,
}

impl Merger {
    fn new(root: Pid) -> Merger {
        Merger { root, introduced: HashSet::new(), held: HashMap::new(), running: HashSet::new(), last_pid: None, records: 0, seen_order: Vec::new() }
    }

    fn expect(&mut self, pid: Pid) {
        self.running.insert(pid);
    }

    fn all_done(&self) -> bool {
        self.running.is_empty()
    }

    fn handle(&mut self, msg: Msg, sink: &mut dyn FnMut(&[Record]) -> Result<()>) -> Result<()> {
        match msg {
            Msg::Start { pid, parent } => {
                if !self.seen_order.contains(&pid) {
                    self.seen_order.push(pid);
                }
                // The command itself, or a process whose parent is not traced, starts at
                // once; a traced parent's child waits for the parent's Fork record.
                let parent_traced = parent.is_some_and(|p| p != pid && self.seen_order.contains(&p));
                if pid == self.root || !parent_traced {
                    self.introduced.insert(pid);
                }
            }
            Msg::Batch { pid, records } => {
                if self.introduced.contains(&pid) {
                    self.emit(pid, &records, sink)?;
                } else {
                    self.held.entry(pid).or_default().push(records);
                }
            }
            Msg::Exec { pid } => {
                // The old image is gone; the new one starts with an empty address space.
                if self.introduced.contains(&pid) {
                    self.emit(pid, &[Record::Exit { pid }], sink)?;
                }
            }
            Msg::Done { pid } => {
                self.running.remove(&pid);
            }
            Msg::Failed(e) => return Err(e),
        }
        Ok(())
    }

    fn emit(&mut self, pid: Pid, records: &[Record], sink: &mut dyn FnMut(&[Record]) -> Result<()>) -> Result<()> {
        if self.last_pid != Some(pid) && !records.is_empty() {
            sink(&[Record::ContextSwitch { pid }])?;
            self.records += 1;
            self.last_pid = Some(pid);
        }
        sink(records)?;
        self.records += records.len() as u64;
        // Children forked in this batch may now run.
        let forked: Vec<Pid> = records.iter().filter_map(|r| if let Record::Fork { child, .. } = r { Some(*child) } else { None }).collect();
        for child in forked {
            self.introduced.insert(child);
            if let Some(batches) = self.held.remove(&child) {
                for b in batches {
                    self.emit(child, &b, sink)?;
                }
            }
        }
        Ok(())
    }

    /// At the end, emit what is still held (a parent's Fork never seen).
    fn flush_held(&mut self, sink: &mut dyn FnMut(&[Record]) -> Result<()>) -> Result<()> {
        let mut pids: Vec<Pid> = self.held.keys().copied().collect();
        pids.sort();
        for pid in pids {
            for b in self.held.remove(&pid).unwrap_or_default() {
                self.emit(pid, &b, sink)?;
            }
        }
        Ok(())
    }
}

/// Trace `cmd` straight into a .vmt file.
pub fn trace_to_vmt(cmd: &[String], out: &Path, opts: &LiveOptions) -> Result<LiveSummary> {
    if cmd.is_empty() {
        return Err(Error::Tracing("no command to trace (vmlab trace -o OUT.vmt -- CMD ARGS...)".into()));
    }
    let engine = opts.engine_for(cmd);
    let opts = LiveOptions { engine, ..opts.clone() };
    let (source, tool, version) = match engine {
        Engine::Qemu => ("qemu-user", "qemu", super::qemu::qemu_version(&opts.qemu)?),
        _ => ("valgrind-lackey", "valgrind", valgrind_version(&opts.valgrind)?),
    };
    let meta =
        TraceMeta { source: source.into(), command: cmd.to_vec(), source_page_size: Some(4096), extra: [(tool.to_string(), version)].into_iter().collect() };
    let mut w = super::vmt::VmtWriter::create(out, &meta)?;
    let summary = trace_command(cmd, &opts, |rs| w.write_all(rs))?;
    if summary.processes.is_empty() {
        // The engine could not start the command (not found, not executable): no
        // trace, and an existing file at `out` stays as it was.
        return Err(Error::Tracing(format!("`{}` did not start under {tool} (exit status {}); no trace written", cmd.join(" "), summary.exit_code)));
    }
    w.finish()?;
    Ok(summary)
}
