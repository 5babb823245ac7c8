//! Reads the memories a WebAssembly module declares or imports, so that a module whose
//! memory could grow past a run's memory budget is refused when it is registered,
//! before any isolate instantiates it. V8 reserves WebAssembly memory outside the heap
//! and ArrayBuffer budgets, so the module's own maximum is the only bound there is.
//!
//! Only the sections that matter are parsed (import, memory, export); anything this
//! reader cannot follow is refused rather than guessed at. `check_module` is what a
//! module passes before V8 compiles it (once per process, see `src/v8`), and V8's
//! compile validates the rest (function bodies, types).
use thiserror::Error;

const WASM_PAGE_BYTES: u64 = 64 * 1024;
const SECTION_IMPORT: u8 = 2;
const SECTION_MEMORY: u8 = 5;
const SECTION_EXPORT: u8 = 7;

/// One memory of a module, defined in it or imported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WasmMemory {
    /// Index in the module's memory index space (imports first).
    pub index: u32,
    /// `module.field` when imported.
    pub import: Option<String>,
    /// Export names of this memory.
    pub exports: Vec<String>,
    pub min_pages: u64,
    pub max_pages: Option<u64>,
    pub page_bytes: u64,
    pub shared: bool,
}

impl WasmMemory {
    /// The most bytes this memory may ever reach, if it declares a maximum.
    pub fn max_bytes(&self) -> Option<u64> {
        self.max_pages.map(|p| p.saturating_mul(self.page_bytes))
    }

    fn describe(&self) -> String {
        let mut s = match &self.import {
            Some(name) => format!("imported memory \"{name}\""),
            None => format!("memory {}", self.index),
        };
        if !self.exports.is_empty() {
            s.push_str(&format!(" (exported as \"{}\")", self.exports.join("\", \"")));
        }
        s
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum WasmMemoryError {
    #[error("the module could not be read ({0})")]
    Malformed(&'static str),
    #[error("it imports {0}; modules with imports are not supported (a sandbox has nothing to import)")]
    Imports(String),
    #[error("its {what} declares no maximum size; a sandboxed memory needs a maximum of at most {budget} bytes (the run's memory budget)")]
    NoMaximum { what: String, budget: u64 },
    #[error("its {what} may grow to {max} bytes, over the run's memory budget of {budget} bytes")]
    OverBudget { what: String, max: u64, budget: u64 },
}

/// What a module must pass before it is compiled: well-formed sections, no imports
/// (a sandbox has nothing to give them), every memory with a maximum within `budget`.
pub fn check_module(module: &[u8], budget: u64) -> Result<(), WasmMemoryError> {
    let imports = imports(module)?;
    if !imports.is_empty() {
        let mut names = imports.iter().take(3).map(|i| format!("\"{i}\"")).collect::<Vec<_>>().join(", ");
        if imports.len() > 3 {
            names.push_str(&format!(" and {} more", imports.len() - 3));
        }
        return Err(WasmMemoryError::Imports(names));
    }
    check_memory_budget(module, budget)
}

/// `module.field` of every import of `module`.
pub fn imports(module: &[u8]) -> Result<Vec<String>, WasmMemoryError> {
    let mut out = Vec::new();
    parse(module, &mut |import| out.push(import.to_string()))?;
    Ok(out)
}

/// Every memory `module` defines or imports, with its limits.
pub fn memories(module: &[u8]) -> Result<Vec<WasmMemory>, WasmMemoryError> {
    parse(module, &mut |_| {})
}

fn parse(module: &[u8], on_import: &mut dyn FnMut(&str)) -> Result<Vec<WasmMemory>, WasmMemoryError> {
    let mut r = Reader { bytes: module, pos: 0 };
    if r.take(4)? != b"\0asm" {
        return Err(WasmMemoryError::Malformed("no WebAssembly header"));
    }
    if r.take(4)? != [1, 0, 0, 0] {
        return Err(WasmMemoryError::Malformed("not a version 1 core module"));
    }
    let mut out: Vec<WasmMemory> = Vec::new();
    let mut exports: Vec<(u32, String)> = Vec::new();
    while !r.done() {
        let id = r.byte()?;
        let size = r.u32()? as usize;
        let mut s = Reader { bytes: r.take(size)?, pos: 0 };
        match id {
            SECTION_IMPORT => {
                for _ in 0..s.u32()? {
                    let module = s.name()?;
                    let field = s.name()?;
                    on_import(&format!("{module}.{field}"));
                    match s.byte()? {
                        0x00 => {
                            s.u32()?;
                        }
                        0x01 => {
                            s.ref_type()?;
                            s.limits()?;
                        }
                        0x02 => {
                            let index = out.len() as u32;
                            out.push(s.memory(index, Some(format!("{module}.{field}")))?);
                        }
                        0x03 => {
                            s.value_type()?;
                            s.byte()?;
                        }
                        0x04 => {
                            s.byte()?;
                            s.u32()?;
                        }
                        _ => return Err(WasmMemoryError::Malformed("unknown import kind")),
                    }
                }
            }
            SECTION_MEMORY => {
                for _ in 0..s.u32()? {
                    let index = out.len() as u32;
                    out.push(s.memory(index, None)?);
                }
            }
            SECTION_EXPORT => {
                for _ in 0..s.u32()? {
                    let name = s.name()?;
                    let kind = s.byte()?;
                    let index = s.u32()?;
                    if kind == 0x02 {
                        exports.push((index, name));
                    }
                }
            }
            _ => {}
        }
    }
    for (index, name) in exports {
        if let Some(m) = out.iter_mut().find(|m| m.index == index) {
            m.exports.push(name);
        }
    }
    Ok(out)
}

/// Refuses a module with a memory that has no maximum or may grow past `budget` bytes.
pub fn check_memory_budget(module: &[u8], budget: u64) -> Result<(), WasmMemoryError> {
    for m in memories(module)? {
        match m.max_bytes() {
            None => return Err(WasmMemoryError::NoMaximum { what: m.describe(), budget }),
            Some(max) if max > budget => return Err(WasmMemoryError::OverBudget { what: m.describe(), max, budget }),
            Some(_) => {}
        }
    }
    Ok(())
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn done(&self) -> bool {
        self.pos >= self.bytes.len()
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], WasmMemoryError> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.bytes.len());
        let end = end.ok_or(WasmMemoryError::Malformed("unexpected end"))?;
        let out = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(out)
    }

    fn byte(&mut self) -> Result<u8, WasmMemoryError> {
        Ok(self.take(1)?[0])
    }

    /// Unsigned LEB128 of at most `bits` bits.
    fn leb(&mut self, bits: u32) -> Result<u64, WasmMemoryError> {
        let mut value: u64 = 0;
        let mut shift = 0;
        loop {
            let b = self.byte()?;
            if shift >= bits {
                return Err(WasmMemoryError::Malformed("integer too long"));
            }
            value |= ((b & 0x7f) as u64) << shift;
            shift += 7;
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
    }

    fn u32(&mut self) -> Result<u32, WasmMemoryError> {
        let v = self.leb(32)?;
        u32::try_from(v).map_err(|_| WasmMemoryError::Malformed("integer too large"))
    }

    fn name(&mut self) -> Result<String, WasmMemoryError> {
        let len = self.u32()? as usize;
        Ok(String::from_utf8_lossy(self.take(len)?).into_owned())
    }

    /// A heap type after the 0x63 / 0x64 reference prefixes (a signed LEB128 s33).
    fn heap_type(&mut self) -> Result<(), WasmMemoryError> {
        self.leb(35).map(|_| ())
    }

    fn ref_type(&mut self) -> Result<(), WasmMemoryError> {
        match self.byte()? {
            0x63 | 0x64 => self.heap_type(),
            _ => Ok(()),
        }
    }

    fn value_type(&mut self) -> Result<(), WasmMemoryError> {
        self.ref_type()
    }

    /// (flags, min, max); flag bit 0: has max, bit 1: shared, bit 2: 64-bit, bit 3:
    /// custom page size follows.
    fn limits(&mut self) -> Result<(u8, u64, Option<u64>), WasmMemoryError> {
        let flags = self.byte()?;
        if flags & !0x0f != 0 {
            return Err(WasmMemoryError::Malformed("unknown limits flags"));
        }
        let bits = if flags & 0x04 != 0 { 64 } else { 32 };
        let min = self.leb(bits)?;
        let max = if flags & 0x01 != 0 { Some(self.leb(bits)?) } else { None };
        Ok((flags, min, max))
    }

    fn memory(&mut self, index: u32, import: Option<String>) -> Result<WasmMemory, WasmMemoryError> {
        let (flags, min_pages, max_pages) = self.limits()?;
        let page_bytes = if flags & 0x08 != 0 {
            let log2 = self.u32()?;
            if log2 > 16 {
                return Err(WasmMemoryError::Malformed("page size too large"));
            }
            1u64 << log2
        } else {
            WASM_PAGE_BYTES
        };
        Ok(WasmMemory { index, import, exports: Vec::new(), min_pages, max_pages, page_bytes, shared: flags & 0x02 != 0 })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: [u8; 8] = [0, b'a', b's', b'm', 1, 0, 0, 0];

    fn section(id: u8, body: &[u8]) -> Vec<u8> {
        let mut out = vec![id];
        leb(&mut out, body.len() as u64);
        out.extend_from_slice(body);
        out
    }

    fn leb(out: &mut Vec<u8>, mut v: u64) {
        loop {
            let b = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                out.push(b);
                return;
            }
            out.push(b | 0x80);
        }
    }

    fn module(sections: &[Vec<u8>]) -> Vec<u8> {
        let mut m = HEADER.to_vec();
        for s in sections {
            m.extend_from_slice(s);
        }
        m
    }

    fn name(out: &mut Vec<u8>, s: &str) {
        leb(out, s.len() as u64);
        out.extend_from_slice(s.as_bytes());
    }

    /// A memory section with one memory: `(memory min max?)`.
    fn memory_section(min: u64, max: Option<u64>) -> Vec<u8> {
        let mut body = vec![1, if max.is_some() { 1 } else { 0 }];
        leb(&mut body, min);
        if let Some(max) = max {
            leb(&mut body, max);
        }
        section(SECTION_MEMORY, &body)
    }

    fn export_memory(name_: &str) -> Vec<u8> {
        let mut body = vec![1];
        name(&mut body, name_);
        body.extend_from_slice(&[0x02, 0]);
        section(SECTION_EXPORT, &body)
    }

    const MIB: u64 = 1024 * 1024;

    #[test]
    fn a_module_without_memory_passes() {
        assert_eq!(memories(&module(&[])).unwrap(), vec![]);
        // An unrelated (type) section is skipped.
        check_memory_budget(&module(&[section(1, &[1, 0x60, 0, 0])]), 64 * MIB).unwrap();
    }

    #[test]
    fn a_memory_within_budget_passes_and_its_limits_are_read() {
        let m = module(&[memory_section(1, Some(16)), export_memory("mem")]);
        let mems = memories(&m).unwrap();
        assert_eq!(mems.len(), 1);
        assert_eq!((mems[0].min_pages, mems[0].max_pages, mems[0].exports.clone()), (1, Some(16), vec!["mem".to_string()]));
        assert_eq!(mems[0].max_bytes(), Some(MIB));
        check_memory_budget(&m, MIB).unwrap();
    }

    #[test]
    fn a_memory_without_maximum_is_refused_naming_its_export() {
        let m = module(&[memory_section(1, None), export_memory("mem")]);
        let err = check_memory_budget(&m, 64 * MIB).unwrap_err();
        assert!(matches!(err, WasmMemoryError::NoMaximum { .. }));
        assert!(err.to_string().contains("memory 0 (exported as \"mem\") declares no maximum"), "{err}");
    }

    #[test]
    fn a_maximum_over_budget_is_refused() {
        // 65536 pages = 4 GiB, multi-byte LEB.
        let m = module(&[memory_section(0, Some(65536))]);
        let err = check_memory_budget(&m, 64 * MIB).unwrap_err();
        assert_eq!(err, WasmMemoryError::OverBudget { what: "memory 0".into(), max: 4096 * MIB, budget: 64 * MIB });
        // Exactly at the budget passes.
        check_memory_budget(&module(&[memory_section(0, Some(1024))]), 64 * MIB).unwrap();
        assert!(check_memory_budget(&module(&[memory_section(0, Some(1025))]), 64 * MIB).is_err());
    }

    #[test]
    fn imported_memories_count_and_come_first() {
        let mut body = vec![2];
        // (import "env" "f" (func 0))
        name(&mut body, "env");
        name(&mut body, "f");
        body.extend_from_slice(&[0x00, 0]);
        // (import "env" "mem" (memory 1)) without maximum
        name(&mut body, "env");
        name(&mut body, "mem");
        body.extend_from_slice(&[0x02, 0x00, 1]);
        let m = module(&[section(SECTION_IMPORT, &body), memory_section(1, Some(2))]);
        let mems = memories(&m).unwrap();
        assert_eq!(mems.iter().map(|m| (m.index, m.import.clone())).collect::<Vec<_>>(), vec![(0, Some("env.mem".into())), (1, None)]);
        let err = check_memory_budget(&m, 64 * MIB).unwrap_err();
        assert!(err.to_string().contains("imported memory \"env.mem\""), "{err}");
    }

    #[test]
    fn shared_and_64_bit_memories_are_read() {
        // flags 0x07: max, shared, i64; min 1, max 2^40 pages.
        let mut body = vec![1, 0x07, 1];
        leb(&mut body, 1 << 40);
        let m = module(&[section(SECTION_MEMORY, &body)]);
        let mems = memories(&m).unwrap();
        assert!(mems[0].shared);
        assert_eq!(mems[0].max_pages, Some(1 << 40));
        assert!(matches!(check_memory_budget(&m, 64 * MIB), Err(WasmMemoryError::OverBudget { .. })));
    }

    #[test]
    fn modules_with_imports_are_refused_naming_them() {
        let mut body = vec![1];
        name(&mut body, "env");
        name(&mut body, "log");
        body.extend_from_slice(&[0x00, 0]);
        let m = module(&[section(SECTION_IMPORT, &body)]);
        assert_eq!(imports(&m).unwrap(), vec!["env.log".to_string()]);
        let err = check_module(&m, 64 * MIB).unwrap_err();
        assert_eq!(err.to_string(), "it imports \"env.log\"; modules with imports are not supported (a sandbox has nothing to import)");
        // No imports, memory within budget: passes; over budget: the memory check speaks.
        check_module(&module(&[memory_section(1, Some(2))]), 64 * MIB).unwrap();
        assert!(matches!(check_module(&module(&[memory_section(1, None)]), 64 * MIB), Err(WasmMemoryError::NoMaximum { .. })));
        assert!(matches!(check_module(b"nope", 64 * MIB), Err(WasmMemoryError::Malformed(_))));
    }

    #[test]
    fn malformed_input_is_refused_not_guessed() {
        assert!(matches!(memories(b"\0asm"), Err(WasmMemoryError::Malformed(_))));
        assert!(matches!(memories(b"nope\x01\0\0\0"), Err(WasmMemoryError::Malformed(_))));
        // A section claiming more bytes than there are.
        let mut m = HEADER.to_vec();
        m.extend_from_slice(&[SECTION_MEMORY, 10, 1]);
        assert!(matches!(memories(&m), Err(WasmMemoryError::Malformed(_))));
        // An over-long LEB.
        let mut m = HEADER.to_vec();
        m.extend_from_slice(&[SECTION_MEMORY, 7, 1, 0x01, 0x80, 0x80, 0x80, 0x80, 0x80]);
        assert!(matches!(memories(&m), Err(WasmMemoryError::Malformed(_))));
    }
}
