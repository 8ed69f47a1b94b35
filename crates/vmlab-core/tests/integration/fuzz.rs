//! Bounded, deterministic fuzzing of everything that reads outside input: arbitrary
//! record streams through the engine (what a corrupt trace whose checksums still
//! match, or an importer, can hand it), lackey logs, ChampSim and drmemtrace files, configuration
//! overrides and workload parameters. Each must end in a result or one clear error
//! (naming the file, line, offset or key), never a panic or a hang. The coverage-guided
//! harnesses in fuzz/ run the same entry points for as long as one likes
//! (docs/fuzzing.md).

use crate::common::drain;
use proptest::prelude::*;
use vmlab::config::Config;

/// `n` cases, times `VMLAB_FUZZ_SCALE` (default 1) for a longer hunt.
fn cases(n: u32) -> u32 {
    n * std::env::var("VMLAB_FUZZ_SCALE").ok().and_then(|s| s.parse().ok()).unwrap_or(1)
}
use vmlab::addr::AccessKind;
use vmlab::sim::{run, SourceInfo};
use vmlab::trace::{Access, Dep, MapFlags, Record, VecSource};

/// Addresses and lengths where bugs live: near 0, page and huge-page edges, the top of
/// the user half and of the whole space, and anything at all.
fn edgy_u64() -> impl Strategy<Value = u64> {
    prop_oneof![
        4 => 0u64..(1 << 24),
        2 => (0u64..64).prop_map(|k| 0x7f00_0000_0000 + k * 0x1000),
        1 => (0u64..4).prop_map(|k| (1u64 << 47) - 0x1000 * (k + 1)),
        1 => (0u64..4).prop_map(|k| u64::MAX - 0x1000 * k),
        1 => (12u32..64).prop_map(|s| 1u64 << s),
        1 => any::<u64>(),
    ]
}

fn record() -> impl Strategy<Value = Record> {
    let pid = prop_oneof![Just(1u32), Just(2), Just(3), any::<u32>()];
    prop_oneof![
        8 => (edgy_u64(), 0u16..=u16::MAX, pid.clone(), 0u8..3, any::<u8>()).prop_map(|(vaddr, size, pid, k, dep)| {
            let kind = [AccessKind::Read, AccessKind::Write, AccessKind::Fetch][k as usize];
            // Any byte is a dependence: unknown, none, or 1..=254 loads back.
            Record::Access(Access { vaddr, pid, size, kind, dep: Dep(dep) })
        }),
        1 => any::<u64>().prop_map(Record::Tick),
        2 => (pid.clone(), edgy_u64(), edgy_u64(), any::<u8>(), 0u8..8)
            .prop_map(|(pid, start, len, prot, f)| Record::Mmap { pid, start, len, prot, flags: MapFlags(f) }),
        1 => (pid.clone(), edgy_u64(), edgy_u64()).prop_map(|(pid, start, len)| Record::Munmap { pid, start, len }),
        1 => (pid.clone(), edgy_u64(), edgy_u64(), any::<u8>()).prop_map(|(pid, start, len, prot)| Record::Mprotect { pid, start, len, prot }),
        1 => (pid.clone(), edgy_u64()).prop_map(|(pid, end)| Record::Brk { pid, end }),
        1 => (pid.clone(), pid.clone()).prop_map(|(parent, child)| Record::Fork { parent, child }),
        1 => pid.clone().prop_map(|pid| Record::Exit { pid }),
        1 => pid.prop_map(|pid| Record::ContextSwitch { pid }),
    ]
}

/// Configurations that take different paths through the OS model and the walkers;
/// small physical memory, so exhaustion is reached too.
const CONFIGS: &[(&str, &[&str])] = &[
    ("tiny", &[]),
    ("tiny", &["os.implicit_anon=false"]),
    ("tiny", &["page_table.kind=hashed", "page_table.hashed.subblock=4"]),
    ("tiny", &["page_table.kind=guarded", "page_table.guarded.node_entries=2"]),
    ("tiny", &["page_table.kind=mpt", "tlb={u={level=1,serves=\"unified\",entries=8,page_sizes=[\"4K\"],pairs=true}}"]),
    ("tiny", &["page_table.kind=inverted"]),
    ("tiny", &["page_table.kind=linear"]),
    ("tiny", &["page_table.kind=ecpt"]),
    ("tiny", &["os.policy.kind=thp-reserve"]),
    ("tiny", &["mmu.asid_tags=false", "memory.data_refs=true"]),
    ("skylake", &["page_table.kind=nested-radix"]),
    ("ecpt-asplos22", &["page_table.kind=nested-ecpt"]),
    ("ecpt-asplos22", &["page_table.kind=hybrid"]),
    ("romer", &[]),
    ("tps", &[]),
    ("itanium2", &["mmu.regions.share=true"]),
    ("romer-cache", &["os.recolor.kind=cml"]),
];

fn config(i: usize, phys: &str) -> Config {
    let (preset, sets) = CONFIGS[i];
    let mut o: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    o.push(format!("machine.phys_mem={phys}"));
    Config::load(preset, &o).unwrap_or_else(|e| panic!("fuzz config {preset} {sets:?}: {e}"))
}

proptest! {
    #![proptest_config(crate::common::proptest_config(cases(160)))]

    /// Any record stream under any of the configurations simulates or fails with an
    /// error; it never panics.
    #[test]
    fn arbitrary_record_streams_simulate_or_fail_cleanly(
        records in proptest::collection::vec(record(), 0..120),
        which in 0..CONFIGS.len(),
        phys in prop_oneof![Just("64M"), Just("1G")],
    ) {
        let cfg = config(which, phys);
        let mut src = VecSource::new("fuzz", records);
        let _ = run(&cfg, &mut src, &SourceInfo::default(), |_| {});
    }
}

/// A lackey log line: well-formed, nearly well-formed, or garbage.
fn lackey_line() -> impl Strategy<Value = String> {
    let num = prop_oneof![edgy_u64().prop_map(|v| format!("{v:x}")), Just(String::new()), "[0-9a-fxX-]{1,20}"];
    let dec = prop_oneof![(0u64..70000).prop_map(|v| v.to_string()), Just(String::new()), "[0-9a-z-]{1,22}"];
    let name = prop_oneof![Just("mmap"), Just("munmap"), Just("mprotect"), Just("brk"), Just("mremap"), Just("clone"), Just("exit_group"), Just("read")];
    prop_oneof![
        6 => (prop_oneof![Just("I  "), Just(" L "), Just(" S "), Just(" M ")], num.clone(), dec).prop_map(|(k, a, s)| format!("{k}{a},{s}")),
        1 => (0u32..5, "[ -~]{0,30}").prop_map(|(p, rest)| format!("=={p}== {rest}")),
        1 => (0u32..5, num.clone()).prop_map(|(p, pp)| format!("=={p}== Parent PID: {pp}")),
        2 => (0u32..5, name, proptest::collection::vec(num.clone(), 0..6), prop_oneof![Just("--> Success(0x"), Just("--> Failure(0x"), Just(""), Just("... [async] --> Success(0x")], num.clone())
            .prop_map(|(p, n, args, res, r)| format!("SYSCALL[{p},{p}](9) sys_{n} ( {} ) {res}{r})", args.join(", "))),
        1 => (0u32..5, 0u32..9).prop_map(|(p, c)| format!("SYSCALL[{p},1](56) sys_clone ( 0x1200011 ) --> Success(0x{c}) clone(fork): process {p} created child {c}")),
        1 => num.prop_map(|r| format!("   --> Success(0x{r})")),
        1 => "[ -~]{0,40}",
        1 => proptest::collection::vec(any::<u8>(), 0..40).prop_map(|b| String::from_utf8_lossy(&b).into_owned()),
    ]
}

/// One message of the QEMU plugin's stream: a header that is right, or off in its magic
/// or its length, and entries: accesses at edgy addresses, wide accesses, events with
/// any code and arguments (address-space calls with any arguments among them), garbage.
fn qemu_message() -> impl Strategy<Value = Vec<u8>> {
    use vmlab::trace::qemu_wire as w;
    let entry = prop_oneof![
        6 => (1u64..4, edgy_u64(), 0u64..0x1000).prop_map(|(k, va, size)| vec![k << 60 | size << 48 | (va & (w::SHORT_VA_LIMIT - 1))]),
        1 => (1u64..5, edgy_u64(), any::<u16>()).prop_map(|(k, va, size)| vec![w::wide_access(k, size as u64), va]),
        2 => (0u64..8, proptest::collection::vec(edgy_u64(), 0..9)).prop_map(|(code, args)| {
            let mut v = vec![w::event(code, args.len() as u64)];
            v.extend(args);
            v
        }),
        2 => (prop_oneof![Just(9u64), Just(10), Just(11), Just(12), Just(25), any::<u64>()], proptest::collection::vec(edgy_u64(), 6)).prop_map(|(nr, a)| {
            let mut v = vec![w::event(w::EV_SYSCALL, 7), nr];
            v.extend(a);
            v
        }),
        1 => any::<u64>().prop_map(|x| vec![x]),
    ];
    (proptest::collection::vec(entry, 0..12), 0u32..4, prop_oneof![6 => Just(0i64), 1 => -2i64..3], any::<bool>()).prop_map(|(entries, pid, skew, magic)| {
        let words: Vec<u64> = entries.concat();
        let n = (words.len() as i64 + skew).max(0) as u64;
        let mut all = vec![if magic { w::header0(0) | n << 32 } else { n << 32 }, w::header1(pid, 0)];
        all.extend(words);
        all.iter().flat_map(|x| x.to_le_bytes()).collect()
    })
}

proptest! {
    #![proptest_config(crate::common::proptest_config(cases(300)))]

    /// The QEMU plugin's stream of any messages decodes, or fails with an error that
    /// names the stream and the byte offset; what decodes simulates or fails cleanly.
    #[test]
    fn qemu_streams_decode_or_name_the_offset(messages in proptest::collection::vec(qemu_message(), 0..30)) {
        let mut d = vmlab::trace::qemu::Decoder::default();
        let mut records = Vec::new();
        let mut sink = |rs: &[Record]| {
            records.extend_from_slice(rs);
            Ok(())
        };
        let mut out = Ok(());
        for m in &messages {
            out = d.chunk(m, &mut sink);
            if out.is_err() {
                break;
            }
        }
        match out.and_then(|_| d.finish(&mut sink)) {
            Ok(()) => {
                let cfg = config(0, "64M");
                let _ = run(&cfg, &mut VecSource::new("qemu", records), &SourceInfo::default(), |_| {});
            }
            Err(e) => {
                let m = e.to_string();
                prop_assert!(m.contains("QEMU plugin's stream") && m.contains("byte offset"), "{}", m);
            }
        }
    }

    /// A lackey log of any lines imports or fails with an error that names the log and
    /// the line; what it imports simulates or fails cleanly.
    #[test]
    fn lackey_logs_import_or_name_the_line(lines in proptest::collection::vec(lackey_line(), 0..80)) {
        let text = lines.join("\n");
        let mut r = vmlab::trace::lackey::LackeyReader::new(std::io::Cursor::new(text.into_bytes()), "fuzz.log", 1);
        match drain(&mut r) {
            Ok(records) => {
                let cfg = config(0, "64M");
                let _ = run(&cfg, &mut VecSource::new("fuzz.log", records), &SourceInfo::default(), |_| {});
            }
            Err(e) => {
                let m = e.to_string();
                prop_assert!(m.contains("fuzz.log") && m.contains("line"), "{}", m);
            }
        }
    }

    /// A ChampSim file of any bytes (plain, or behind an xz header) imports whole
    /// instructions or fails naming the file and the offset.
    #[test]
    fn champsim_files_import_or_name_the_offset(bytes in proptest::collection::vec(any::<u8>(), 0..700), xz in any::<bool>()) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.champsim");
        let mut data = if xz { vec![0xFD, b'7', b'z', b'X', b'Z', 0x00] } else { Vec::new() };
        data.extend_from_slice(&bytes);
        std::fs::write(&path, &data).unwrap();
        let out = vmlab::trace::champsim::ChampSimReader::open(&path, 1).and_then(|mut r| drain(&mut r));
        match out {
            Ok(records) => prop_assert!(!xz || records.is_empty() || data.len() >= 64),
            Err(e) => {
                let m = e.to_string();
                prop_assert!(m.contains(&path.display().to_string()), "{}", m);
            }
        }
    }

    /// A drmemtrace stream of arbitrary entries (any type, size and address, after a
    /// header most of the time), cut at any byte, imports or fails naming the file
    /// and an offset inside it; what imports simulates.
    #[test]
    fn drmemtrace_streams_import_or_name_the_offset(
        entries in proptest::collection::vec((prop_oneof![4 => 0u16..52, 1 => any::<u16>()], prop_oneof![3 => 0u16..64, 1 => any::<u16>()], edgy_u64()), 0..60),
        header in proptest::bool::weighted(0.9),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut data = Vec::new();
        let mut push = |t: u16, size: u16, addr: u64| data.extend([&t.to_le_bytes()[..], &size.to_le_bytes(), &addr.to_le_bytes()].concat());
        if header {
            push(25, 0, 7);
            push(24, 4, 5);
            push(28, 2, 1);
        }
        for &(t, size, addr) in &entries {
            push(t, size, addr);
        }
        let end = if data.is_empty() { 0 } else { cut.index(data.len() + 1) };
        data.truncate(end);
        let len = data.len() as u64;
        let out = vmlab::trace::drmemtrace::DrmemtraceReader::from_reader(std::io::Cursor::new(data), std::path::Path::new("fuzz.trace")).and_then(|mut r| drain(&mut r));
        match out {
            Ok(records) => {
                let cfg = Config::load("tiny", &[]).unwrap();
                let _ = run(&cfg, &mut VecSource::new("fuzz", records), &SourceInfo::default(), |_| {});
            }
            Err(vmlab::Error::Trace { file, offset, msg }) => {
                prop_assert!(file.ends_with("fuzz.trace") && offset <= len, "{} at {} of {}", msg, offset, len);
            }
            Err(e) => prop_assert!(false, "not a trace error: {}", e),
        }
    }
}

/// Keys that exist, keys that nearly do, and values of every type.
fn override_spec() -> impl Strategy<Value = String> {
    let key = prop_oneof![
        Just("tlb.l1d.entries"),
        Just("tlb.l1d.ways"),
        Just("tlb.l1d.page_sizes"),
        Just("tlb.l2.level"),
        Just("tlb.l1d.pairs"),
        Just("cache.l1d.size"),
        Just("cache.l1d.line"),
        Just("cache.l1d.ways"),
        Just("os.page_size"),
        Just("os.policy.kind"),
        Just("os.policy.threshold"),
        Just("machine.phys_mem"),
        Just("page_table.kind"),
        Just("page_table.radix.levels"),
        Just("page_table.hashed.buckets"),
        Just("page_table.guarded.node_entries"),
        Just("page_table.ecpt.ways"),
        Just("page_table.ecpt.initial_slots"),
        Just("pwc.entries"),
        Just("memory.latency"),
        Just("sim.warmup_accesses"),
        Just("sim.warmup_instructions"),
        Just("sim.max_instructions"),
        Just("mmu.regions.share"),
        Just("os.recolor.kind"),
        Just("tlb"),
        Just("cache"),
        Just("nope.key"),
        Just("tlb.l1d.nope"),
    ];
    let value = prop_oneof![
        Just("0".to_string()),
        Just("1".to_string()),
        Just("3".to_string()),
        Just("-1".to_string()),
        Just("18446744073709551615".to_string()),
        Just("4K".to_string()),
        Just("2M".to_string()),
        Just("1T".to_string()),
        Just("7K".to_string()),
        Just("true".to_string()),
        Just("[]".to_string()),
        Just("[0, 0]".to_string()),
        Just("[\"4K\", \"3K\"]".to_string()),
        Just("\"radix\"".to_string()),
        Just("guarded".to_string()),
        Just("{}".to_string()),
        Just("0.5".to_string()),
        Just("nan".to_string()),
        Just("inf".to_string()),
        "[ -~]{0,12}",
    ];
    prop_oneof![10 => (key, value).prop_map(|(k, v)| format!("{k}={v}")), 1 => "[ -~]{0,20}"]
}

proptest! {
    #![proptest_config(crate::common::proptest_config(cases(400)))]

    /// Any overrides on any preset give a configuration or an error naming a key; a
    /// configuration that loads builds an engine or fails cleanly, and runs a few
    /// accesses.
    #[test]
    fn config_overrides_load_or_name_the_key(
        preset in prop_oneof![Just("tiny"), Just("skylake"), Just("romer"), Just("tps"), Just("ecpt-asplos22"), Just("itanium2")],
        sets in proptest::collection::vec(override_spec(), 0..4),
    ) {
        match Config::load(preset, &sets) {
            Ok(cfg) => {
                let recs: Vec<Record> = (0..64u64).map(|i| Record::read(0x7f00_0000_0000 + i * 40_000, 8, 1)).collect();
                let _ = run(&cfg, &mut VecSource::new("fuzz", recs), &SourceInfo::default(), |_| {});
            }
            Err(e) => prop_assert!(e.to_string().contains("config key") || e.to_string().contains("preset"), "{}", e),
        }
    }

    /// Any parameters to any synthetic workload generate records or fail naming the
    /// parameter.
    #[test]
    fn workload_parameters_generate_or_name_the_parameter(
        name in prop_oneof![Just("gups"), Just("stream"), Just("stride"), Just("pchase"), Just("sparse"), Just("shared"), Just("graph"), Just("kv"), Just("xsbench"), Just("ycsb"), Just("sysbench")],
        params in proptest::collection::vec((
            prop_oneof![Just("footprint"), Just("accesses"), Just("stride"), Just("pages"), Just("space"), Just("layout"), Just("processes"),
                        Just("vertices"), Just("degree"), Just("keys"), Just("seed"), Just("base"), Just("fetch"), Just("zzz")],
            prop_oneof![Just("0"), Just("1"), Just("4K"), Just("1M"), Just("300"), Just("64T"), Just("-3"), Just("x"), Just("18446744073709551615"), Just("file")],
        ), 0..4),
    ) {
        let mut p: Vec<(String, String)> = params.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        if !p.iter().any(|(k, _)| k == "accesses") {
            p.push(("accesses".into(), "2000".into()));
        }
        for a in p.iter_mut().filter(|(k, _)| k == "accesses") {
            // Keep a generated trace short (the last value given wins).
            if a.1.parse::<u64>().map_or(true, |n| n > 5000) && !a.1.starts_with('-') && a.1 != "x" {
                a.1 = "2000".into();
            }
        }
        match vmlab::trace::synth::open(name, &p) {
            Ok(mut src) => {
                if let Ok(records) = drain(src.as_mut()) {
                    let _ = run(&config(0, "1G"), &mut VecSource::new("fuzz", records), &SourceInfo::default(), |_| {});
                }
            }
            Err(e) => prop_assert!(!e.to_string().is_empty()),
        }
    }
}

/// The inputs fuzzing found, each now a result or a clear error (docs/fuzzing.md).
#[test]
fn what_fuzzing_found_stays_fixed() {
    let sim = |preset: &str, sets: &[&str], records: Vec<Record>| {
        let cfg = Config::load(preset, &sets.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
        run(&cfg, &mut VecSource::new("fuzz", records), &SourceInfo::default(), |_| {})
    };
    let base = 0x7f00_0000_0000u64;
    // An munmap of length 0 under a reservation-based policy.
    let mm = Record::Mmap { pid: 1, start: base, len: 8 << 20, prot: 3, flags: MapFlags::PRIVATE };
    sim("tiny", &["os.policy.kind=thp-reserve"], vec![mm, Record::read(base, 8, 1), Record::Munmap { pid: 1, start: base + 4096, len: 0 }]).unwrap();
    // A brk within 4 KiB of 2^64 (it once wrapped to a heap end near 0).
    sim("tiny", &[], vec![Record::Brk { pid: 1, end: base }, Record::Brk { pid: 1, end: u64::MAX - 10 }, Record::read(base, 8, 1)]).unwrap();
    // An access to the top page of the address space, and ticks that overflow the count.
    let e = sim("tiny", &[], vec![Record::read(u64::MAX - 100, 8, 1)]).unwrap_err().to_string();
    assert!(e.contains("top 4 KiB page"), "{e}");
    let e = sim("tiny", &[], vec![Record::Tick(u64::MAX), Record::read(base, 8, 1), Record::Tick(2)]).unwrap_err().to_string();
    assert!(e.contains("overflows the instruction count"), "{e}");
    // Structures too large to simulate are configuration errors naming the key.
    let e = Config::load("tiny", &["cache.l1d.size=1T".to_string()]).unwrap_err().to_string();
    assert!(e.contains("cache.l1d.size"), "{e}");
    let e = Config::load("tiny", &["tlb.l1d.entries=100000000".to_string(), "tlb.l1d.ways=1".to_string()]).unwrap_err().to_string();
    assert!(e.contains("tlb.l1d.entries"), "{e}");
    // Each within its own limit, together beyond what one configuration may allocate:
    // the error names the largest.
    let o = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    for (set, key) in [
        (o(&["page_table.kind=hashed", "page_table.hashed.buckets=67108864"]), "page_table.hashed.buckets"),
        (o(&["page_table.kind=ecpt", "page_table.ecpt.initial_slots=[16777216,16777216,16777216]", "page_table.ecpt.ways=8"]), "page_table.ecpt.initial_slots"),
        (o(&["page_table.stlb.entries=67108864"]), "page_table.stlb.entries"),
        (o(&["pwc.entries=[67108864,67108864,67108864]"]), "pwc.entries"),
    ] {
        let e = Config::load("tiny", &set).unwrap_err().to_string();
        assert!(e.contains(key) && e.contains("at most 33554432"), "{e}");
    }
    // Synthetic fragmentation of a petabyte would shuffle 2^29 blocks.
    let e = sim("tiny", &["machine.phys_mem=1P", "machine.fragmentation.free=0.5"], vec![Record::read(base, 8, 1)]).unwrap_err().to_string();
    assert!(e.contains("machine.fragmentation.order"), "{e}");
    // Footprints beyond 2^56 and bases beyond 2^57 name the parameter; 64T works.
    let p = |k: &str, v: &str| vec![(k.to_string(), v.to_string()), ("accesses".to_string(), "100".to_string())];
    assert!(vmlab::trace::synth::open("gups", &p("footprint", "16E")).err().unwrap().to_string().contains("footprint"));
    assert!(vmlab::trace::synth::open("stream", &p("base", "0xfffffffffffff000")).err().unwrap().to_string().contains("base"));
    let mut x = vmlab::trace::synth::open("sysbench", &[p("block_size", "64T"), vec![("mode".to_string(), "rnd".to_string())]].concat()).unwrap();
    assert_eq!(drain(x.as_mut()).unwrap().iter().filter(|r| matches!(r, Record::Access(_))).count(), 100);
}
