#![no_main]
//! Any bytes as a valgrind lackey log: import, then simulate what imports.
use libfuzzer_sys::fuzz_target;
use std::io::Cursor;

fuzz_target!(|data: &[u8]| {
    let mut r = vmlab::trace::lackey::LackeyReader::new(Cursor::new(data.to_vec()), "fuzz.log", 1);
    if let Ok(records) = vmlab_fuzz::drain(&mut r, 100_000) {
        vmlab_fuzz::simulate(records, &[]);
    }
});
