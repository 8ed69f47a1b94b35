#![no_main]
//! Any bytes as the QEMU plugin's stream (`vmlab trace --engine qemu`): split into
//! messages as the socket would deliver them (the first byte sets the message length),
//! decoded, then what decodes is simulated.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&first, rest)) = data.split_first() else { return };
    let size = 16 + 8 * (first as usize % 32);
    let mut d = vmlab::trace::qemu::Decoder::default();
    let mut records = Vec::new();
    let mut sink = |rs: &[vmlab::trace::Record]| {
        records.extend_from_slice(rs);
        Ok(())
    };
    for message in rest.chunks(size) {
        if d.chunk(message, &mut sink).is_err() {
            return;
        }
    }
    if d.finish(&mut sink).is_ok() && records.len() < 100_000 {
        vmlab_fuzz::simulate(records, &["machine.phys_mem=256M"]);
    }
});
