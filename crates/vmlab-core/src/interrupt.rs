//! Stopping cleanly on SIGINT or SIGTERM.
//!
//! A request to stop is one process-wide word. The `vmlab` binary's signal handlers set
//! it ([`install_handlers`]); the Python binding sets it when Python reports a
//! KeyboardInterrupt or a SIGTERM handler's exception while a run is in progress
//! (crates/vmlab-py). Every long loop calls [`check`] once per batch of records (a
//! relaxed load: nothing on the per-access path), so a run, a conversion or a trace ends
//! within one batch with [`Error::Interrupted`]; what it was writing is dropped
//! unfinished (files::AtomicFile) and a traced program is killed (trace/live.rs).
//!
//! SIGINT's handler is one-shot (`SA_RESETHAND`): a second Ctrl-C kills the process at
//! once, as it would without vmlab's handling. SIGTERM's stays: a SIGTERM repeated by
//! whatever sent the first (a process manager, a signal forwarded to the process group
//! as well) asks for the same stop, and the stop still ends with 128 + 15 and its
//! outputs removed instead of the default action's bare death. Work blocked where no loop runs (opening
//! a FIFO nobody writes, a read that never returns) cannot see the request: the
//! handlers' watchdog ends the process [`GRACE`] after the signal, removing the
//! temporary files of unfinished outputs first ([`pending`]).

use crate::{Error, Result};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Mutex;

static REQUESTED: AtomicI32 = AtomicI32::new(0);

/// SIGINT's number, for callers that learn of an interrupt some other way.
pub const SIGINT: i32 = 2;
/// SIGTERM's number.
pub const SIGTERM: i32 = 15;

/// Ask every loop in the process to stop, as if `signal` had arrived.
pub fn request(signal: i32) {
    REQUESTED.store(signal.max(1), Ordering::Relaxed);
}

/// Withdraw a request once the interrupted work has returned.
pub fn clear() {
    REQUESTED.store(0, Ordering::Relaxed);
}

/// The signal a stop was requested by, if any.
pub(crate) fn requested() -> Option<i32> {
    match REQUESTED.load(Ordering::Relaxed) {
        0 => None,
        s => Some(s),
    }
}

/// `Err(Error::Interrupted)` once a stop is requested.
#[inline]
pub(crate) fn check() -> Result<()> {
    match requested() {
        None => Ok(()),
        Some(signal) => Err(Error::Interrupted { signal }),
    }
}

/// A signal's name for messages.
pub(crate) fn signal_name(signal: i32) -> String {
    match signal {
        SIGINT => "SIGINT".into(),
        SIGTERM => "SIGTERM".into(),
        s => format!("signal {s}"),
    }
}

/// How long a requested stop may take before the watchdog ends the process.
pub(crate) const GRACE: std::time::Duration = std::time::Duration::from_millis(750);

/// The temporary files of unfinished outputs (files::AtomicFile), for the watchdog to
/// remove.
static PENDING: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

fn pending_files() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    PENDING.lock().unwrap_or_else(|e| e.into_inner())
}

/// Temporary files being written: `pending(path, true)` when one is created,
/// `pending(path, false)` once it is renamed into place or removed.
pub(crate) fn pending(path: &Path, open: bool) {
    let mut p = pending_files();
    if open {
        p.push(path.to_path_buf());
    } else if let Some(i) = p.iter().position(|q| q == path) {
        p.swap_remove(i);
    }
}

/// End the process [`GRACE`] after a stop was requested, if the work has not ended it
/// by then: the work is blocked somewhere no loop checks.
fn watchdog() {
    loop {
        std::thread::sleep(std::time::Duration::from_millis(50));
        if let Some(signal) = requested() {
            std::thread::sleep(GRACE);
            for f in pending_files().drain(..) {
                let _ = std::fs::remove_file(f);
            }
            eprintln!("vmlab: {}", Error::Interrupted { signal });
            std::process::exit(128 + signal);
        }
    }
}

extern "C" fn on_signal(signal: libc::c_int) {
    // Async-signal-safe: one atomic store.
    request(signal);
}

/// Route SIGINT and SIGTERM to [`request`] for this process (the `vmlab` binary, or the
/// Python console script running a Rust command). Without it, the default action ends
/// the process at once, leaving temporary files and traced programs behind. A signal
/// the process was started ignoring stays ignored, as Python and shells do: a shell
/// starts background jobs with SIGINT ignored, and `nohup` ignores SIGHUP on purpose.
pub fn install_handlers() {
    #[cfg(unix)]
    for signal in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: a zeroed sigaction is a valid value (empty mask, no flags), and a null
        // new action only reads the current one; the handler does one atomic store, which
        // is async-signal-safe; SA_RESTART keeps reads and writes from failing with EINTR,
        // and SA_RESETHAND makes a second SIGINT take the default action.
        unsafe {
            let mut current: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(signal, std::ptr::null(), &mut current) != 0 || current.sa_sigaction == libc::SIG_IGN {
                continue;
            }
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
            action.sa_flags = libc::SA_RESTART | if signal == libc::SIGINT { libc::SA_RESETHAND } else { 0 };
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signal, &action, std::ptr::null_mut());
        }
    }
    // Elsewhere the default action stays: the process ends at once.
    static WATCHDOG: std::sync::Once = std::sync::Once::new();
    WATCHDOG.call_once(|| {
        let _ = std::thread::Builder::new().name("vmlab-watchdog".into()).spawn(watchdog);
    });
}
