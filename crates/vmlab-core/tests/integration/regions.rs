//! Itanium region IDs and TLB sharing on the "extreme" benchmark (Chapman et al. §4.4):
//! n processes touching the same p pages in turn, shared through protection keys (data)
//! or through the program's text region (instruction fetches).

use serde_json::Value;
use vmlab::api::{self, RunRequest, SourceSpec};

fn extreme(pages: u32, share: bool, extra: &[&str]) -> vmlab::Result<Value> {
    extreme_side("data", pages, &[&[format!("mmu.regions.share={share}").as_str()], extra].concat())
}

/// The extreme benchmark on `side` (data, instr or both), 10 processes.
fn extreme_side(side: &str, pages: u32, overrides: &[&str]) -> vmlab::Result<Value> {
    let source = SourceSpec::Workload {
        name: "shared".into(),
        params: vec![("procs".into(), "10".into()), ("pages".into(), pages.to_string()), ("side".into(), side.into()), ("accesses".into(), "200000".into())],
    };
    let overrides = overrides.iter().map(|s| s.to_string()).collect();
    api::run(&RunRequest { config: "itanium2".into(), overrides, source, progress: false })
}

fn u(v: &Value, p: &str) -> u64 {
    v.pointer(p).and_then(Value::as_u64).unwrap_or_else(|| panic!("missing {p}"))
}

#[test]
fn sharing_cuts_tlb_misses_while_the_shared_set_fits_the_tlb() {
    // 64 shared pages: 10 x 64 private entries thrash the 128-entry L2 DTLB; 64 shared
    // ones fit, so only the first touch of each page walks.
    let private = extreme(64, false, &[]).unwrap();
    let shared = extreme(64, true, &[]).unwrap();
    assert_eq!(u(&shared, "/walks/count"), 64);
    assert!(u(&private, "/walks/count") >= 100 * u(&shared, "/walks/count"));
    assert_eq!(u(&shared, "/regions/shared_translations"), u(&shared, "/regions/key_checks"));
    assert!(u(&shared, "/regions/key_checks") > 0 && u(&private, "/regions/key_checks") == 0);
    // The same frames either way: sharing changes tags, not the memory. A process that
    // hits another's shared entry never faults the page into its own table (the shared
    // region is one address space), so each page faults once instead of once per process.
    assert_eq!(u(&private, "/memory/frames_data"), u(&shared, "/memory/frames_data"));
    assert_eq!((u(&private, "/faults/count"), u(&shared, "/faults/count")), (640, 64));
    // 512 pages outgrow the TLB even when shared: no gain left.
    let (p, s) = (extreme(512, false, &[]).unwrap(), extreme(512, true, &[]).unwrap());
    assert_eq!(u(&p, "/walks/count"), u(&s, "/walks/count"));
}

#[test]
fn flushed_protection_key_registers_fault_once_per_switch() {
    // One shared object; PKRs flushed at each switch: one key miss per time slice.
    let d = extreme(64, true, &["mmu.regions.pkr_switch=\"flush\"", "mmu.regions.key_miss_cycles=50"]).unwrap();
    let switches = u(&d, "/faults/context_switches");
    assert!(switches > 100);
    // The first slice of each process follows its fork, not a switch between sharers.
    let misses = u(&d, "/regions/key_misses");
    assert!(misses <= switches && misses + 10 >= switches, "{misses} key misses, {switches} switches");
    assert_eq!(u(&d, "/regions/key_miss_cycles"), 50 * misses);
    let reload = extreme(64, true, &[]).unwrap();
    assert_eq!(u(&reload, "/regions/key_misses"), 0);
}

#[test]
fn program_text_shares_itlb_entries_through_its_region() {
    // The ITLB variant: 10 processes forked from one fetch from the same 64 text pages.
    // Without text sharing each process's text is its own (own frames, entries tagged by
    // process): 640 entries thrash the 128-entry L2 ITLB. With it (§3.2), the program's
    // text is one region with one RID: 64 walks, and no protection keys involved.
    let private = extreme_side("instr", 64, &[]).unwrap();
    let shared = extreme_side("instr", 64, &["mmu.regions.share_text=true"]).unwrap();
    assert_eq!(u(&shared, "/walks/count"), 64);
    assert!(u(&private, "/walks/count") >= 100 * 64);
    assert_eq!((u(&private, "/faults/count"), u(&shared, "/faults/count")), (640, 64));
    assert!(u(&shared, "/regions/text_translations") > 0);
    assert_eq!(u(&shared, "/regions/key_checks") + u(&private, "/regions/text_translations"), 0);
    // Protection-key sharing alone leaves program text per process.
    let keys = extreme_side("instr", 64, &["mmu.regions.share=true"]).unwrap();
    assert_eq!(u(&keys, "/walks/count"), u(&private, "/walks/count"));
    // Both sides and both mechanisms: the data through keys, the text through its region;
    // each side's 64 pages fit its L2 TLB.
    let both = extreme_side("both", 64, &["mmu.regions.share=true", "mmu.regions.share_text=true"]).unwrap();
    assert_eq!(u(&both, "/walks/count"), 128);
    assert!(u(&both, "/regions/key_checks") > 0 && u(&both, "/regions/text_translations") > 0);
    let text_only = extreme_side("both", 64, &["mmu.regions.share_text=true"]).unwrap();
    assert!(u(&text_only, "/walks/count") >= 100 * 64, "the data stays per process");
    // The short VHPT can share a whole region (its key is the region's): text sharing
    // works with it.
    let short = extreme_side("instr", 64, &["page_table.kind=\"linear\"", "page_table.stlb.entries=0", "mmu.regions.share_text=true"]).unwrap();
    assert_eq!(u(&short, "/faults/count"), 64);
}

#[test]
fn impossible_sharing_configs_are_named() {
    let e = extreme(64, true, &["page_table.kind=\"linear\"", "page_table.stlb.entries=0"]).unwrap_err().to_string();
    assert!(e.contains("mmu.regions.share") && e.contains("short VHPT"), "{e}");
    let e = extreme(64, true, &["mmu.asid_tags=false"]).unwrap_err().to_string();
    assert!(e.contains("mmu.regions.share"), "{e}");
    let e = extreme(64, true, &["mmu.regions.pkrs=0"]).unwrap_err().to_string();
    assert!(e.contains("mmu.regions.pkrs"), "{e}");
    let e = extreme_side("instr", 64, &["mmu.regions.share_text=true", "mmu.asid_tags=false"]).unwrap_err().to_string();
    assert!(e.contains("mmu.regions.share_text"), "{e}");
    let e = extreme_side("code", 64, &[]).unwrap_err().to_string();
    assert!(e.contains("side"), "{e}");
}

/// A program's shared text outlives the process that mapped it: its fork child keeps
/// hitting the text's TLB entries and frames after the parent exits, and the frames go
/// with the last process running the program.
#[test]
fn shared_text_is_freed_with_the_last_process_of_the_program() {
    use vmlab::config::Config;
    use vmlab::sim::{run, SourceInfo};
    use vmlab::trace::record::prot;
    use vmlab::trace::{MapFlags, Record, VecSource};
    let text = 0x40_0000u64;
    let pages = 16u64;
    let fetch_all = |pid: u32, line: u64, r: &mut Vec<Record>| {
        r.push(Record::ContextSwitch { pid });
        r.extend((0..pages).map(|p| Record::fetch(text + p * 4096 + line * 64, 4, pid)));
    };
    let mut r = vec![Record::Mmap { pid: 1, start: text, len: pages * 4096, prot: prot::READ | prot::EXEC, flags: MapFlags::FILE }];
    r.push(Record::Fork { parent: 1, child: 2 });
    fetch_all(1, 0, &mut r);
    fetch_all(2, 1, &mut r);
    r.push(Record::Exit { pid: 1 });
    fetch_all(2, 2, &mut r);
    let sim = |share: bool, exit_last: bool| {
        let mut r = r.clone();
        if exit_last {
            r.push(Record::Exit { pid: 2 });
        }
        let cfg = Config::load("itanium2", &[format!("mmu.regions.share_text={share}")]).unwrap();
        run(&cfg, &mut VecSource::new("text", r), &SourceInfo::default(), |_| {}).unwrap()
    };
    let shared = sim(true, false);
    // Each page faults once, in the parent; the child hits the parent's entries, before
    // and after the parent exits.
    assert_eq!((u(&shared, "/walks/count"), u(&shared, "/faults/count")), (pages, pages));
    assert_eq!(u(&shared, "/memory/frames_data"), pages, "the child still holds the text");
    let private = sim(false, false);
    assert_eq!(u(&private, "/faults/count"), 2 * pages);
    assert_eq!(u(&sim(true, true), "/memory/frames_data"), 0, "the last exit frees the text");
}
