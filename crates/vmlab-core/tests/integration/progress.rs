//! Progress watched by another thread (api::watch_progress), as the Python binding's
//! notebook bar watches it: what the watcher sees, and that it sees nothing otherwise.

use std::sync::atomic::{AtomicBool, Ordering};
use vmlab::api::{self, ProgressSnapshot, ProgressWatch, RunRequest, SourceSpec};

fn gups(accesses: &str) -> SourceSpec {
    SourceSpec::Workload { name: "gups".into(), params: vec![("accesses".into(), accesses.into()), ("footprint".into(), "16M".into())] }
}

fn records(doc: &serde_json::Value) -> u64 {
    doc["totals"]["records"].as_u64().expect("totals.records")
}

#[test]
fn a_watched_run_reports_each_position_and_its_end() {
    let watch = ProgressWatch::new();
    assert!(watch.bars().is_empty());
    let done = AtomicBool::new(false);
    let req = RunRequest { config: "tiny".into(), overrides: vec![], source: gups("300k"), progress: true };
    let (doc, seen) = std::thread::scope(|s| {
        // A watcher polling while the run goes on, keeping what changed.
        let watcher = s.spawn(|| {
            let mut seen: Vec<ProgressSnapshot> = Vec::new();
            while !done.load(Ordering::Acquire) {
                for b in watch.bars() {
                    if seen.last() != Some(&b) {
                        seen.push(b);
                    }
                }
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            seen
        });
        let doc = api::watch_progress(&watch, || api::run(&req));
        done.store(true, Ordering::Release);
        (doc.unwrap(), watcher.join().unwrap())
    });
    let [last] = &watch.bars()[..] else { panic!("one bar: {:?}", watch.bars()) };
    assert_eq!((last.bar, last.finished, last.label.as_str()), (1, true, ""));
    let len = last.len.expect("a workload's length is estimated");
    // The end is the count read, even past the estimate (gups yields one record more).
    assert_eq!(last.pos, records(&doc));
    // Positions only grow.
    assert!(seen.windows(2).all(|w| w[0].pos <= w[1].pos), "positions go back");
    assert!(seen.iter().all(|s| s.bar == 1 && s.len == Some(len) && s.pos <= last.pos));
}

#[test]
fn each_bar_of_a_call_is_numbered_labelled_and_keeps_its_end() {
    let watch = ProgressWatch::new();
    let designs = vec!["radix".to_string(), "hashed".to_string()];
    let source = gups("20k");
    let rows = api::watch_progress(&watch, || api::pt_compare("tiny", &[], &source, &designs, true)).unwrap();
    assert_eq!(rows.len(), 2);
    let bars = watch.bars();
    assert_eq!(bars.iter().map(|b| (b.bar, b.finished)).collect::<Vec<_>>(), [(1, true), (2, true)]);
    assert!(bars[0].label.contains("radix") && bars[1].label.contains("hashed"), "{bars:?}");
    let one = api::run(&RunRequest { config: "tiny".into(), overrides: vec![], source, progress: false }).unwrap();
    for b in &bars {
        assert_eq!(b.pos, records(&one), "{b:?}");
    }
}

#[test]
fn without_progress_or_outside_the_call_nothing_is_watched() {
    let watch = ProgressWatch::new();
    let req = RunRequest { config: "tiny".into(), overrides: vec![], source: gups("20k"), progress: false };
    api::watch_progress(&watch, || api::run(&req)).unwrap();
    assert!(watch.bars().is_empty());
    // The watch ends with the call: a later run on this thread is not reported to it.
    api::run(&RunRequest { progress: true, ..req }).unwrap();
    assert!(watch.bars().is_empty());
}
