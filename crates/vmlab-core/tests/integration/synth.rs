//! Synthetic workloads: determinism, exact counts, layout invariants, parameter errors.

use std::collections::{BTreeMap, HashSet};
use vmlab::addr::AccessKind;
use vmlab::trace::{synth, Access, Dep, Record};

fn drain(name: &str, params: &[(&str, &str)]) -> Vec<Record> {
    let p: Vec<(String, String)> = params.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    let mut src = synth::open(name, &p).unwrap_or_else(|e| panic!("{name}: {e}"));
    let mut all = Vec::new();
    let mut buf = Vec::new();
    while src.next_batch(&mut buf).unwrap() {
        all.extend_from_slice(&buf);
    }
    all
}

fn data_accesses(rs: &[Record]) -> Vec<(AccessKind, u64, u16, u32)> {
    rs.iter()
        .filter_map(|r| match r {
            Record::Access(a) if a.kind != AccessKind::Fetch => Some((a.kind, a.vaddr, a.size, a.pid)),
            _ => None,
        })
        .collect()
}

#[test]
fn every_workload_is_deterministic_exact_and_inside_its_regions() {
    for w in synth::catalog() {
        let small: Vec<(&str, &str)> = match w.name {
            "graph" => vec![("vertices", "5000"), ("accesses", "20000")],
            "graph500" => vec![("scale", "10"), ("accesses", "20000")],
            "kv" => vec![("keys", "20000"), ("accesses", "20000")],
            "sparse" => vec![("pages", "300"), ("accesses", "20000")],
            "xsbench" => vec![("size", "small"), ("gridpoints", "200"), ("accesses", "20000")],
            "ycsb" => vec![("rows", "20000"), ("accesses", "20000")],
            "sysbench" => vec![("block_size", "1M"), ("mode", "rnd"), ("accesses", "20000")],
            _ => vec![("footprint", "8M"), ("accesses", "20000")],
        };
        let small: Vec<(&str, &str)> = small.into_iter().filter(|(k, _)| *k == "accesses" || w.params.iter().any(|p| p.name == *k)).collect();
        let a = drain(w.name, &small);
        let b = drain(w.name, &small);
        assert_eq!(a, b, "{} is not deterministic", w.name);
        let mut other = small.clone();
        other.push(("seed", "2"));
        if !matches!(w.name, "stream" | "stride" | "shared" | "strawman") {
            assert_ne!(a, drain(w.name, &other), "{}: the seed changes nothing", w.name);
        }
        let acc = data_accesses(&a);
        assert_eq!(acc.len(), 20000, "{}: access count", w.name);
        // Every access lies inside a region announced earlier.
        let mut regions: BTreeMap<u64, u64> = BTreeMap::new();
        for r in &a {
            match r {
                Record::Mmap { start, len, .. } => {
                    regions.insert(*start, start + len);
                }
                Record::Access(x) => {
                    let (s, e) = regions.range(..=x.vaddr).next_back().map(|(s, e)| (*s, *e)).unwrap_or((1, 0));
                    assert!(s <= x.vaddr && x.vaddr + x.size as u64 <= e, "{}: {:#x} outside every region", w.name, x.vaddr);
                }
                _ => {}
            }
        }
        assert!(a.iter().any(|r| matches!(r, Record::Tick(_))), "{}: no instruction ticks", w.name);
    }
}

#[test]
fn stream_with_page_stride_touches_every_page_of_the_gigabyte_once() {
    let rs = drain("stream", &[("footprint", "1G"), ("stride", "4096"), ("accesses", "262144")]);
    let acc = data_accesses(&rs);
    let pages: HashSet<u64> = acc.iter().map(|a| a.1 >> 12).collect();
    assert_eq!(pages.len(), 262144);
    let base = acc.iter().map(|a| a.1).min().unwrap();
    assert_eq!(base % (1 << 30), 0, "1 GiB aligned region");
    assert!(acc.iter().all(|a| a.1 < base + (1 << 30)));
}

#[test]
fn gups_is_read_then_write_of_one_aligned_word_inside_the_table() {
    let rs = drain("gups", &[("footprint", "64M"), ("accesses", "10001")]);
    let acc = data_accesses(&rs);
    let base = 0x7f00_0000_0000u64;
    for pair in acc.chunks(2) {
        assert_eq!(pair[0].0, AccessKind::Read);
        assert!(pair[0].1 % 8 == 0 && pair[0].1 >= base && pair[0].1 < base + (64 << 20));
        if pair.len() == 2 {
            assert_eq!(pair[1].0, AccessKind::Write);
            assert_eq!(pair[1].1, pair[0].1);
        }
    }
}

#[test]
fn pchase_visits_every_node_once_per_cycle() {
    let rs = drain("pchase", &[("footprint", "1M"), ("node", "64"), ("accesses", "32768")]);
    let acc = data_accesses(&rs);
    let first: HashSet<u64> = acc[..16384].iter().map(|a| a.1).collect();
    assert_eq!(first.len(), 16384);
    // The second cycle repeats the first in the same order.
    assert_eq!(acc[..16384], acc[16384..]);
}

#[test]
fn sparse_pages_are_distinct_and_inside_the_space() {
    let rs = drain("sparse", &[("pages", "500"), ("space", "1T"), ("accesses", "50000")]);
    let maps: Vec<(u64, u64)> = rs.iter().filter_map(|r| if let Record::Mmap { start, len, .. } = r { Some((*start, *len)) } else { None }).collect();
    assert_eq!(maps.len(), 500);
    assert!(maps.iter().all(|m| m.1 == 4096));
    let distinct: HashSet<u64> = maps.iter().map(|m| m.0).collect();
    assert_eq!(distinct.len(), 500);
    let base = 0x7f00_0000_0000u64;
    assert!(maps.iter().all(|m| m.0 >= base && m.0 + 4096 <= base + (1 << 40)));
    let touched: HashSet<u64> = data_accesses(&rs).iter().map(|a| a.1 >> 12).collect();
    assert_eq!(touched.len(), 500, "random order reaches every page");
}

#[test]
fn shared_processes_touch_the_same_pages() {
    let rs = drain("shared", &[("procs", "3"), ("pages", "16"), ("burst", "16"), ("accesses", "480")]);
    let forks = rs.iter().filter(|r| matches!(r, Record::Fork { .. })).count();
    assert_eq!(forks, 2);
    let mut per_pid: BTreeMap<u32, HashSet<u64>> = BTreeMap::new();
    for a in data_accesses(&rs) {
        per_pid.entry(a.3).or_default().insert(a.1 >> 12);
    }
    assert_eq!(per_pid.len(), 3);
    let pages: Vec<&HashSet<u64>> = per_pid.values().collect();
    assert_eq!(pages[0].len(), 16);
    assert!(pages.iter().all(|p| *p == pages[0]));
    assert!(rs.iter().any(|r| matches!(r, Record::Mmap { flags, .. } if flags.contains(vmlab::trace::MapFlags::SHARED))));
}

#[test]
fn bad_parameters_and_names_are_clear_errors() {
    let e = synth::open("gups", &[("footprnt".into(), "1G".into())]).err().unwrap().to_string();
    assert!(e.contains("unknown parameter `footprnt`") && e.contains("footprint"), "{e}");
    let e = synth::open("gups", &[("footprint".into(), "lots".into())]).err().unwrap().to_string();
    assert!(e.contains("`footprint`") && e.contains("expected"), "{e}");
    let e = synth::open("nosuch", &[]).err().unwrap().to_string();
    assert!(e.contains("unknown workload") && e.contains("gups"), "{e}");
    let e = synth::open("stream", &[("accesses".into(), "-5".into())]).err().unwrap().to_string();
    assert!(e.contains("`accesses`"), "{e}");
}

/// A digest of a record stream without the accesses' dependences: what a generator
/// emitted, address by address. Ticks count by their total (where they sit between
/// the accesses is the source's, not the generator's).
fn digest_without_deps(rs: &[Record]) -> u64 {
    let mut h = vmlab::config::fnv1a(&[]);
    let mut ticks = 0u64;
    for r in rs {
        let line = match *r {
            Record::Access(a) => format!("{:?} {:#x} {} {}\n", a.kind, a.vaddr, a.size, a.pid),
            Record::Tick(n) => {
                ticks += n;
                continue;
            }
            other => format!("{other:?}\n"),
        };
        h = vmlab::config::fnv1a_extend(h, line.as_bytes());
    }
    vmlab::config::fnv1a_extend(h, format!("ticks {ticks}").as_bytes())
}

/// Each workload's record stream for a fixed seed is pinned: refactoring a generator,
/// or teaching it dependences, must not move one address. (A deliberate change of a
/// workload updates its digest here.)
#[test]
fn generated_streams_are_pinned() {
    let cases: &[(&str, &[(&str, &str)])] = &[
        ("gups", &[("footprint", "8M"), ("accesses", "20001")]),
        ("stream", &[("footprint", "8M"), ("accesses", "20000"), ("write_ratio", "0.25")]),
        ("stride", &[("footprint", "8M"), ("accesses", "20000"), ("streams", "3")]),
        ("pchase", &[("footprint", "8M"), ("accesses", "20000")]),
        ("sparse", &[("pages", "300"), ("accesses", "20000"), ("layout", "file")]),
        ("shared", &[("procs", "3"), ("pages", "16"), ("burst", "10"), ("accesses", "20000"), ("side", "both")]),
        ("graph", &[("vertices", "5000"), ("accesses", "20000")]),
        ("graph500", &[("scale", "10"), ("accesses", "20000")]),
        ("graph500", &[("scale", "9"), ("edgefactor", "4"), ("kernel", "pagerank"), ("accesses", "20000")]),
        ("kv", &[("keys", "20000"), ("accesses", "20000"), ("write_ratio", "0.3")]),
        ("kv", &[("keys", "20000"), ("accesses", "20000"), ("code", "4K")]),
        ("xsbench", &[("size", "small"), ("gridpoints", "200"), ("accesses", "20000")]),
        ("ycsb", &[("rows", "20000"), ("accesses", "20000")]),
        ("ycsb", &[("rows", "20000"), ("index", "hash"), ("theta", "0.9"), ("accesses", "20000")]),
        ("sysbench", &[("block_size", "1M"), ("mode", "rnd"), ("accesses", "20000")]),
        ("strawman", &[("accesses", "20000"), ("pages", "3")]),
    ];
    let got: Vec<String> = cases.iter().map(|(name, params)| format!("{name} {:016x}", digest_without_deps(&drain(name, params)))).collect();
    let want = [
        "gups 8558424719b6aa6a",
        "stream 8c4a69999a4e5080",
        "stride 41f9d6d61cf33552",
        "pchase efefcc76859e3f17",
        "sparse c1368158d7707aad",
        "shared 3dee6f536263453a",
        "graph b187d70aaf2634f6",
        "graph500 908ab6c5e66f8f2b",
        "graph500 689dd8c3d835102f",
        "kv 10cfca8ead5622a1",
        "kv 058b8683ecedf43d",
        "xsbench 67600e3f2de26ea3",
        "ycsb 56a53b9d0d323a3d",
        "ycsb 00bfb1bedd15221f",
        "sysbench aec0e2f0780c86dc",
        "strawman 9242fe875f0828d1",
    ];
    assert_eq!(got, want);
}

/// Every access of `rs` with the access its dependence names (the k-th previous read of
/// its pid), if any.
fn with_producers(rs: &[Record]) -> Vec<(Access, Option<Access>)> {
    let mut reads: BTreeMap<u32, Vec<Access>> = BTreeMap::new();
    let mut out = Vec::new();
    for r in rs {
        if let Record::Access(a) = *r {
            let mine = reads.entry(a.pid).or_default();
            let producer = a.dep.distance().map(|k| {
                assert!(k as usize <= mine.len(), "{a:?} depends on a read before the trace's first");
                mine[mine.len() - k as usize]
            });
            out.push((a, producer));
            if a.kind == AccessKind::Read {
                mine.push(a);
            }
        }
    }
    out
}

#[test]
fn every_access_says_what_it_depends_on() {
    for w in synth::catalog() {
        let small: &[(&str, &str)] = if w.name == "graph500" { &[("scale", "10")] } else { &[] };
        let rs = drain(w.name, &[&[("accesses", "20000"), ("code", "4K")], small].concat());
        for r in &rs {
            if let Record::Access(a) = r {
                assert!(a.dep.is_known(), "{}: {a:?}", w.name);
                if a.kind == AccessKind::Fetch {
                    assert_eq!(a.dep, Dep::NONE, "{}: fetches are independent", w.name);
                }
            }
        }
        let dependent = with_producers(&rs).iter().filter(|(_, p)| p.is_some()).count();
        let expect_some = matches!(w.name, "pchase" | "graph" | "graph500" | "kv" | "xsbench" | "ycsb");
        assert_eq!(dependent > 0, expect_some, "{}: {dependent} dependent accesses", w.name);
    }
}

#[test]
fn pointer_chase_reads_depend_on_the_previous_read() {
    let rs = drain("pchase", &[("footprint", "1M"), ("accesses", "5000")]);
    let acc = with_producers(&rs);
    assert_eq!(acc[0].0.dep, Dep::NONE);
    for w in acc.windows(2) {
        assert_eq!(w[1].0.dep, Dep::on_load(1));
        assert_eq!(w[1].1, Some(w[0].0));
    }
}

#[test]
fn graph_kv_xsbench_and_ycsb_dependences_follow_their_data_structures() {
    // BFS (sizes tell the arrays apart: offsets pairs are 16 B, the rest 4 B): a
    // vertex's offsets depend on its queue slot, each edge entry on the offsets, a
    // neighbour's distance (read and write) on its edge entry.
    let rs = drain("graph", &[("vertices", "5000"), ("accesses", "50000")]);
    let acc = with_producers(&rs);
    let mut edges = 0;
    for (i, &(a, p)) in acc.iter().enumerate() {
        match (a.size, p) {
            (16, p) => assert_eq!(p.map(|p| p.size), Some(4), "offsets after a queue slot"),
            (4, Some(p)) if p.size == 16 => {
                edges += 1;
                // The next access reads dist[v] through this entry.
                if let Some(&(next, np)) = acc.get(i + 1) {
                    assert_eq!((next.kind, np), (AccessKind::Read, Some(a)));
                    if let Some(&(w, wp)) = acc.get(i + 2).filter(|(w, _)| w.kind == AccessKind::Write && w.vaddr == next.vaddr) {
                        assert_eq!(wp, Some(a), "{w:?}: the distance write");
                    }
                }
            }
            _ => {}
        }
    }
    assert!(edges > 5000, "{edges} edge reads found through their offsets");

    // Key-value: bucket (8 B, independent), chain nodes (32 B) each through the
    // pointer before, the value (256 B) through its node.
    let rs = drain("kv", &[("keys", "20000"), ("accesses", "20000"), ("write_ratio", "0.3")]);
    for (a, p) in with_producers(&rs) {
        match a.size {
            8 => assert_eq!(a.dep, Dep::NONE),
            32 => assert!(matches!(p.map(|p| p.size), Some(8 | 32)), "{a:?} {p:?}"),
            256 => assert_eq!(p.map(|p| p.size), Some(32), "{a:?}"),
            s => panic!("unexpected size {s}"),
        }
    }

    // XSBench: probes (8 B) chain from an independent first one; per nuclide the id
    // (4 B) and concentration (8 B) are independent, the index entry (4 B) follows the
    // id, the two grid points (96 B) the entry.
    let rs = drain("xsbench", &[("size", "small"), ("gridpoints", "200"), ("accesses", "20000")]);
    let acc = with_producers(&rs);
    for &(a, p) in &acc {
        match (a.size, p) {
            (8, p) => assert!(p.is_none_or(|p| p.size == 8), "{a:?} {p:?}"),
            (4, Some(p)) => assert_eq!((p.size, a.dep), (4, Dep::on_load(2))),
            (4, None) => {}
            (96, p) => assert_eq!(p.map(|p| (p.size, p.dep)), Some((4, Dep::on_load(2)))),
            (s, _) => panic!("unexpected size {s}"),
        }
    }
    let first_probes = acc.iter().filter(|(a, _)| a.size == 8 && a.dep == Dep::NONE).count();
    let grid_reads = acc.iter().filter(|(a, _)| a.size == 96).count();
    let index_entries = acc.iter().filter(|(a, _)| a.size == 4 && a.dep == Dep::on_load(2)).count();
    // Concentrations are the other independent 8 B reads: one per nuclide.
    assert!(first_probes > grid_reads && grid_reads > 100 && index_entries.abs_diff(grid_reads) <= 1, "{first_probes} {grid_reads} {index_entries}");

    // YCSB: each request starts at the index object (independent); everything after
    // it follows a pointer loaded within the request.
    let rs = drain("ycsb", &[("rows", "20000"), ("accesses", "20000")]);
    let acc = with_producers(&rs);
    let starts = acc.iter().filter(|(a, _)| a.dep == Dep::NONE).count();
    assert!(acc.iter().all(|(a, p)| a.dep == Dep::NONE || p.is_some()));
    // 20000 accesses of requests of 40-odd accesses each (a 5-level tree of order 16).
    assert!((300..700).contains(&starts), "{starts} requests");
}

#[test]
fn info_counts_accesses_by_dependence() {
    let p = |kv: &[(&str, &str)]| kv.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<Vec<_>>();
    let mut src = synth::open("pchase", &p(&[("footprint", "1M"), ("accesses", "1000"), ("code", "4K")])).unwrap();
    let info = vmlab::trace::info::summarize(src.as_mut()).unwrap();
    let c = &info.counts;
    // 999 reads depend on the one before; the first read and the 1000 fetches do not.
    assert_eq!((c.dependent, c.independent, c.unknown_deps), (999, 1001, 0));
    assert!(info.to_text().contains("dependences   999 on an earlier load, 1001 independent, 0 unknown"));
    let recs = vec![Record::read(0x1000, 8, 1), Record::read(0x2000, 8, 1).with_dep(Dep::on_load(1))];
    let info = vmlab::trace::info::summarize(&mut vmlab::trace::VecSource::new("t", recs)).unwrap();
    assert_eq!((info.counts.dependent, info.counts.independent, info.counts.unknown_deps), (1, 0, 1));
}

/// `instrs_per_access` non-memory instructions go before every access: before a data
/// access, before the fetch that starts it when code is simulated, and before each fetch
/// of a workload whose own references are fetches (stab, the extreme ITLB benchmark).
#[test]
fn every_access_gets_its_non_memory_instructions() {
    let ticks = |rs: &[Record]| rs.iter().map(|r| if let Record::Tick(n) = r { *n } else { 0 }).sum::<u64>();
    let accesses = |rs: &[Record], kind: AccessKind| rs.iter().filter(|r| matches!(r, Record::Access(a) if a.kind == kind)).count() as u64;
    let stab = drain("strawman", &[("fetch", "1"), ("accesses", "1000")]);
    assert_eq!((accesses(&stab, AccessKind::Fetch), ticks(&stab)), (1000, 4000));
    let itlb = drain("shared", &[("side", "instr"), ("accesses", "1000"), ("instrs_per_access", "3")]);
    assert_eq!(ticks(&itlb), 3 * accesses(&itlb, AccessKind::Fetch));
    let data = drain("gups", &[("accesses", "1000")]);
    assert_eq!((accesses(&data, AccessKind::Fetch), ticks(&data)), (0, 4000));
    let first = data.iter().position(|r| matches!(r, Record::Tick(_))).unwrap();
    for (i, r) in data[first..].iter().enumerate() {
        let want_tick = i % 2 == 0;
        assert_eq!(matches!(r, Record::Tick(4)), want_tick, "record {} of gups: {r:?}", first + i);
        assert_eq!(matches!(r, Record::Access(a) if a.kind != AccessKind::Fetch), !want_tick, "record {} of gups: {r:?}", first + i);
    }
    let code = drain("gups", &[("accesses", "1000"), ("code", "64K")]);
    assert_eq!((accesses(&code, AccessKind::Fetch), ticks(&code)), (1000, 4000), "one tick per instruction, before its fetch");
}
