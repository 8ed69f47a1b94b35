#![no_main]
//! Any bytes as a .vmt file: decode, then simulate what decodes.
use libfuzzer_sys::fuzz_target;
use std::io::Cursor;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let Ok(mut r) = vmlab::trace::vmt::VmtReader::from_reader(Cursor::new(data.to_vec()), Path::new("fuzz.vmt")) else { return };
    if let Ok(records) = vmlab_fuzz::drain(&mut r, 100_000) {
        vmlab_fuzz::simulate(records, &[]);
    }
});
