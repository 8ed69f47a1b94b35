//! Stack-distance miss-ratio curves equal direct simulation of the same TLB by the
//! engine, at every sampled size and associativity.

use vmlab::api::{self, RunRequest, SourceSpec};
use vmlab::sim::mrc::{MrcOptions, Side};

/// A machine whose only TLB is one data TLB of `entries` entries in `ways` ways (0 =
/// fully associative) with 4K pages and LRU, tagged by ASID.
fn one_tlb_config(dir: &std::path::Path, entries: usize, ways: usize) -> String {
    let path = dir.join(format!("tlb-{entries}-{ways}.toml"));
    std::fs::write(
        &path,
        format!(
            "[machine]\nphys_mem = \"4G\"\n[os]\npage_size = \"4K\"\n[page_table]\nkind = \"radix\"\n\
             [pwc]\nentries = [1]\n[memory]\nlatency = 100\n[mmu]\nasid_tags = true\n\
             [tlb.only]\nlevel = 1\nserves = \"data\"\nentries = {entries}\nways = {ways}\npage_sizes = [\"4K\"]\nreplacement = \"lru\"\n"
        ),
    )
    .unwrap();
    path.display().to_string()
}

fn direct_misses(config: &str, source: &SourceSpec) -> u64 {
    let doc = api::run(&RunRequest { config: config.into(), overrides: vec![], source: source.clone(), progress: false }).unwrap();
    doc["tlb"]["only"]["misses"].as_u64().unwrap()
}

fn workload(name: &str, params: &[(&str, &str)]) -> SourceSpec {
    SourceSpec::Workload { name: name.into(), params: params.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect() }
}

#[test]
fn curves_equal_direct_simulation_at_every_sampled_size() {
    let dir = std::env::temp_dir().join(format!("vmlab-mrc-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let opts = MrcOptions { sets: vec![4, 16], max_ways: 8, max_entries: 1024, ..MrcOptions::default() };
    for source in [
        // Zipf-skewed keys: a curve with a real slope.
        workload("kv", &[("keys", "200000"), ("accesses", "40000"), ("seed", "5")]),
        // Several processes: pages are tagged by ASID.
        workload("shared", &[("procs", "3"), ("pages", "300"), ("burst", "50"), ("accesses", "30000")]),
        // Accesses that cross pages reference both.
        workload("stream", &[("footprint", "2M"), ("stride", "4093"), ("size", "16"), ("accesses", "20000")]),
    ] {
        let curves = api::miss_ratio_curves(&source, &opts).unwrap();
        assert!(curves.references > 0);
        for p in curves.fully_associative.iter().filter(|p| [1, 4, 32, 128, 1024].contains(&p.entries)) {
            let cfg = one_tlb_config(&dir, p.entries, 0);
            assert_eq!(p.misses, direct_misses(&cfg, &source), "fully associative, {} entries, {source:?}", p.entries);
        }
        for p in curves.set_associative.iter().filter(|p| [1, 2, 8].contains(&p.ways)) {
            let cfg = one_tlb_config(&dir, p.entries, p.ways);
            assert_eq!(p.misses, direct_misses(&cfg, &source), "{} sets x {} ways, {source:?}", p.sets, p.ways);
        }
        // Monotone in size (LRU has no Belady anomaly).
        assert!(curves.fully_associative.windows(2).all(|w| w[1].misses <= w[0].misses));
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn bad_options_are_named() {
    let src = workload("gups", &[("accesses", "10")]);
    let err = api::miss_ratio_curves(&src, &MrcOptions { sets: vec![12], ..MrcOptions::default() }).unwrap_err().to_string();
    assert!(err.contains("--sets") && err.contains("12"), "{err}");
    let err = "both".parse::<Side>().unwrap_err().to_string();
    assert!(err.contains("--side"), "{err}");
}
