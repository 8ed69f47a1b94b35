fn main() {
    // Like other Unix tools, die quietly when the reader of stdout goes away
    // (`vmlab workloads | head`) instead of panicking on a broken pipe.
    #[cfg(unix)]
    // SAFETY: restoring the default disposition of SIGPIPE before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    std::process::exit(vmlab::cli::main(std::env::args().collect()));
}
