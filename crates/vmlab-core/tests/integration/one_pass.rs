//! One pass, many configurations: every document equals the one a separate run gives.

use serde_json::Value;
use vmlab::api::{self, RunRequest, SourceSpec};

/// Configs that differ in the MMU, the page table, the page-size policy, the caches and
/// the run length: the shared pass must not leak state between them.
fn configs() -> Vec<(String, Vec<String>)> {
    let c = |preset: &str, o: &[&str]| (preset.to_string(), o.iter().map(|s| s.to_string()).collect::<Vec<_>>());
    vec![
        c("skylake", &[]),
        c("skylake", &["tlb.l1d_4k.entries=16", "tlb.l1d_4k.ways=4"]),
        c("skylake", &["page_table.kind=hashed"]),
        c("skylake", &["page_table.kind=ecpt"]),
        c("skylake", &["os.policy.kind=thp-reserve"]),
        c("skylake", &["memory.data_refs=true"]),
        c("skylake", &["sim.max_accesses=1000"]),
        c("romer", &["os.policy.kind=approx-online"]),
        c("skylake", &["page_table.kind=nested-radix"]),
    ]
}

fn separately(cfgs: &[(String, Vec<String>)], source: &SourceSpec) -> Vec<Value> {
    cfgs.iter().map(|(c, o)| api::run(&RunRequest { config: c.clone(), overrides: o.clone(), source: source.clone(), progress: false }).unwrap()).collect()
}

fn workload(name: &str, params: &[(&str, &str)]) -> SourceSpec {
    SourceSpec::Workload { name: name.into(), params: params.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect() }
}

#[test]
fn one_pass_equals_separate_runs_on_one_and_two_threads() {
    let cfgs = configs();
    for source in [
        workload("gups", &[("footprint", "64M"), ("accesses", "60000"), ("seed", "3")]),
        workload("shared", &[("procs", "4"), ("pages", "64"), ("accesses", "20000")]),
    ] {
        let expected = separately(&cfgs, &source);
        for threads in [1, 2, 4] {
            let got = api::run_many(&cfgs, &source, threads, false).unwrap();
            assert_eq!(got.len(), cfgs.len());
            for ((g, e), c) in got.into_iter().zip(&expected).zip(&cfgs) {
                assert_eq!(&g.unwrap(), e, "config {c:?}, {threads} thread(s), {source:?}");
            }
        }
    }
}

#[test]
fn a_failing_config_fails_alone_and_offline_runs_its_two_passes() {
    let source = workload("stream", &[("footprint", "8M"), ("accesses", "200000")]);
    let cfgs = vec![
        ("skylake".to_string(), vec!["tlb.l1d_4k.entries=0x".to_string()]),
        ("skylake".to_string(), vec![]),
        // Out of simulated memory mid-run: that config's error, not the others'.
        ("skylake".to_string(), vec!["machine.phys_mem=4M".to_string()]),
        ("romer".to_string(), vec!["os.policy.kind=offline".to_string()]),
    ];
    let got = api::run_many(&cfgs, &source, 2, false).unwrap();
    let err_of = |r: &vmlab::Result<Value>| r.as_ref().err().map(|e| e.to_string()).expect("this config must fail");
    let err = err_of(&got[0]);
    assert!(err.contains("tlb.l1d_4k.entries"), "{err}");
    assert_eq!(got[1].as_ref().unwrap(), &separately(&cfgs[1..2], &source)[0]);
    let oom = err_of(&got[2]);
    assert!(oom.contains("memory"), "{oom}");
    let offline = got[3].as_ref().unwrap();
    assert_eq!(offline["policy"]["details"]["passes"], 2);
    assert_eq!(offline, &separately(&cfgs[3..4], &source)[0]);
}

#[test]
fn a_corrupt_trace_fails_every_config_with_its_offset() {
    let dir = std::env::temp_dir().join(format!("vmlab-one-pass-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("t.vmt");
    let recs: Vec<_> = (0..50_000u64).map(|i| vmlab::trace::Record::read(0x1000_0000 + (i % 4096) * 4096, 8, 1)).collect();
    let mut w = vmlab::trace::vmt::VmtWriter::create(&path, &vmlab::trace::TraceMeta::default()).unwrap();
    w.write_all(&recs).unwrap();
    w.finish().unwrap();
    let mut bytes = std::fs::read(&path).unwrap();
    let n = bytes.len();
    bytes.truncate(n - n / 3);
    std::fs::write(&path, &bytes).unwrap();
    let cfgs = configs();
    let err = api::run_many(&cfgs[..3], &SourceSpec::Trace(path.clone()), 2, false).unwrap_err().to_string();
    assert!(err.contains("t.vmt"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}
