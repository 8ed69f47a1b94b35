#!/usr/bin/env python3
"""Validate vmlab's time model (time.model = "ooo") against ChampSim; print the tables of
docs/validation.md.

usage: validate_champsim.py CHAMPSIM_BINARY [--vmlab CMD] [--workdir DIR] [--only NAME,...]
           [--jobs N] [--reuse] [--config JSON] [--markdown OUT.md] [--json OUT.json]
           [--variant pretouch|nostores] [--vmlab-set KEY=VALUE ...] [--tag T] [--vmlab-tag T]

ChampSim is a peer for comparison, built from its public repository outside vmlab
(docs/validation.md says how); this script neither builds it nor contains any of its
code. It needs only the standard library, the ChampSim binary and the vmlab binary.

The workloads, vmlab's overrides and the ChampSim machine the binary must be built from
are in validate_champsim.json beside this script (--config for another). For each
workload the script:

1. writes the trace in ChampSim's format (64-byte `input_instr` records):
   - source "vmlab": `vmlab generate W k=v ... -o W.vmt`, then
     `vmlab convert --to champsim W.vmt W.champsim` (a tick of n instructions becomes n
     plain instructions, each access one load or store; dependences become registers);
   - source "native": the register-dataflow traces of the ChampSim notes' make_traces.py
     (stream, gups, pchase; same algorithm and seed, so the same bytes), written here;
2. writes the same instructions for vmlab: W.nf.vmt, the ChampSim file without
   instruction fetches (this script's converter: the accesses and register-dataflow
   dependences of vmlab's importer, the instructions as ticks); also
   `vmlab convert --from champsim` (a fetch per instruction, W.rt.vmt) and, for
   source "vmlab", the generator's own trace (W.vmt, the same instructions):
   both only for the side table (docs/validation.md, "vmlab bugs found");
3. runs ChampSim: `CHAMPSIM -w WARMUP -i INSTRUCTIONS --hide-heartbeat --json W.cs.json
   W.champsim` (the trace is longer than WARMUP + INSTRUCTIONS, so it never wraps);
4. runs `vmlab run -c skylake --set ... -t W.nf.vmt` with sim.warmup_accesses and
   sim.max_accesses set to the accesses of the first WARMUP and WARMUP + INSTRUCTIONS
   instructions, and, where both simulators walk, once more with every vmlab walk made
   longer by the difference of the mean walk latencies (pwc.latency), so that the walk
   cost is an input;
5. prints the tables (IPC and error, supporting counters, wall-clock speed) and the
   mean absolute errors.

Explanation runs (docs/validation.md): --variant pretouch prefixes every trace with one
load per page it touches (inside the warm-up; run with an STLB that holds them all on
both sides: a ChampSim binary built with champsim_variants.champsim_bigstlb and
--vmlab-set tlb.stlb.entries=524288 --vmlab-set tlb.stlb.ways=16), so no walk is
measured; --variant nostores removes every store. --tag names the ChampSim binary's
outputs, --vmlab-tag further vmlab runs with other --vmlab-set overrides.

Large files go to --workdir (default: $TMPDIR/vmlab-validate-champsim). With --reuse, a
step whose output exists is skipped (delete the file to redo it).
"""
import argparse
import json
import os
import shlex
import struct
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
REC = struct.Struct("<QBB2B4B2Q4Q")  # ChampSim's input_instr: 64 bytes, little-endian
assert REC.size == 64
SLACK = 2000  # instructions written beyond warmup + instructions (ChampSim never wraps)
LOG_LOCK = threading.Lock()


def log(msg):
    with LOG_LOCK:
        print(msg, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------
# Native (register-dataflow) traces: the algorithms of make_traces.py (ChampSim notes).

REG_IP, REG_FLAGS = 26, 25
NATIVE_BASE = 0x1000_0000_0000
NATIVE_CODE = 0x40_0000


def _rec(ip, dst=(), src=(), dmem=(), smem=(), branch=False, taken=False):
    d = list(dst) + [0] * (2 - len(dst))
    s = list(src) + [0] * (4 - len(src))
    dm = list(dmem) + [0] * (2 - len(dmem))
    sm = list(smem) + [0] * (4 - len(smem))
    return REC.pack(ip, int(branch), int(taken), *d, *s, *dm, *sm)


def _native_pchase(n, footprint, rng):
    # One instruction per hop, r1 <- [r1]: each load's address depends on the previous.
    lines = footprint // 64
    for _ in range(n):
        yield _rec(NATIVE_CODE, dst=(1,), src=(1,), smem=(NATIVE_BASE + rng.randrange(lines) * 64,))


def _native_gups(n, footprint, rng):
    # Six instructions per update: RNG, address, load, combine, store, loop branch.
    words = footprint // 8
    i = 0
    while i < n:
        a = NATIVE_BASE + rng.randrange(words) * 8
        body = (
            _rec(NATIVE_CODE + 0, dst=(3,), src=(3,)),
            _rec(NATIVE_CODE + 4, dst=(4,), src=(3,)),
            _rec(NATIVE_CODE + 8, dst=(5,), src=(4,), smem=(a,)),
            _rec(NATIVE_CODE + 12, dst=(5,), src=(5, 3)),
            _rec(NATIVE_CODE + 16, src=(5, 4), dmem=(a,)),
            _rec(NATIVE_CODE + 20, dst=(REG_IP,), src=(REG_IP, REG_FLAGS), branch=True, taken=True),
        )
        yield from body
        i += len(body)


def _native_stream(n, footprint, rng):
    # Four instructions per 8-byte element: load, accumulate, advance, loop branch.
    elems = footprint // 8
    i = k = 0
    while i < n:
        a = NATIVE_BASE + (k % elems) * 8
        k += 1
        body = (
            _rec(NATIVE_CODE + 0, dst=(5,), src=(4,), smem=(a,)),
            _rec(NATIVE_CODE + 4, dst=(6,), src=(6, 5)),
            _rec(NATIVE_CODE + 8, dst=(4,), src=(4,)),
            _rec(NATIVE_CODE + 12, dst=(REG_IP,), src=(REG_IP, REG_FLAGS), branch=True, taken=True),
        )
        yield from body
        i += len(body)


NATIVE = {"pchase": _native_pchase, "gups": _native_gups, "stream": _native_stream}


def parse_size(s):
    s = str(s).strip().upper().rstrip("B").rstrip("I")
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    if s and s[-1] in mult:
        return int(float(s[:-1]) * mult[s[-1]])
    return int(s)


def write_native(kind, out, n, footprint, seed):
    import random

    rng = random.Random(seed)
    tmp = out + ".tmp"
    with open(tmp, "wb") as f:
        buf = []
        for r in NATIVE[kind](n, parse_size(footprint), rng):
            buf.append(r)
            if len(buf) >= 65536:
                f.write(b"".join(buf))
                buf.clear()
        f.write(b"".join(buf))
    os.replace(tmp, out)


def count_accesses(path, marks):
    """For each m in `marks`, the memory operands (loads and stores) of the first m
    instructions of a ChampSim trace: (without fetches, with a fetch per instruction as
    vmlab's importer adds)."""
    marks = sorted(marks)
    out, mem, i, k = {}, 0, 0, 0
    with open(path, "rb") as f:
        while k < len(marks):
            b = f.read(64 * 65536)
            if not b:
                break
            for r in REC.iter_unpack(b):
                if i == marks[k]:
                    out[marks[k]] = (mem, mem + i)
                    k += 1
                    if k == len(marks):
                        break
                mem += sum(1 for a in r[9:15] if a)
                i += 1
    while k < len(marks) and i == marks[k]:
        out[marks[k]] = (mem, mem + i)
        k += 1
    if k < len(marks):
        raise SystemExit(f"{path}: only {i} instructions, {marks[k]} needed")
    return out


# ---------------------------------------------------------------------------------------
# A ChampSim trace as a .vmt without instruction fetches (docs/trace-format.md).
#
# vmlab's own importer (`vmlab convert --from champsim`) gives every instruction a fetch
# record; the time model then dispatches at most one fetched instruction per cycle
# (docs/validation.md, "vmlab bugs found"). Until that is fixed the comparison feeds
# vmlab this equivalent trace: the importer's accesses and register-dataflow
# dependences (docs/importers.md), with the instructions as ticks instead of fetches.
# The .vmt blocks are zstd frames; the standard library has no zstd, so they are
# written as frames of raw (stored) zstd blocks, which every zstd decoder reads.

REG_SP = 6
VMT_BLOCK_RECORDS = 65536


def _varint(n, out):
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return


def _zstd_raw_frame(payload):
    """One zstd frame (RFC 8878) holding `payload` in raw blocks of at most 128 KiB."""
    out = bytearray(struct.pack("<I", 0xFD2FB528))
    out.append(0xA0)  # frame header: 4-byte content size, single segment, no checksum
    out += struct.pack("<I", len(payload))
    step = 128 * 1024
    chunks = [payload[i : i + step] for i in range(0, len(payload), step)] or [b""]
    for j, c in enumerate(chunks):
        last = 1 if j == len(chunks) - 1 else 0
        out += (last | (0 << 1) | (len(c) << 3)).to_bytes(3, "little")
        out += c
    return bytes(out)


class VmtWriter:
    def __init__(self, path, meta):
        import zlib

        self.crc32 = zlib.crc32
        self.f = open(path + ".tmp", "wb")
        self.path = path
        m = json.dumps(meta, separators=(",", ":")).encode()
        head = b"VMLABTRC" + struct.pack("<HHI", 2, 0, len(m)) + m
        self.f.write(head + struct.pack("<I", self.crc32(head)))
        self.total = self.blocks = 0
        self._reset()

    def _reset(self):
        self.buf = bytearray()
        self.records = 0
        self.prev = self.prev_delta = 0
        self.pid_set = False

    def _flush(self):
        if not self.records:
            return
        comp = _zstd_raw_frame(bytes(self.buf))
        self.f.write(b"B" + struct.pack("<IIII", self.records, len(self.buf), len(comp), self.crc32(comp)) + comp)
        self.total += self.records
        self.blocks += 1
        self._reset()

    def _record(self):
        self.records += 1
        if self.records == VMT_BLOCK_RECORDS:
            self._flush()

    def tick(self, n):
        self.buf.append(3)  # event code 0: Tick
        _varint(n, self.buf)
        self._record()

    def access(self, write, addr, dep, pid=1):
        delta = (addr - self.prev) & 0xFFFFFFFFFFFFFFFF
        tag = (1 if write else 0) | (3 << 2) | 0x80  # 8 bytes, a dependence follows
        if not self.pid_set:
            tag |= 0x20
        same = delta == self.prev_delta
        if same:
            tag |= 0x40
        self.buf.append(tag)
        if not self.pid_set:
            _varint(pid, self.buf)
            self.pid_set = True
        if not same:
            signed = delta - (1 << 64) if delta >> 63 else delta
            _varint(((signed << 1) ^ (signed >> 63)) & 0xFFFFFFFFFFFFFFFF, self.buf)
        _varint(dep, self.buf)
        self.prev, self.prev_delta = addr, delta
        self._record()

    def close(self):
        self._flush()
        end = b"E" + struct.pack("<QQ", self.total, self.blocks)
        self.f.write(end + struct.pack("<I", self.crc32(end)))
        self.f.close()
        os.replace(self.path + ".tmp", self.path)


def champsim_to_vmt_nofetch(src, dst, limit):
    """The first `limit` instructions of ChampSim trace `src` as a fetch-free .vmt: each
    memory instruction is a Tick of the plain instructions before it plus itself, then
    its reads and writes; dependences from register dataflow as vmlab's importer derives
    them (a load defines its destination registers; other instructions pass their
    sources' producer on; the stack and instruction pointers carry none)."""
    w = VmtWriter(dst, {"source": "champsim", "command": [], "source_page_size": None,
                        "extra": {"converted_by": "scripts/validate_champsim.py (no fetches)"}})
    producer = [0] * 256
    loads = plain = i = 0
    with open(src, "rb") as f:
        while i < limit:
            b = f.read(64 * min(65536, limit - i))
            if not b:
                break
            for r in REC.iter_unpack(b):
                dsts, srcs, dmem, smem = r[3:5], r[5:9], r[9:11], r[11:15]
                p = max(producer[x] for x in srcs)
                reads = [a for a in smem if a]
                writes = [a for a in dmem if a]
                if reads or writes:
                    w.tick(plain + 1)
                    plain = 0
                    for a in reads:
                        k = loads - p + 1 if p else 0
                        w.access(False, a, k if k <= 254 else 0)
                        loads += 1
                    for a in writes:
                        k = loads - p + 1 if p else 0
                        w.access(True, a, k if k <= 254 else 0)
                    v = loads if reads else p
                else:
                    plain += 1
                    v = p
                for x in dsts:
                    if x and x != REG_SP and x != REG_IP:
                        producer[x] = v
                i += 1
    if plain:
        w.tick(plain)
    w.close()


# ---------------------------------------------------------------------------------------
# Running.


def run(cmd, stdout=None, cwd=None):
    """Run `cmd`; returns its wall-clock seconds. Fails loudly."""
    t0 = time.monotonic()
    with open(stdout, "w") if stdout else open(os.devnull, "w") as out:
        p = subprocess.run(cmd, stdout=out, stderr=subprocess.PIPE, text=True, cwd=cwd)
    dt = time.monotonic() - t0
    if p.returncode != 0:
        raise SystemExit(f"failed ({p.returncode}): {shlex.join(cmd)}\n{p.stderr[-3000:]}")
    return dt


def transform(src, dst, variant, limit):
    """A variant of the first `limit` instructions of ChampSim trace `src`, for the
    explanation runs of docs/validation.md. Returns the instructions it added in front.
    - "pretouch": first one load (no registers) of every page the instructions touch,
      in first-touch order, so that a warm-up covering them leaves every translation in
      a TLB large enough to hold them (run with an STLB of that size on both sides);
    - "nostores": every store operand removed (the instruction stays, as a plain one)."""
    with open(src, "rb") as f:
        data = f.read(64 * limit)
    prefix = 0
    with open(dst + ".tmp", "wb") as out:
        if variant == "pretouch":
            seen = {}
            for r in REC.iter_unpack(data):
                for a in r[9:15]:
                    if a:
                        seen.setdefault(a >> 12, None)
            buf = [_rec(NATIVE_CODE, smem=(p << 12,)) for p in seen]
            prefix = len(buf)
            out.write(b"".join(buf))
            out.write(data)
        elif variant == "nostores":
            recs = []
            for r in REC.iter_unpack(data):
                r = list(r)
                r[9] = r[10] = 0
                recs.append(REC.pack(*r))
            out.write(b"".join(recs))
        else:
            raise SystemExit(f"unknown variant {variant}")
        # Slack: ChampSim must not reach the end of the trace.
        out.write(b"".join(_rec(NATIVE_CODE) for _ in range(SLACK)))
    os.replace(dst + ".tmp", dst)
    return prefix


def prepare(w, vmlab, wd, reuse, variant=None):
    """Write the ChampSim trace and vmlab's views of it. Returns the ChampSim trace, its
    warm-up, and {kind: (trace, warm-up accesses, total accesses)} for vmlab."""
    name = w["name"]
    total = w["warmup"] + w["instructions"]
    cs = os.path.join(wd, name + ".champsim")
    runs = {}
    if w["source"] == "vmlab":
        ipa = int(w["params"].get("instrs_per_access", 4))
        accesses = total // ipa + SLACK
        params = [f"{k}={v}" for k, v in w["params"].items() if k != "instrs_per_access"]
        params += [f"seed={w.get('seed', 1)}", f"accesses={accesses}"]
        vmt = os.path.join(wd, name + ".vmt")
        if not (reuse and os.path.exists(vmt)):
            run(vmlab + ["generate", "-o", vmt, w["workload"]] + params + [f"instrs_per_access={ipa}"])
        if not (reuse and os.path.exists(cs)):
            run(vmlab + ["convert", "--to", "champsim", vmt, cs])
        if not variant:
            # The generator's own trace: the converter gives each access the last of
            # the tick's ipa instructions, as vmlab counts it.
            runs["direct"] = (vmt, w["warmup"] // ipa, total // ipa)
    else:
        if not (reuse and os.path.exists(cs)):
            log(f"[{name}] writing native trace")
            write_native(w["workload"], cs, total + SLACK, w["params"].get("footprint", "1G"), w.get("seed", 1))
    warmup = w["warmup"]
    stem = name
    if variant:
        stem = f"{name}.{variant}"
        vcs = os.path.join(wd, stem + ".champsim")
        pfile = vcs + ".prefix"
        if not (reuse and os.path.exists(vcs) and os.path.exists(pfile)):
            log(f"[{name}] writing the {variant} variant")
            with open(pfile, "w") as f:
                f.write(f"{transform(cs, vcs, variant, total)}\n")
        with open(pfile) as f:
            warmup += int(f.read())
        cs = vcs
    total = warmup + w["instructions"]
    counts = count_accesses(cs, [warmup, total])
    # The primary input: the ChampSim trace without fetches (this script's converter).
    nf = os.path.join(wd, stem + ".nf.vmt")
    if not (reuse and os.path.exists(nf)):
        champsim_to_vmt_nofetch(cs, nf, total)
    runs["vm"] = (nf, counts[warmup][0], counts[total][0])
    # vmlab's own importer: a fetch record per instruction.
    if not variant:
        rt = os.path.join(wd, stem + ".rt.vmt")
        if not (reuse and os.path.exists(rt)):
            run(vmlab + ["convert", "--from", "champsim", cs, rt])
        runs["rt"] = (rt, counts[warmup][1], counts[total][1])
    return {"champsim_trace": cs, "stem": stem, "warmup": warmup, "runs": runs}


def run_champsim(w, p, binary, wd, reuse, tag):
    stem = os.path.join(wd, f"{p['stem']}.cs{tag}")
    js, txt, tfile = stem + ".json", stem + ".txt", stem + ".seconds"
    if not (reuse and os.path.exists(js) and os.path.exists(tfile)):
        log(f"[{p['stem']}] ChampSim -w {p['warmup']} -i {w['instructions']} ...")
        cmd = [binary, "-w", str(p["warmup"]), "-i", str(w["instructions"]), "--hide-heartbeat", "--json", js, p["champsim_trace"]]
        dt = run(cmd, stdout=txt)
        with open(tfile, "w") as f:
            f.write(f"{dt:.2f}\n")
        log(f"[{p['stem']}] ChampSim done in {dt:.0f} s")
    with open(tfile) as f:
        seconds = float(f.read())
    return parse_champsim(js, seconds)


def run_vmlab(p, kind, vmlab, cfg, extra, wd, reuse, tag):
    trace, warm, total = p["runs"][kind]
    stem = os.path.join(wd, f"{p['stem']}.{kind}{tag}")
    out, tfile = stem + ".json", stem + ".seconds"
    if not (reuse and os.path.exists(out) and os.path.exists(tfile)):
        sets = cfg["vmlab_set"] + list(extra) + [f"sim.warmup_accesses={warm}", f"sim.max_accesses={total}"]
        cmd = vmlab + ["run", "-c", cfg["vmlab_config"], "--no-progress"]
        for s in sets:
            cmd += ["--set", s]
        cmd += ["-t", trace, "-o", out]
        dt = run(cmd)
        with open(tfile, "w") as f:
            f.write(f"{dt:.3f}\n")
    with open(tfile) as f:
        seconds = float(f.read())
    return parse_vmlab(out, seconds, total)


# ---------------------------------------------------------------------------------------
# Parsing.


def _new_misses(c, types):
    """ChampSim counts an access that merges into an MSHR in flight as a miss; the lines
    fetched from below are MISS - MSHR_MERGE."""
    return sum(sum(c[t]["miss"]) - sum(c[t]["mshr_merge"]) for t in types)


def parse_champsim(path, seconds):
    with open(path) as f:
        roi = json.load(f)[0]["roi"]
    core = roi["cores"][0]
    instr, cycles = core["instructions"], core["cycles"]
    demand = ("LOAD", "RFO", "WRITE", "TRANSLATION")
    l1d = roi["cpu0_L1D"]
    l1d_new = _new_misses(l1d, demand)
    dram = roi["DRAM"][0]
    reads = dram["RQ ROW_BUFFER_HIT"] + dram["RQ ROW_BUFFER_MISS"]
    walk_refs = sum(l1d["TRANSLATION"]["hit"]) + sum(l1d["TRANSLATION"]["miss"])
    stlb_new = _new_misses(roi["cpu0_STLB"], ("LOAD", "RFO", "WRITE", "TRANSLATION"))
    llc = roi["LLC"]
    pt_dram = sum(llc["TRANSLATION"]["miss"]) - sum(llc["TRANSLATION"]["mshr_merge"])
    return {
        "instructions": instr,
        "cycles": cycles,
        "ipc": instr / cycles,
        "pt_dram": pt_dram / stlb_new if stlb_new else None,
        "dram_writes": dram["WQ ROW_BUFFER_HIT"] + dram["WQ ROW_BUFFER_MISS"],
        "l1d_misses": l1d_new,
        "llc_misses": _new_misses(roi["LLC"], ("LOAD", "RFO", "TRANSLATION")),
        "dtlb_misses": _new_misses(roi["cpu0_DTLB"], ("LOAD", "RFO", "WRITE", "TRANSLATION")),
        "stlb_misses": stlb_new,
        "walk_latency": roi["cpu0_STLB"]["miss latency"] if stlb_new else None,
        "walk_refs": walk_refs / stlb_new if stlb_new else None,
        # Little's law over the L1D's MSHRs: fills x mean fill latency / cycles.
        "l1d_in_flight": (l1d["miss latency"] or 0) * l1d_new / cycles if l1d_new else 0.0,
        "l1d_miss_latency": l1d["miss latency"] if l1d_new else None,
        "dram_reads": reads,
        "row_hit_rate": dram["RQ ROW_BUFFER_HIT"] / reads if reads else None,
        "seconds": seconds,
    }


def parse_vmlab(path, seconds, accesses):
    with open(path) as f:
        d = json.load(f)
    t = d["time"]
    walks = t["walks"]["count"]
    l1d = d["caches"]["l1d"]
    data_tlb = d["tlb_levels_by_side"]["data"]
    dr = t["dram"]
    rows = dr["row_hits"] + dr["row_misses"] + dr["row_conflicts"]
    l1d_timed = t["caches"]["l1d"]
    return {
        "instructions": t["instructions"],
        "cycles": t["cycles"],
        "ipc": t["ipc"],
        "pt_dram": d["caches"]["llc"]["walk_misses"] / walks if walks else None,
        "dram_writes": dr["writes"],
        "pwc_latency": d["config"].get("pwc", {}).get("latency", 0),
        "l1d_misses": l1d["misses"],
        "llc_misses": d["caches"]["llc"]["misses"],
        "dtlb_misses": data_tlb[0]["misses"],
        "stlb_misses": data_tlb[1]["misses"] if len(data_tlb) > 1 else 0,
        "walk_latency": t["walks"]["mean_latency"] if walks else None,
        "walk_refs": d["walks"]["refs_per_walk"] if walks else None,
        "l1d_in_flight": l1d_timed["mean_outstanding"],
        "l1d_miss_latency": l1d_timed["mean_outstanding"] * t["cycles"] / l1d_timed["misses"] if l1d_timed["misses"] else None,
        "mlp": t["mlp"],
        "dram_reads": dr["reads"],
        "row_hit_rate": dr["row_hit_rate"] if rows else None,
        "cpi_stack": t["cpi_stack"],
        "seconds": seconds,
        "accesses": accesses,
    }


# ---------------------------------------------------------------------------------------
# Tables.


def fmt(x, nd=1):
    if x is None:
        return "–"
    if isinstance(x, int):
        return f"{x:,}"
    return f"{x:.{nd}f}"


def pki(n, instr):
    return 1000.0 * n / instr if instr else 0.0


def tables(results):
    lines = []
    head = ("| workload | trace | instructions (warm-up + measured) | ChampSim IPC | vmlab IPC | error "
            "| vmlab IPC, walk latency set to ChampSim's | error |")
    lines += [head, "|---|---|---|---|---|---|---|---|"]
    errs, errs_w = [], []
    for w, r in results:
        c, v = r["cs"], r["vm"]
        e = v["ipc"] / c["ipc"] - 1
        errs.append(e)
        trace = w["workload"] + " " + " ".join(f"{k}={x}" for k, x in w["params"].items())
        trace = ("vmlab generate " if w["source"] == "vmlab" else "native ") + trace
        if "walkmatch" in r:
            vw = r["walkmatch"]
            ew = vw["ipc"] / c["ipc"] - 1
            wm = f"{vw['ipc']:.4f} (+{r['walk_delta']} cycles/walk) | {ew:+.1%}"
        else:
            ew = e
            wm = "no walks to match | "
        errs_w.append(ew)
        lines.append(f"| {w['name']} | `{trace}` | {r['warmup']:,} + {w['instructions']:,} | {c['ipc']:.4f} | {v['ipc']:.4f} | {e:+.1%} | {wm} |")
    n = len(errs)
    mae = sum(abs(e) for e in errs) / n if n else 0.0
    mae_w = sum(abs(e) for e in errs_w) / n if n else 0.0
    lines.append("")
    lines.append(f"Mean absolute error over {n} workloads: **{mae:.1%}** (signed mean {sum(errs) / max(n, 1):+.1%}); "
                 f"with the walk latency set to ChampSim's: **{mae_w:.1%}** (signed mean {sum(errs_w) / max(n, 1):+.1%}).")
    lines.append("")
    lines.append("Supporting numbers, ChampSim / vmlab. PKI = per 1000 measured instructions; ChampSim's misses are "
                 "MISS − MSHR_MERGE (lines or translations fetched from below); walks = STLB misses; PT = page-table "
                 "references; in flight = mean L1D misses outstanding over the run (ChampSim: fills × mean fill latency / cycles).")
    lines.append("")
    lines.append("| workload | L1D MPKI | LLC MPKI | DRAM writes PKI | DTLB MPKI | walks PKI | walk latency | PT refs / walk | PT refs to DRAM / walk "
                 "| L1D misses in flight | L1D miss latency | DRAM row hits | vmlab MLP | vmlab CPI base / data / translation |")
    lines.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for w, r in results:
        c, v = r["cs"], r["vm"]
        ic, iv = c["instructions"], v["instructions"]

        def pair(key, f=lambda x, i: x, nd=1, unit=""):
            a, b = c.get(key), v.get(key)
            a = None if a is None else f(a, ic)
            b = None if b is None else f(b, iv)
            return f"{fmt(a, nd)}{unit if a is not None else ''} / {fmt(b, nd)}{unit if b is not None else ''}"

        def pct(x, i):
            return 100.0 * x

        st = v["cpi_stack"]
        lines.append(
            f"| {w['name']} | {pair('l1d_misses', pki)} | {pair('llc_misses', pki)} | {pair('dram_writes', pki)} | {pair('dtlb_misses', pki)} | "
            f"{pair('stlb_misses', pki)} | {pair('walk_latency', nd=0)} | {pair('walk_refs', nd=2)} | {pair('pt_dram', nd=2)} | "
            f"{pair('l1d_in_flight', nd=2)} | {pair('l1d_miss_latency', nd=0)} | {pair('row_hit_rate', pct, 0, '%')} | {v['mlp']:.2f} | "
            f"{st['base']:.2f} / {st['data']:.2f} / {st['translation']:.2f} |"
        )
    if any("rt" in r for _, r in results):
        lines.append("")
        lines.append("vmlab on `vmlab convert --from champsim` output (a fetch record per instruction; see the bug in docs/validation.md):")
        lines.append("")
        lines.append("| workload | ChampSim IPC | vmlab IPC, fetch per instruction | error | vmlab IPC, generator's own .vmt |")
        lines.append("|---|---|---|---|---|")
        for w, r in results:
            if "rt" not in r:
                continue
            c, rt = r["cs"], r["rt"]
            dv = f"{r['direct']['ipc']:.4f}" if "direct" in r else "–"
            lines.append(f"| {w['name']} | {c['ipc']:.4f} | {rt['ipc']:.4f} | {rt['ipc'] / c['ipc'] - 1:+.1%} | {dv} |")
    lines.append("")
    lines.append("Wall-clock time on this machine (ChampSim: the whole run, warm-up included; vmlab: the run on the fetch-free trace, warm-up included):")
    lines.append("")
    lines.append("| workload | ChampSim s | ChampSim instr/s | ChampSim cycles/s | vmlab s | vmlab instr/s | vmlab accesses/s | vmlab speed-up |")
    lines.append("|---|---|---|---|---|---|---|---|")
    for w, r in results:
        c, v = r["cs"], r["vm"]
        n = r["warmup"] + w["instructions"]
        cips, vips = n / c["seconds"], n / v["seconds"]
        lines.append(
            f"| {w['name']} | {c['seconds']:.0f} | {cips:,.0f} | {c['cycles'] / c['seconds']:,.0f} | {v['seconds']:.2f} | "
            f"{vips:,.0f} | {v['accesses'] / v['seconds']:,.0f} | {vips / cips:,.0f}× |"
        )
    return "\n".join(lines), mae, mae_w


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("champsim", help="ChampSim binary built from the config's champsim_config")
    ap.add_argument("--vmlab", default="vmlab", help="vmlab command (default: vmlab)")
    ap.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "vmlab-validate-champsim"))
    ap.add_argument("--config", default=os.path.join(HERE, "validate_champsim.json"))
    ap.add_argument("--suite", default="workloads", choices=["workloads", "calibration"],
                    help="the config's list to run: the comparison (default) or the latency calibration chases")
    ap.add_argument("--only", help="comma-separated workload names")
    ap.add_argument("--jobs", type=int, default=1, help="ChampSim runs at once (default 1)")
    ap.add_argument("--reuse", action="store_true", help="skip steps whose outputs exist in --workdir")
    ap.add_argument("--variant", choices=["pretouch", "nostores"], help="run a variant of every trace (explanation runs)")
    ap.add_argument("--vmlab-set", action="append", default=[], metavar="KEY=VALUE", help="extra vmlab override (repeatable)")
    ap.add_argument("--tag", default="", help="suffix for this experiment's output files (e.g. the ChampSim variant)")
    ap.add_argument("--vmlab-tag", default="", help="a further suffix for vmlab's outputs only (e.g. for --vmlab-set runs)")
    ap.add_argument("--markdown", help="also write the tables to this file")
    ap.add_argument("--json", help="also write the parsed numbers to this file")
    a = ap.parse_args()

    with open(a.config) as f:
        cfg = json.load(f)
    vmlab = shlex.split(a.vmlab)
    tag = "." + a.tag if a.tag else ""
    vtag = tag + ("." + a.vmlab_tag if a.vmlab_tag else "")
    os.makedirs(a.workdir, exist_ok=True)
    work = cfg[a.suite]
    if a.only:
        names = a.only.split(",")
        unknown = set(names) - {w["name"] for w in work}
        if unknown:
            raise SystemExit(f"unknown workloads: {sorted(unknown)}")
        work = [w for w in work if w["name"] in names]

    prepared = {}
    for w in work:
        log(f"[{w['name']}] traces")
        prepared[w["name"]] = prepare(w, vmlab, a.workdir, a.reuse, a.variant)

    def one(w):
        return run_champsim(w, prepared[w["name"]], a.champsim, a.workdir, a.reuse, tag)

    with ThreadPoolExecutor(max_workers=max(1, a.jobs)) as ex:
        cs = list(ex.map(one, work))

    results = []
    for w, c in zip(work, cs):
        p = prepared[w["name"]]
        r = {"cs": c, "warmup": p["warmup"]}
        for kind in p["runs"]:
            r[kind] = run_vmlab(p, kind, vmlab, cfg, a.vmlab_set, a.workdir, a.reuse, vtag)
        v = r["vm"]
        if abs(v["instructions"] - c["instructions"]) > 10:
            log(f"[{w['name']}] note: ChampSim measured {c['instructions']} instructions, vmlab {v['instructions']}")
        if "direct" in r and abs(r["direct"]["ipc"] / v["ipc"] - 1) > 0.005:
            log(f"[{w['name']}] note: vmlab IPC on the generator's trace {r['direct']['ipc']:.4f} != {v['ipc']:.4f}")
        # The walk cost as an input: every vmlab walk made longer by the difference of
        # the two mean walk latencies (pwc.latency is charged once per walk).
        if c["walk_latency"] and v["walk_latency"] and c["walk_latency"] > v["walk_latency"] + 0.5:
            delta = round(c["walk_latency"] - v["walk_latency"])
            extra = a.vmlab_set + [f"pwc.latency={v['pwc_latency'] + delta}"]
            p["runs"]["walkmatch"] = p["runs"]["vm"]
            r["walkmatch"] = run_vmlab(p, "walkmatch", vmlab, cfg, extra, a.workdir, a.reuse, vtag)
            r["walk_delta"] = delta
        results.append((w, r))

    text, mae, mae_w = tables(results)
    print(text)
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(text + "\n")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"mae": mae, "mae_walk_matched": mae_w, "results": [{"workload": w, **r} for w, r in results]}, f, indent=1)


if __name__ == "__main__":
    main()
