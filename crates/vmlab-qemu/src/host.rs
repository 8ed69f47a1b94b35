//! Everything unsafe in the plugin: QEMU's plugin API (a C ABI, declared here from its
//! documented signatures, API version 1 as QEMU 7.2 to 10 provide it), the per-thread
//! buffers QEMU's callbacks reach by vCPU index, and the system calls the plugin makes.
//! Each block carries a SAFETY note; the workspace lint `undocumented_unsafe_blocks`
//! enforces them.

use crate::Vcpu;
use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::ptr::null_mut;
use std::sync::atomic::{AtomicPtr, Ordering};

pub(crate) type PluginId = u64;
pub(crate) type MemInfo = u32;

#[repr(C)]
pub(crate) struct Tb {
    _opaque: [u8; 0],
}
#[repr(C)]
pub(crate) struct Insn {
    _opaque: [u8; 0],
}

/// `qemu_info_t`: what QEMU tells the plugin about the guest.
#[repr(C)]
pub(crate) struct Info {
    pub(crate) target_name: *const c_char,
    pub(crate) version_min: c_int,
    pub(crate) version_cur: c_int,
    pub(crate) system_emulation: bool,
}

/// `QEMU_PLUGIN_CB_NO_REGS`: the callbacks read no guest register.
const CB_NO_REGS: c_int = 0;
/// `QEMU_PLUGIN_MEM_RW`: loads and stores.
const MEM_RW: c_int = 3;

type InsnCb = extern "C" fn(vcpu: c_uint, udata: *mut c_void);
type MemCb = extern "C" fn(vcpu: c_uint, info: MemInfo, vaddr: u64, udata: *mut c_void);
type TbTransCb = extern "C" fn(id: PluginId, tb: *mut Tb);
type SyscallCb = extern "C" fn(id: PluginId, vcpu: c_uint, num: i64, a1: u64, a2: u64, a3: u64, a4: u64, a5: u64, a6: u64, a7: u64, a8: u64);
type SyscallRetCb = extern "C" fn(id: PluginId, vcpu: c_uint, num: i64, ret: i64);
type AtExitCb = extern "C" fn(id: PluginId, udata: *mut c_void);
type VcpuCb = extern "C" fn(id: PluginId, vcpu: c_uint);

extern "C" {
    fn qemu_plugin_register_vcpu_tb_trans_cb(id: PluginId, cb: TbTransCb);
    fn qemu_plugin_register_vcpu_insn_exec_cb(insn: *mut Insn, cb: InsnCb, flags: c_int, udata: *mut c_void);
    fn qemu_plugin_register_vcpu_mem_cb(insn: *mut Insn, cb: MemCb, flags: c_int, rw: c_int, udata: *mut c_void);
    fn qemu_plugin_register_vcpu_syscall_cb(id: PluginId, cb: SyscallCb);
    fn qemu_plugin_register_vcpu_syscall_ret_cb(id: PluginId, cb: SyscallRetCb);
    fn qemu_plugin_register_vcpu_exit_cb(id: PluginId, cb: VcpuCb);
    fn qemu_plugin_register_atexit_cb(id: PluginId, cb: AtExitCb, udata: *mut c_void);
    fn qemu_plugin_tb_n_insns(tb: *const Tb) -> usize;
    fn qemu_plugin_tb_get_insn(tb: *const Tb, idx: usize) -> *mut Insn;
    fn qemu_plugin_insn_vaddr(insn: *const Insn) -> u64;
    fn qemu_plugin_insn_size(insn: *const Insn) -> usize;
    fn qemu_plugin_mem_size_shift(info: MemInfo) -> c_uint;
    fn qemu_plugin_mem_is_store(info: MemInfo) -> bool;
    fn qemu_plugin_outs(s: *const c_char);
}

/// The API version the plugin is built against (QEMU refuses a plugin without it).
#[no_mangle]
#[used]
pub static qemu_plugin_version: c_int = 1;

/// QEMU's entry point: check the guest, read the arguments, register the callbacks.
#[no_mangle]
pub extern "C" fn qemu_plugin_install(id: PluginId, info: *const Info, argc: c_int, argv: *const *const c_char) -> c_int {
    // SAFETY: QEMU passes a valid qemu_info_t for the duration of this call, whose
    // target_name is a NUL-terminated string.
    let (target, system) = unsafe { (CStr::from_ptr((*info).target_name).to_string_lossy().into_owned(), (*info).system_emulation) };
    let args: Vec<String> = (0..argc.max(0) as usize)
        // SAFETY: argv holds argc NUL-terminated strings, valid while the plugin is loaded.
        .map(|i| unsafe { CStr::from_ptr(*argv.add(i)).to_string_lossy().into_owned() })
        .collect();
    match crate::install(&target, system, &args) {
        Ok(()) => {
            // SAFETY: registering callbacks with the id QEMU gave this plugin; the
            // functions are extern "C" with the signatures the API declares.
            unsafe {
                qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
                qemu_plugin_register_vcpu_syscall_cb(id, on_syscall);
                qemu_plugin_register_vcpu_syscall_ret_cb(id, on_syscall_ret);
                qemu_plugin_register_vcpu_exit_cb(id, on_vcpu_exit);
                qemu_plugin_register_atexit_cb(id, on_exit, null_mut());
            }
            0
        }
        Err(msg) => {
            let line = std::ffi::CString::new(format!("vmlab plugin: {msg}\n")).unwrap_or_default();
            // SAFETY: a NUL-terminated string that lives across the call.
            unsafe { qemu_plugin_outs(line.as_ptr()) };
            -1
        }
    }
}

/// A block is translated: every instruction gets an execution callback (its fetch,
/// with its address and length packed in the user data) and a memory callback.
extern "C" fn on_translate(_id: PluginId, tb: *mut Tb) {
    // SAFETY: `tb` is valid for this callback; the instruction handles it returns too.
    unsafe {
        for i in 0..qemu_plugin_tb_n_insns(tb) {
            let insn = qemu_plugin_tb_get_insn(tb, i);
            let udata = crate::pack_insn(qemu_plugin_insn_vaddr(insn), qemu_plugin_insn_size(insn) as u64) as *mut c_void;
            qemu_plugin_register_vcpu_insn_exec_cb(insn, on_insn, CB_NO_REGS, udata);
            qemu_plugin_register_vcpu_mem_cb(insn, on_mem, CB_NO_REGS, MEM_RW, null_mut());
        }
    }
}

extern "C" fn on_insn(vcpu: c_uint, udata: *mut c_void) {
    if let Some(v) = vcpu_slot(vcpu) {
        v.fetch(udata as u64);
    }
}

extern "C" fn on_mem(vcpu: c_uint, info: MemInfo, vaddr: u64, _udata: *mut c_void) {
    // SAFETY: `info` is the handle QEMU passed to this callback.
    let (shift, store) = unsafe { (qemu_plugin_mem_size_shift(info), qemu_plugin_mem_is_store(info)) };
    if let Some(v) = vcpu_slot(vcpu) {
        v.access(store, vaddr, 1u64 << shift);
    }
}

extern "C" fn on_syscall(_id: PluginId, vcpu: c_uint, num: i64, a1: u64, a2: u64, a3: u64, a4: u64, a5: u64, _a6: u64, _a7: u64, _a8: u64) {
    if let Some(v) = vcpu_slot(vcpu) {
        v.syscall(num as u64, [a1, a2, a3, a4, a5]);
    }
}

extern "C" fn on_syscall_ret(_id: PluginId, vcpu: c_uint, num: i64, ret: i64) {
    if let Some(v) = vcpu_slot(vcpu) {
        v.syscall_ret(num as u64, ret);
    }
}

extern "C" fn on_vcpu_exit(_id: PluginId, vcpu: c_uint) {
    if let Some(v) = vcpu_slot(vcpu) {
        v.flush();
    }
}

/// The process exits (QEMU has stopped its other threads): write every buffer, then
/// the exit.
extern "C" fn on_exit(_id: PluginId, _udata: *mut c_void) {
    crate::exit();
}

/// The most threads the plugin keeps buffers for at once (QEMU reuses the index of a
/// thread that has exited).
pub(crate) const MAX_VCPUS: usize = 4096;

static VCPUS: [AtomicPtr<Vcpu>; MAX_VCPUS] = [const { AtomicPtr::new(null_mut()) }; MAX_VCPUS];

/// The buffer of vCPU `index`, made on its first use; None past [`MAX_VCPUS`] (the
/// plugin reports the loss: `crate::lost_threads`).
#[inline(always)]
fn vcpu_slot(index: c_uint) -> Option<&'static mut Vcpu> {
    let slot = VCPUS.get(index as usize).or_else(|| {
        crate::lost_threads();
        None
    })?;
    let mut p = slot.load(Ordering::Acquire);
    if p.is_null() {
        p = new_vcpu(slot, index);
    }
    // SAFETY: a vCPU index belongs to one guest thread at a time, and only that thread's
    // callbacks reach its slot (the exit callbacks run once the other threads have
    // stopped: `each_vcpu`); the buffer is never freed, so the reference stays valid.
    Some(unsafe { &mut *p })
}

#[cold]
#[inline(never)]
fn new_vcpu(slot: &AtomicPtr<Vcpu>, index: c_uint) -> *mut Vcpu {
    let p = Box::into_raw(Box::new(Vcpu::new(index)));
    slot.store(p, Ordering::Release);
    p
}

/// Every vCPU buffer made so far, for the exit and fork paths, which run while no
/// other guest thread runs (QEMU stops them before the exit callbacks; a forked child
/// has only the forking thread).
pub(crate) fn each_vcpu(f: &mut dyn FnMut(&mut Vcpu)) {
    for slot in VCPUS.iter() {
        let p = slot.load(Ordering::Acquire);
        if !p.is_null() {
            // SAFETY: see the function's comment: no other thread uses the buffers now.
            f(unsafe { &mut *p });
        }
    }
}

// The wire format is little-endian words, written as they lie in memory.
#[cfg(not(target_endian = "little"))]
compile_error!("the plugin writes its words in memory order, which must be little-endian");

/// Write `words` to `fd` as one message (one chunk of the socket). Returns false if
/// vmlab's end of the socket is gone.
pub(crate) fn write_words(fd: c_int, words: &[u64]) -> bool {
    loop {
        // SAFETY: the slice is valid for its length in bytes (u64 has no padding);
        // `fd` is the plugin's own descriptor.
        let n = unsafe { libc::write(fd, words.as_ptr() as *const c_void, std::mem::size_of_val(words)) };
        if n >= 0 {
            // A message goes out whole or not at all.
            return true;
        }
        if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            return false;
        }
    }
}

/// Move descriptor `fd` to a number at or above `at`, closed on exec: a guest that
/// opens or `dup2`s low-numbered files must not land on it, and a program the guest
/// execs (which runs natively, untraced) must not hold the socket open.
pub(crate) fn move_fd(fd: c_int, at: c_int) -> Result<c_int, String> {
    // SAFETY: fcntl and close on a descriptor number; failures are reported.
    unsafe {
        let high = libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, at);
        if high < 0 {
            return Err(format!("descriptor {fd}: {}", std::io::Error::last_os_error()));
        }
        libc::close(fd);
        Ok(high)
    }
}

/// The inode of the socket at `fd` (None if `fd` is not an open socket).
pub(crate) fn socket_inode(fd: c_int) -> Option<u64> {
    // SAFETY: fstat writes a stat into the zeroed buffer, or fails.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: as above; `st` is a valid, writable stat.
    if unsafe { libc::fstat(fd, &mut st) } != 0 || st.st_mode & libc::S_IFMT != libc::S_IFSOCK {
        return None;
    }
    Some(st.st_ino)
}

pub(crate) fn getpid() -> u32 {
    // SAFETY: getpid cannot fail.
    unsafe { libc::getpid() as u32 }
}

/// End the traced process: vmlab stopped reading.
pub(crate) fn exit_now() -> ! {
    // SAFETY: _exit ends the process without running QEMU's exit path again.
    unsafe { libc::_exit(141) }
}
