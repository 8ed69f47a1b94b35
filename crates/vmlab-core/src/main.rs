fn main() {
    // Like other Unix tools, die quietly when the reader of stdout goes away
    // (`vmlab workloads | head`) instead of panicking on a broken pipe.
    #[cfg(unix)]
    // SAFETY: restoring the default disposition of SIGPIPE before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    // Ctrl-C and SIGTERM stop the command cleanly (crate::interrupt): partial outputs are
    // removed and a traced program is killed.
    vmlab::interrupt::install_handlers();
    std::process::exit(vmlab::cli::main(std::env::args().collect()));
}
