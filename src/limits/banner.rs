//! V8 prints a banner on the process's stderr before it calls the embedder's handler for a
//! fatal out-of-memory ("<--- Last few GCs --->", "<--- JS stacktrace --->", through
//! `base::OS::PrintError`, i.e. `vfprintf(stderr, ...)`), with no way to turn it off but a
//! process-wide flag (`--correctness-fuzzer-suppressions`) that changes other behaviour.
//! A sandbox's isolate thread that meets a fatal OOM is parked by isolet (thread mode): the
//! process lives on, and that banner would be the user's stderr's. So Node's own call to
//! `vfprintf` (its executable's GOT slot) goes through `quiet_vfprintf`, which drops those
//! two lines on isolet's isolate threads only, and forwards everything else unchanged.
//! Most fatal OOMs no longer get there (the seam hands a thread over at its third
//! near-heap-limit callback); this covers the ones that do (one huge allocation).
//! Linux with glibc, x86_64 and aarch64, where `va_list` is passed as one pointer; a
//! statically linked Node (no GOT slot) is left as it is.
use std::cell::Cell;

thread_local! {
    /// This thread runs sandbox isolates: V8's OOM banner from it is dropped.
    static QUIET: Cell<bool> = const { Cell::new(false) };
}

/// Marks the calling thread (an isolate thread) as one whose OOM banner is dropped.
pub(crate) fn quiet_this_thread() {
    QUIET.with(|q| q.set(true));
}

#[cfg(all(target_os = "linux", target_env = "gnu", any(target_arch = "x86_64", target_arch = "aarch64")))]
mod hook {
    use std::ffi::CStr;
    use std::os::raw::{c_char, c_int, c_void};
    use std::sync::atomic::{AtomicUsize, Ordering};

    type Vfprintf = unsafe extern "C" fn(*mut libc::FILE, *const c_char, *mut c_void) -> c_int;

    /// libc's `vfprintf`, as the GOT slot held it.
    static REAL: AtomicUsize = AtomicUsize::new(0);

    /// `vfprintf` for Node's executable. `ap`: the `va_list`, one pointer on these ABIs
    /// (x86_64: an array that decays to one; aarch64: a 32-byte struct passed by reference),
    /// handed on as it came.
    unsafe extern "C" fn quiet_vfprintf(file: *mut libc::FILE, format: *const c_char, ap: *mut c_void) -> c_int {
        // SAFETY: `format` is the caller's NUL-terminated format string.
        if !format.is_null()
            && super::QUIET.with(|q| q.get())
            && isolet_core::seam_policy::is_oom_banner(unsafe { CStr::from_ptr(format) }.to_bytes())
        {
            return 0;
        }
        // SAFETY: REAL is set before the slot points here, and is libc's vfprintf.
        let real: Vfprintf = unsafe { std::mem::transmute::<usize, Vfprintf>(REAL.load(Ordering::Acquire)) };
        // SAFETY: the caller's arguments, unchanged.
        unsafe { real(file, format, ap) }
    }

    #[repr(C)]
    struct Dyn {
        tag: i64,
        val: u64,
    }

    #[repr(C)]
    struct Rela {
        offset: u64,
        info: u64,
        addend: i64,
    }

    #[repr(C)]
    struct Sym {
        name: u32,
        info: u8,
        other: u8,
        shndx: u16,
        value: u64,
        size: u64,
    }

    const DT_NULL: i64 = 0;
    const DT_PLTRELSZ: i64 = 2;
    const DT_STRTAB: i64 = 5;
    const DT_SYMTAB: i64 = 6;
    const DT_RELA: i64 = 7;
    const DT_RELASZ: i64 = 8;
    const DT_JMPREL: i64 = 23;

    /// Points Node's executable's `vfprintf` slot at `quiet_vfprintf`; true if it did.
    pub(super) fn install() -> bool {
        let mut done = false;
        // SAFETY: the callback reads the loaded objects' headers as the loader laid them out.
        unsafe { libc::dl_iterate_phdr(Some(first_object), (&mut done as *mut bool).cast()) };
        done
    }

    /// Called for each loaded object; the first is the executable: patched, then stop.
    unsafe extern "C" fn first_object(info: *mut libc::dl_phdr_info, _size: libc::size_t, data: *mut c_void) -> c_int {
        // SAFETY: the loader's description of the executable, valid for this call.
        let done = unsafe { patch(&*info) };
        // SAFETY: `data` is install's `done`.
        unsafe { *data.cast::<bool>() = done };
        1
    }

    unsafe fn patch(info: &libc::dl_phdr_info) -> bool {
        let base = info.dlpi_addr as usize;
        // SAFETY: dlpi_phdr points at dlpi_phnum program headers.
        let phdrs = unsafe { std::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize) };
        let Some(dynamic) = phdrs.iter().find(|p| p.p_type == libc::PT_DYNAMIC) else { return false };
        // The part made read-only after relocation (full RELRO): a slot there is made
        // writable for the store and read-only again; elsewhere it is writable already.
        let relro = phdrs
            .iter()
            .find(|p| p.p_type == libc::PT_GNU_RELRO)
            .map(|p| (base + p.p_vaddr as usize)..(base + (p.p_vaddr + p.p_memsz) as usize));
        let at = |v: u64| if (v as usize) < base { base + v as usize } else { v as usize };
        let (mut strtab, mut symtab, mut jmprel, mut pltrelsz, mut rela, mut relasz) = (0, 0, 0, 0, 0, 0);
        let mut d = (base + dynamic.p_vaddr as usize) as *const Dyn;
        // SAFETY: the dynamic section ends with DT_NULL.
        unsafe {
            while (*d).tag != DT_NULL {
                match (*d).tag {
                    DT_STRTAB => strtab = at((*d).val),
                    DT_SYMTAB => symtab = at((*d).val),
                    DT_JMPREL => jmprel = at((*d).val),
                    DT_PLTRELSZ => pltrelsz = (*d).val as usize,
                    DT_RELA => rela = at((*d).val),
                    DT_RELASZ => relasz = (*d).val as usize,
                    _ => {}
                }
                d = d.add(1);
            }
        }
        if strtab == 0 || symtab == 0 {
            return false;
        }
        for (table, size) in [(jmprel, pltrelsz), (rela, relasz)] {
            if table == 0 {
                continue;
            }
            let n = size / std::mem::size_of::<Rela>();
            // SAFETY: a relocation table of `n` entries.
            let relocs = unsafe { std::slice::from_raw_parts(table as *const Rela, n) };
            for r in relocs {
                let sym = (r.info >> 32) as usize;
                if sym == 0 {
                    continue;
                }
                // SAFETY: symbol `sym` of the symbol table, and its name in the string table.
                let name = unsafe { CStr::from_ptr((strtab + (*(symtab as *const Sym).add(sym)).name as usize) as *const c_char) };
                if name.to_bytes() != b"vfprintf" {
                    continue;
                }
                let slot = (base + r.offset as usize) as *mut usize;
                let read_only = relro.as_ref().is_some_and(|r| r.contains(&(slot as usize)));
                // SAFETY: the relocated GOT slot of `vfprintf`.
                return unsafe { replace(slot, read_only) };
            }
        }
        false
    }

    /// `read_only`: the slot's page is read-only (RELRO): writable for the store, then
    /// read-only again.
    unsafe fn replace(slot: *mut usize, read_only: bool) -> bool {
        // libc's own, not what the slot holds (a lazy-binding stub would rewrite the slot).
        // SAFETY: a NUL-terminated name.
        let real = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"vfprintf".as_ptr()) } as usize;
        if real == 0 || real == quiet_vfprintf as *const () as usize {
            return false;
        }
        REAL.store(real, Ordering::Release);
        // SAFETY: sysconf has no preconditions.
        let page = 4096usize.max(unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize);
        let start = (slot as usize) & !(page - 1);
        // SAFETY: the page holding the slot, mapped (the slot was just found there).
        if read_only && unsafe { libc::mprotect(start as *mut c_void, page, libc::PROT_READ | libc::PROT_WRITE) } != 0 {
            return false;
        }
        // SAFETY: a pointer-sized, aligned slot; one store (no caller sees half of it).
        unsafe { std::ptr::write_volatile(slot, quiet_vfprintf as *const () as usize) };
        if read_only {
            // SAFETY: as above; RELRO's pages hold nothing written after relocation.
            unsafe { libc::mprotect(start as *mut c_void, page, libc::PROT_READ) };
        }
        true
    }
}

/// Routes V8's OOM banner on isolate threads away from stderr (once, at addon load).
/// False where it cannot be done (see the module's documentation).
pub(crate) fn install() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu", any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        hook::install()
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu", any(target_arch = "x86_64", target_arch = "aarch64"))))]
    {
        false
    }
}
