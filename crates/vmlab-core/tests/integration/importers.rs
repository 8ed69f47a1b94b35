//! Importers: ChampSim binary traces (plain or compressed; their dependences from register
//! dataflow), the ChampSim writer, and live tracing under valgrind.

use std::io::{Cursor, Write};
use std::path::Path;
use std::process::Command;
use vmlab::addr::AccessKind;
use vmlab::trace::champsim::{ChampSimReader, ChampSimWriter};
use vmlab::trace::{synth, Dep, Record};

use crate::common::drain;

/// One ChampSim `input_instr`: ip, branch bytes, registers, 2 destination and 4 source
/// memory operands.
fn instr(ip: u64, dst: [u64; 2], src: [u64; 4]) -> [u8; 64] {
    let mut b = [0u8; 64];
    b[0..8].copy_from_slice(&ip.to_le_bytes());
    for (k, d) in dst.iter().enumerate() {
        b[16 + 8 * k..24 + 8 * k].copy_from_slice(&d.to_le_bytes());
    }
    for (k, s) in src.iter().enumerate() {
        b[32 + 8 * k..40 + 8 * k].copy_from_slice(&s.to_le_bytes());
    }
    b
}

fn champsim_bytes() -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&instr(0x400000, [0, 0], [0x1000, 0, 0, 0]));
    v.extend_from_slice(&instr(0x400004, [0x2000, 0], [0, 0, 0, 0]));
    v.extend_from_slice(&instr(0x400008, [0x3000, 0x3008], [0x4000, 0x4008, 0, 0]));
    v
}

#[test]
fn champsim_plain_and_xz_give_the_same_records() {
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("t.champsim");
    std::fs::write(&plain, champsim_bytes()).unwrap();
    let xz = dir.path().join("t.champsim.xz");
    let mut enc = xz2::write::XzEncoder::new(std::fs::File::create(&xz).unwrap(), 6);
    enc.write_all(&champsim_bytes()).unwrap();
    enc.finish().unwrap();
    let a = drain(&mut ChampSimReader::open(&plain, 3).unwrap()).unwrap();
    let b = drain(&mut ChampSimReader::open(&xz, 3).unwrap()).unwrap();
    assert_eq!(a, b);
    // gzip (ChampSim's own traces often are), in two members as `cat a.gz b.gz` makes.
    let gz = dir.path().join("t.champsim.gz");
    let bytes = champsim_bytes();
    let mut both = Vec::new();
    for part in [&bytes[..64], &bytes[64..]] {
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        enc.write_all(part).unwrap();
        both.extend(enc.finish().unwrap());
    }
    std::fs::write(&gz, &both).unwrap();
    assert_eq!(drain(&mut ChampSimReader::open(&gz, 3).unwrap()).unwrap(), a);
    // zstd too.
    let zst = dir.path().join("t.champsim.zst");
    std::fs::write(&zst, zstd::encode_all(&bytes[..], 3).unwrap()).unwrap();
    assert_eq!(drain(&mut ChampSimReader::open(&zst, 3).unwrap()).unwrap(), a);
    // Other compressions are named, not read as raw records.
    for (magic, name) in [(&[0x04u8, 0x22, 0x4D, 0x18][..], "lz4"), (b"BZh9", "bzip2")] {
        let f = dir.path().join(format!("t.{name}"));
        std::fs::write(&f, [magic, &[0u8; 124][..]].concat()).unwrap();
        let e = ChampSimReader::open(&f, 3).map(|_| ()).unwrap_err().to_string();
        assert!(e.contains(&format!("{name}-compressed")) && e.contains("at byte offset 0"), "{e}");
    }
    // No registers: every access independent.
    let none = |r: Record| r.with_dep(Dep::NONE);
    assert_eq!(
        a,
        vec![
            none(Record::fetch(0x400000, 4, 3)),
            none(Record::read(0x1000, 8, 3)),
            none(Record::fetch(0x400004, 4, 3)),
            none(Record::write(0x2000, 8, 3)),
            none(Record::fetch(0x400008, 4, 3)),
            none(Record::read(0x4000, 8, 3)),
            none(Record::read(0x4008, 8, 3)),
            none(Record::write(0x3000, 8, 3)),
            none(Record::write(0x3008, 8, 3)),
        ]
    );
}

/// One ChampSim instruction with registers and at most one memory operand each way.
fn op(dst_regs: [u8; 2], src_regs: [u8; 4], store: u64, load: u64) -> [u8; 64] {
    let mut b = instr(0x400000, [store, 0], [load, 0, 0, 0]);
    b[10..12].copy_from_slice(&dst_regs);
    b[12..16].copy_from_slice(&src_regs);
    b
}

/// The data accesses' dependences after importing `instrs`.
fn deps_of(instrs: &[[u8; 64]]) -> Vec<(AccessKind, Dep)> {
    let bytes: Vec<u8> = instrs.concat();
    let recs = drain(&mut ChampSimReader::from_reader(Cursor::new(bytes), Path::new("t.champsim"), 1).unwrap()).unwrap();
    recs.iter()
        .filter_map(|r| match r {
            Record::Access(a) if a.kind != AccessKind::Fetch => Some((a.kind, a.dep)),
            Record::Access(a) => {
                assert_eq!(a.dep, Dep::NONE, "fetches are independent");
                None
            }
            _ => None,
        })
        .collect()
}

const R: AccessKind = AccessKind::Read;
const W: AccessKind = AccessKind::Write;

#[test]
fn champsim_pointer_chase_through_a_register_is_a_chain() {
    // p = *p, four times: each load reads register 3 and writes it.
    let chase = op([3, 0], [3, 0, 0, 0], 0, 0x1000);
    let deps = deps_of(&[op([3, 0], [0; 4], 0, 0x1000), chase, chase, chase]);
    assert_eq!(deps, vec![(R, Dep::NONE), (R, Dep::on_load(1)), (R, Dep::on_load(1)), (R, Dep::on_load(1))]);
}

#[test]
fn champsim_independent_loads_are_independent() {
    // Loads through registers no load wrote (an induction variable, the stack pointer,
    // the flags of a compare of registers), and through none.
    let deps = deps_of(&[
        op([1, 0], [0; 4], 0, 0x1000),
        op([2, 0], [7, 0, 0, 0], 0, 0x2000),
        op([25, 0], [8, 9, 0, 0], 0, 0),
        op([4, 0], [6, 25, 0, 0], 0, 0x3000),
        op([0, 0], [7, 0, 0, 0], 0x4000, 0),
    ]);
    assert_eq!(deps, vec![(R, Dep::NONE), (R, Dep::NONE), (R, Dep::NONE), (W, Dep::NONE)]);
}

#[test]
fn champsim_alu_ops_pass_a_load_on_and_registers_are_redefined() {
    let deps = deps_of(&[
        op([1, 0], [0; 4], 0, 0x1000),       // r1 = load A
        op([2, 0], [0; 4], 0, 0x2000),       // r2 = load B
        op([3, 25], [1, 5, 0, 0], 0, 0),     // r3, flags = r1 + r5: A's value
        op([4, 0], [3, 0, 0, 0], 0, 0x3000), // load through r3: A, two loads back
        op([0, 0], [4, 2, 0, 0], 0x4000, 0), // store through r4 and r2: the later producer, r4's load
        op([5, 0], [25, 0, 0, 0], 0, 0),     // r5 = f(flags): still A
        op([1, 0], [0; 4], 0, 0),            // r1 redefined without loads
        op([0, 0], [1, 0, 0, 0], 0, 0x5000), // load through r1: independent now
        op([0, 0], [5, 0, 0, 0], 0, 0x6000), // load through r5: A, four loads back
    ]);
    assert_eq!(deps, vec![(R, Dep::NONE), (R, Dep::NONE), (R, Dep::on_load(2)), (W, Dep::on_load(1)), (R, Dep::NONE), (R, Dep::on_load(4))]);
}

#[test]
fn champsim_stack_and_instruction_pointers_carry_no_load() {
    let deps = deps_of(&[
        op([1, 6], [6, 0, 0, 0], 0, 0x7ff0),  // pop r1: loads through sp, writes r1 and sp
        op([2, 0], [6, 0, 0, 0], 0, 0x7ff8),  // a stack read: independent of the pop
        op([26, 6], [6, 0, 0, 0], 0, 0x8000), // ret: loads the return address into ip
        op([3, 0], [26, 0, 0, 0], 0, 0x9000), // a read through ip (rip-relative)
        op([4, 0], [1, 0, 0, 0], 0, 0xa000),  // through r1: the pop's load, four back
    ]);
    assert_eq!(deps, vec![(R, Dep::NONE), (R, Dep::NONE), (R, Dep::NONE), (R, Dep::NONE), (R, Dep::on_load(4))]);
}

#[test]
fn champsim_loads_of_one_instruction_count_each() {
    // One instruction loading twice through r1 (load A's): the first is 1 back, the
    // second 2 (the first is in between); its destination holds the last load.
    let mut two = op([2, 0], [1, 0, 0, 0], 0, 0x2000);
    two[40..48].copy_from_slice(&0x2008u64.to_le_bytes());
    let deps = deps_of(&[op([1, 0], [0; 4], 0, 0x1000), two, op([0, 0], [2, 0, 0, 0], 0, 0x3000)]);
    assert_eq!(deps, vec![(R, Dep::NONE), (R, Dep::on_load(1)), (R, Dep::on_load(2)), (R, Dep::on_load(1))]);
}

/// Every record of a synthetic workload.
fn synth_records(name: &str, params: &[(&str, &str)]) -> Vec<Record> {
    let p: Vec<(String, String)> = params.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    drain(&mut *synth::open(name, &p).unwrap()).unwrap()
}

/// `records` written as ChampSim instructions, then imported again.
fn through_champsim(records: &[Record]) -> (u64, Vec<Record>) {
    let mut w = ChampSimWriter::new(Vec::new(), Path::new("mem.champsim"));
    records.iter().for_each(|r| w.write(r).unwrap());
    let (n, bytes) = w.finish().unwrap();
    assert_eq!(bytes.len() as u64, n * 64);
    (n, drain(&mut ChampSimReader::from_reader(Cursor::new(bytes), Path::new("mem.champsim"), 1).unwrap()).unwrap())
}

/// The accesses of `records` as ChampSim keeps them: 8-byte data accesses, 4-byte
/// fetches, a dependence the trace did not give or the writer cannot name (more than
/// 252 loads back) is none, and (`fetches` false) no fetches.
fn as_champsim_keeps(records: &[Record], fetches: bool) -> Vec<Record> {
    records
        .iter()
        .filter_map(|r| match *r {
            Record::Access(a) if a.kind == AccessKind::Fetch && !fetches => None,
            Record::Access(a) => {
                let size = if a.kind == AccessKind::Fetch { 4 } else { 8 };
                let dep = match a.dep.distance() {
                    Some(k) if k as usize <= vmlab::trace::champsim::LOAD_REGISTERS => a.dep,
                    _ => Dep::NONE,
                };
                Some(Record::Access(vmlab::trace::Access { size, dep, ..a }))
            }
            _ => None,
        })
        .collect()
}

#[test]
fn synthetic_workloads_survive_the_champsim_round_trip_with_their_dependences() {
    for (name, params) in [
        ("pchase", &[("footprint", "4M")][..]),
        ("gups", &[("footprint", "4M")]),
        ("graph", &[("vertices", "3000")]),
        ("kv", &[("keys", "5000"), ("write_ratio", "0.2")]),
        ("xsbench", &[("size", "small"), ("gridpoints", "100")]),
        ("ycsb", &[("rows", "5000"), ("index", "hash")]),
        ("stream", &[("footprint", "4M"), ("write_ratio", "0.1")]),
    ] {
        let mut params = params.to_vec();
        params.push(("accesses", "30000"));
        let recs = synth_records(name, &params);
        assert!(recs.iter().any(|r| matches!(r, Record::Access(a) if a.dep.is_known())), "{name}: no dependences");
        let (n, back) = through_champsim(&recs);
        // No fetches: the instructions ticked, at synthetic ips, each access the
        // instruction of the tick before it (as the time model counts them).
        let ticks: u64 = recs.iter().map(|r| if let Record::Tick(t) = r { *t } else { 0 }).sum();
        assert_eq!(n, ticks, "{name}");
        assert_eq!(as_champsim_keeps(&back, false), as_champsim_keeps(&recs, false), "{name}");
    }
    // With fetches, each access's instruction is at the ip fetched before it; ticked
    // instructions are at synthetic ips, outside the workload's code.
    let recs = synth_records("kv", &[("keys", "5000"), ("accesses", "20000"), ("code", "8K")]);
    let (_, back) = through_champsim(&recs);
    let at_synthetic = |r: &Record| matches!(r, Record::Access(a) if a.kind == AccessKind::Fetch && (vmlab::trace::champsim::SYNTHETIC_IP_BASE..vmlab::trace::champsim::SYNTHETIC_IP_BASE + 4096).contains(&a.vaddr));
    let back: Vec<Record> = back.into_iter().filter(|r| !at_synthetic(r)).collect();
    assert_eq!(as_champsim_keeps(&back, true), as_champsim_keeps(&recs, true));
}

#[test]
fn champsim_writer_names_registers_for_far_dependences_and_drops_the_unnameable() {
    // 300 independent loads, then loads depending on the one 1, 252, 253 and 254 back:
    // 252 registers name the last 252 loads.
    assert_eq!(vmlab::trace::champsim::LOAD_REGISTERS, 252);
    let mut recs: Vec<Record> = (0..300u64).map(|i| Record::read(0x1000 + i * 8, 8, 1).with_dep(Dep::NONE)).collect();
    for k in [1, 252, 253, 254] {
        recs.push(Record::read(0x9000, 8, 1).with_dep(Dep::on_load(k)));
    }
    let (_, back) = through_champsim(&recs);
    let deps: Vec<Dep> = as_champsim_keeps(&back, false).iter().skip(300).map(|r| if let Record::Access(a) = r { a.dep } else { unreachable!() }).collect();
    assert_eq!(deps, vec![Dep::on_load(1), Dep::on_load(252), Dep::NONE, Dep::NONE]);
    // A dependence on a load before the trace's first is none.
    let (_, back) = through_champsim(&[Record::read(0x1000, 8, 1).with_dep(Dep::on_load(3))]);
    assert_eq!(as_champsim_keeps(&back, false), vec![Record::read(0x1000, 8, 1).with_dep(Dep::NONE)]);
}

#[test]
fn champsim_writer_lays_out_input_instr() {
    // A load, a store depending on it, a tick, a fetch with no data access.
    let recs = [
        Record::fetch(0x5000, 4, 1),
        Record::read(0x1000, 8, 1).with_dep(Dep::NONE),
        Record::write(0x2000, 8, 1).with_dep(Dep::on_load(1)),
        Record::Tick(1),
        Record::fetch(0x5008, 4, 1),
    ];
    let mut w = ChampSimWriter::new(Vec::new(), Path::new("mem.champsim"));
    recs.iter().for_each(|r| w.write(r).unwrap());
    let (n, bytes) = w.finish().unwrap();
    assert_eq!(n, 4);
    let mut want = [op([1, 0], [0; 4], 0, 0x1000), op([0; 2], [1, 0, 0, 0], 0x2000, 0), op([0; 2], [0; 4], 0, 0), op([0; 2], [0; 4], 0, 0)];
    for (w, ip) in want.iter_mut().zip([0x5000u64, 0x5000, vmlab::trace::champsim::SYNTHETIC_IP_BASE, 0x5008]) {
        w[0..8].copy_from_slice(&ip.to_le_bytes());
    }
    assert_eq!(bytes, want.concat());
}

#[test]
fn champsim_writer_counts_the_instructions_the_time_model_runs() {
    // Without fetches, a tick of n before an access is n instructions, the access's
    // own included; an access with no tick is one; ticks at the end run too.
    let recs = [Record::Tick(3), Record::read(0x1000, 8, 1), Record::read(0x2000, 8, 1), Record::Tick(1), Record::write(0x3000, 8, 1), Record::Tick(2)];
    let (n, back) = through_champsim(&recs);
    assert_eq!(n, 3 + 1 + 1 + 2);
    assert_eq!(as_champsim_keeps(&back, false), as_champsim_keeps(&recs, false));
}

#[test]
fn champsim_writer_refuses_what_champsim_cannot_hold() {
    let mut w = ChampSimWriter::new(Vec::new(), Path::new("out.champsim"));
    w.write(&Record::read(0x1000, 8, 1)).unwrap();
    let e = w.write(&Record::read(0x1000, 8, 2)).unwrap_err().to_string();
    assert!(e.contains("out.champsim: at byte offset 64") && e.contains("input record 2") && e.contains("pid 2"), "{e}");
    let mut w = ChampSimWriter::new(Vec::new(), Path::new("out.champsim"));
    let e = w.write(&Record::write(0, 8, 1)).unwrap_err().to_string();
    assert!(e.contains("address 0"), "{e}");
}

#[test]
fn convert_to_champsim_writes_through_a_temporary_file() {
    let dir = tempfile::tempdir().unwrap();
    let vmt = dir.path().join("p.vmt");
    let mut src = synth::open("pchase", &[("footprint".into(), "1M".into()), ("accesses".into(), "1000".into())]).unwrap();
    vmlab::trace::vmt::write_file(src.as_mut(), &vmt).unwrap();
    let arg = |p: &Path| p.display().to_string();
    let (plain, xz) = (dir.path().join("p.champsim"), dir.path().join("p.champsim.xz"));
    let run = |args: &[String]| vmlab::cli::main([vec!["vmlab".to_string(), "convert".into()], args.to_vec()].concat());
    assert_eq!(run(&["--to".into(), "champsim".into(), arg(&vmt), arg(&plain)]), 0);
    assert_eq!(run(&["--to".into(), "champsim".into(), arg(&vmt), "-o".into(), arg(&xz)]), 0);
    // 1000 loads, each the last of 4 ticked instructions.
    assert_eq!(std::fs::metadata(&plain).unwrap().len(), 4000 * 64);
    let a = drain(&mut ChampSimReader::open(&plain, 1).unwrap()).unwrap();
    assert_eq!(a, drain(&mut ChampSimReader::open(&xz, 1).unwrap()).unwrap());
    assert_eq!(a.iter().filter(|r| matches!(r, Record::Access(x) if x.dep == Dep::on_load(1))).count(), 999);
    // A failed conversion leaves nothing behind, not even a partial file.
    let bad = dir.path().join("bad.vmt");
    std::fs::write(&bad, b"not a trace").unwrap();
    assert_ne!(run(&["--to".into(), "champsim".into(), arg(&bad), arg(&dir.path().join("q.champsim"))]), 0);
    let multi = dir.path().join("shared.vmt");
    let mut src = synth::open("shared", &[("accesses".into(), "1000".into())]).unwrap();
    vmlab::trace::vmt::write_file(src.as_mut(), &multi).unwrap();
    let e = vmlab::trace::champsim::write_file(&mut vmlab::trace::vmt::VmtReader::open(&multi).unwrap(), &dir.path().join("q.champsim")).unwrap_err();
    assert!(e.to_string().contains("one process"), "{e}");
    assert_ne!(run(&["--to".into(), "champsim".into(), arg(&vmt), arg(&dir.path().join("q.champsim.gz"))]), 0);
    let mut names: Vec<String> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    assert_eq!(names, ["bad.vmt", "p.champsim", "p.champsim.xz", "p.vmt", "shared.vmt"]);
    // The other direction still takes its output either way.
    let back = dir.path().join("back.vmt");
    assert_eq!(run(&["--from".into(), "champsim".into(), arg(&plain), arg(&back)]), 0);
    assert_eq!(drain(&mut vmlab::trace::vmt::VmtReader::open(&back).unwrap()).unwrap(), a);
}

#[test]
fn truncated_champsim_names_the_offset() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("t.champsim");
    let mut bytes = champsim_bytes();
    bytes.truncate(64 * 2 + 10);
    std::fs::write(&p, &bytes).unwrap();
    let e = drain(&mut ChampSimReader::open(&p, 1).unwrap()).unwrap_err().to_string();
    assert!(e.contains("at byte offset 128") && e.contains("truncated"), "{e}");
}

fn have(tool: &str) -> bool {
    Command::new(tool).arg("--version").output().is_ok()
}

#[test]
fn live_tracing_follows_forked_children() {
    if !have("valgrind") || !have("cc") {
        eprintln!("note: valgrind or cc missing, live tracing not tested here");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("fk.c");
    std::fs::write(
        &src,
        "#include <unistd.h>\n#include <sys/wait.h>\n#include <stdlib.h>\n#include <string.h>\n\
         int main(){char*p=malloc(1<<20);memset(p,1,1<<20);pid_t c=fork();\
         if(c==0){char*q=malloc(1<<16);memset(q,2,1<<16);_exit(0);}waitpid(c,0,0);return p[5]-1;}\n",
    )
    .unwrap();
    let exe = dir.path().join("fk");
    assert!(Command::new("cc").arg("-O1").arg("-o").arg(&exe).arg(&src).status().unwrap().success());
    let out = dir.path().join("fk.vmt");
    let cmd = vec![exe.display().to_string()];
    let opts = vmlab::trace::live::LiveOptions { engine: vmlab::trace::live::Engine::Lackey, ..Default::default() };
    let summary = vmlab::trace::live::trace_to_vmt(&cmd, &out, &opts).unwrap();
    assert_eq!(summary.exit_code, 0);
    assert_eq!(summary.processes.len(), 2, "{summary:?}");
    let recs = drain(&mut vmlab::trace::vmt::VmtReader::open(&out).unwrap()).unwrap();
    let (parent, child) = (summary.processes[0], summary.processes[1]);
    let fork_at = recs.iter().position(|r| *r == Record::Fork { parent, child }).expect("fork record");
    let first_child = recs.iter().position(|r| matches!(r, Record::Access(a) if a.pid == child)).expect("child accesses");
    assert!(fork_at < first_child, "the child's records follow its fork");
    assert!(
        matches!(recs[first_child - 1], Record::ContextSwitch { pid } if pid == child)
            || recs[..first_child].iter().rev().find(|r| matches!(r, Record::ContextSwitch { .. })) == Some(&Record::ContextSwitch { pid: child })
    );
    assert!(recs.iter().any(|r| matches!(r, Record::Access(a) if a.kind == vmlab::addr::AccessKind::Fetch)));
    // Lackey logs say nothing of dependences.
    assert!(recs.iter().all(|r| !matches!(r, Record::Access(a) if a.dep.is_known())));
    assert!(recs.iter().any(|r| matches!(r, Record::Mmap { pid, .. } if *pid == parent)));
    assert!(recs.iter().any(|r| matches!(r, Record::Brk { pid, .. } if *pid == parent)));
    // The parent's memset writes the whole MiB (256 pages), the child's 64 KiB (16).
    let written = |who: u32| -> usize {
        recs.iter()
            .filter_map(|r| match r {
                Record::Access(a) if a.pid == who && a.kind == vmlab::addr::AccessKind::Write => Some(a.vaddr >> 12),
                _ => None,
            })
            .collect::<std::collections::HashSet<u64>>()
            .len()
    };
    assert!(written(parent) >= 256, "{} pages written by the parent", written(parent));
    assert!(written(child) >= 16, "{} pages written by the child", written(child));
    // No log is left behind.
    let leftovers = std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(&format!("vmlab-trace-{}-", std::process::id())))
        .count();
    assert_eq!(leftovers, 0);
    let _ = Path::new(&out);
}

#[test]
fn missing_valgrind_is_a_clear_error() {
    let opts = vmlab::trace::live::LiveOptions { engine: vmlab::trace::live::Engine::Lackey, valgrind: "/nonexistent/valgrind".into(), ..Default::default() };
    let e = vmlab::trace::live::trace_command(&["true".into()], &opts, |_| Ok(())).unwrap_err().to_string();
    assert!(e.contains("not found") && e.contains("apt-get install valgrind"), "{e}");
}
