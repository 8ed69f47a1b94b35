//! Importers: ChampSim binary traces (plain and xz; their dependences from register
//! dataflow) and live tracing under valgrind.

use std::io::{Cursor, Write};
use std::path::Path;
use std::process::Command;
use vmlab::addr::AccessKind;
use vmlab::trace::champsim::ChampSimReader;
use vmlab::trace::{Dep, Record};

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
    let summary = vmlab::trace::live::trace_to_vmt(&cmd, &out, &Default::default()).unwrap();
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
    let opts = vmlab::trace::live::LiveOptions { valgrind: "/nonexistent/valgrind".into(), ..Default::default() };
    let e = vmlab::trace::live::trace_command(&["true".into()], &opts, |_| Ok(())).unwrap_err().to_string();
    assert!(e.contains("not found") && e.contains("apt-get install valgrind"), "{e}");
}
