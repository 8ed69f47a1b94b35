#![no_main]
//! Any text as a configuration file, then as `key=value` overrides on the tiny preset;
//! a configuration that loads runs a few accesses.
use libfuzzer_sys::fuzz_target;
use vmlab::config::Config;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let loaded = [Config::from_toml(&text, "fuzz.toml", &[]), Config::load("tiny", &text.lines().map(str::to_string).collect::<Vec<_>>())];
    for cfg in loaded.into_iter().flatten() {
        let records = (0..32u64).map(|i| vmlab::trace::Record::read(0x7f00_0000_0000 + i * 40_000, 8, 1)).collect();
        let _ = vmlab::sim::run(&cfg, &mut vmlab::trace::VecSource::new("fuzz", records), &vmlab::sim::SourceInfo::default(), |_| {});
    }
});
