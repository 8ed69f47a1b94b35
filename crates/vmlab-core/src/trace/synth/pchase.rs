//! Pointer chase: a random single cycle over all nodes of the footprint.

use super::gen::{mmap_rw, page_round, Generator, Permutation};
use super::params::{base_param, param, Params, WorkloadInfo};
use crate::error::Result;
use crate::trace::{Dep, Record};

pub(crate) fn info() -> WorkloadInfo {
    WorkloadInfo {
        name: "pchase",
        description: "pointer chase: 8-byte reads following a random single cycle through every node of the footprint",
        params: vec![param("footprint", "1G", "bytes of nodes"), param("node", "64", "bytes per node"), base_param()],
    }
}

struct PointerChase {
    base: u64,
    node: u64,
    nodes: u64,
    order: Permutation,
    i: u64,
    /// Loads emitted so far, 0 or not: the first has no producer.
    started: bool,
}

pub(crate) fn new(p: &mut Params) -> Result<Box<dyn Generator>> {
    let footprint = p.footprint()?;
    let node = p.bytes("node")?;
    p.require(node >= 8 && node % 8 == 0, "node", "a multiple of 8 bytes")?;
    p.require(footprint >= node, "footprint", "at least one node")?;
    let nodes = footprint / node;
    Ok(Box::new(PointerChase { base: p.base()?, node, nodes, order: Permutation::new(nodes, p.seed()?), i: 0, started: false }))
}

impl Generator for PointerChase {
    fn base(&self) -> u64 {
        self.base
    }
    fn setup(&mut self, pid: u32, out: &mut Vec<Record>) {
        out.push(mmap_rw(pid, self.base, page_round(self.nodes * self.node)));
    }
    fn emit(&mut self, n: u64, pid: u32, out: &mut Vec<Record>) {
        for _ in 0..n {
            // Node order(i) holds the pointer to node order(i+1).
            let v = self.order.get(self.i);
            self.i += 1;
            if self.i == self.nodes {
                self.i = 0;
            }
            // Its address is the pointer the previous load read.
            let dep = if self.started { Dep::on_load(1) } else { Dep::NONE };
            self.started = true;
            out.push(Record::read(self.base + v * self.node, 8, pid).with_dep(dep));
        }
    }
}
