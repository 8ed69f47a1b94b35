#![no_main]
//! Any bytes as a drmemtrace trace stream (plain, or compressed when they start with a
//! compression's magic).
use libfuzzer_sys::fuzz_target;
use std::io::Cursor;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let Ok(mut r) = vmlab::trace::drmemtrace::DrmemtraceReader::from_reader(Cursor::new(data.to_vec()), Path::new("fuzz.trace")) else { return };
    if let Ok(records) = vmlab_fuzz::drain(&mut r, 100_000) {
        vmlab_fuzz::simulate(records, &["machine.phys_mem=256M"]);
    }
});
