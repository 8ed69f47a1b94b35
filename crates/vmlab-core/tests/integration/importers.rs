//! Importers: ChampSim binary traces (plain and xz) and live tracing under valgrind.

use std::io::Write;
use std::path::Path;
use std::process::Command;
use vmlab::trace::champsim::ChampSimReader;
use vmlab::trace::Record;

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
    assert_eq!(
        a,
        vec![
            Record::fetch(0x400000, 4, 3),
            Record::read(0x1000, 8, 3),
            Record::fetch(0x400004, 4, 3),
            Record::write(0x2000, 8, 3),
            Record::fetch(0x400008, 4, 3),
            Record::read(0x4000, 8, 3),
            Record::read(0x4008, 8, 3),
            Record::write(0x3000, 8, 3),
            Record::write(0x3008, 8, 3),
        ]
    );
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
