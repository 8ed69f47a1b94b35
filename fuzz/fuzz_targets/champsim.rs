#![no_main]
//! Any bytes as a ChampSim trace (plain, or xz when they start with its magic).
use libfuzzer_sys::fuzz_target;
use std::io::Cursor;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let Ok(mut r) = vmlab::trace::champsim::ChampSimReader::from_reader(Cursor::new(data.to_vec()), Path::new("fuzz.champsim"), 1) else { return };
    if let Ok(records) = vmlab_fuzz::drain(&mut r, 100_000) {
        vmlab_fuzz::simulate(records, &["machine.phys_mem=256M"]);
    }
});
