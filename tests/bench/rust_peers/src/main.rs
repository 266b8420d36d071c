//! rust_peers - the Rust peers of tests/bench/lookup_bench.cpp: gsym-rs's
//! reader and blazesym's symbolizer (over a GSYM file, and over the ELF file
//! with its DWARF, blazesym's usual input) timed on the same address lists,
//! the same way (thread CPU time, median of passes after a warm-up pass).
//!
//!   rust_peers gsym-rs GSYM ADDRS [MIN_PASSES MIN_SECONDS]
//!     gsym-rs into-names ns=...                     for_each_frame, no lines/inlines
//!     gsym-rs into-full  ns=... found=N checksum=.. for_each_frame, full answers
//!     gsym-rs alloc-names ns=...                    lookup_with_options (allocating)
//!     gsym-rs alloc-full ns=... found=N checksum=..
//!   rust_peers blazesym-gsym GSYM ADDRS [...]  /  blazesym-elf ELF ADDRS [...]
//!     blazesym-X cold cpu_ms=... wall_ms=... found=N   a new Symbolizer, one batch
//!     blazesym-X warm-full ns=...                      the same Symbolizer again
//!     blazesym-X warm-names ns=...                     no code info, no inlines
//!   rust_peers answers gsym-rs|blazesym-gsym|blazesym-elf FILE ADDRS
//!     one line per address: ADDR, then each frame innermost first as
//!     "NAME BASENAME:LINE" (tab-separated), or "?" when nothing covers it;
//!     tests/bench/lookup_bench --answers prints the same for ours.
//!
//! The checksum folds every frame as tests/bench/bench_common.h does, so a
//! checksum equal to lookup_bench's means equal answers (names, directories,
//! basenames, lines, offsets). blazesym reports no per-frame offsets, hence
//! the text answers for it. Names are compared as stored (no demangling).
use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

use blazesym::symbolize::source::{Elf, Gsym as BlazeGsym, GsymFile, Source};
use blazesym::symbolize::{Input, Sym, Symbolized, Symbolizer};
use gsym::{FrameLookupOptions, LookupFrame, LookupOptions, LookupScratch, MappedGsym};

fn read_addresses(path: &str) -> Result<Vec<u64>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let value = match line.strip_prefix("0x") {
            Some(hex) => u64::from_str_radix(hex, 16),
            None => line.parse::<u64>(),
        };
        out.push(value.map_err(|_| format!("{path}:{}: bad address '{line}'", n + 1))?);
    }
    if out.is_empty() {
        return Err(format!("{path}: no addresses"));
    }
    Ok(out)
}

/// FNV-1a over every field of every frame, as bench::Checksum.
struct Checksum(u64);

impl Checksum {
    fn new() -> Self {
        Checksum(1469598103934665603)
    }
    fn step(&mut self, byte: u8) {
        self.0 = (self.0 ^ u64::from(byte)).wrapping_mul(1099511628211);
    }
    fn add_bytes(&mut self, s: &[u8]) {
        for &c in s {
            self.step(c);
        }
        self.step(0xff);
    }
    fn add_number(&mut self, n: u64) {
        for i in 0..8 {
            self.step(((n >> (8 * i)) & 0xff) as u8);
        }
    }
    fn add_frame(&mut self, f: &LookupFrame<'_>) {
        self.add_bytes(f.name);
        self.add_bytes(f.directory);
        self.add_bytes(f.basename);
        self.add_number(u64::from(f.line));
        self.add_number(f.offset);
    }
}

fn thread_cpu_ns() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 * 1e9 + ts.tv_nsec as f64
}

/// One untimed pass, then passes until min_passes and min_seconds of CPU;
/// the median ns per lookup (bench::median_ns_per_lookup).
fn median_ns_per_lookup(n: usize, min_passes: usize, min_seconds: f64, mut pass: impl FnMut()) -> f64 {
    pass();
    let mut ns = Vec::new();
    let begin = thread_cpu_ns();
    while ns.len() < min_passes || thread_cpu_ns() - begin < min_seconds * 1e9 {
        let t0 = thread_cpu_ns();
        pass();
        ns.push((thread_cpu_ns() - t0) / n as f64);
        if ns.len() >= 1000 {
            break;
        }
    }
    ns.sort_by(|a, b| a.partial_cmp(b).unwrap());
    ns[ns.len() / 2]
}

fn keep<T>(value: &T) {
    std::hint::black_box(value);
}

fn open_gsym(path: &str) -> Result<MappedGsym, String> {
    // SAFETY: the bench's GSYM files are not modified while mapped.
    unsafe { MappedGsym::map(path) }.map_err(|e| format!("{path}: {e}"))
}

const FULL: FrameLookupOptions = FrameLookupOptions { line_information: true, inline_frames: true };
const NAMES: FrameLookupOptions = FrameLookupOptions { line_information: false, inline_frames: false };

fn run_gsym_rs(path: &str, addrs: &[u64], passes: usize, seconds: f64) -> Result<(), String> {
    let reader = open_gsym(path)?;
    let mut scratch = LookupScratch::with_capacity(16);
    let (mut found, mut errors) = (0u64, 0u64);
    let mut into = Checksum::new();
    let mut frames: Vec<LookupFrame<'_>> = Vec::new();
    for &addr in addrs {
        frames.clear();
        match reader.for_each_frame(addr, FULL, &mut scratch, |f| frames.push(f)) {
            Ok(true) => {
                found += 1;
                into.add_number(frames.len() as u64);
                frames.iter().for_each(|f| into.add_frame(f));
            }
            Ok(false) => into.add_number(0),
            Err(_) => {
                errors += 1;
                into.add_number(0);
            }
        }
    }
    let alloc_options = |o: FrameLookupOptions| LookupOptions::from(o);
    let mut alloc = Checksum::new();
    for &addr in addrs {
        match reader.lookup_with_options(addr, alloc_options(FULL), &mut scratch) {
            Ok(Some(hit)) => {
                alloc.add_number(hit.frames().len() as u64);
                hit.frames().iter().for_each(|f| alloc.add_frame(f));
            }
            _ => alloc.add_number(0),
        }
    }
    if errors != 0 {
        eprintln!("{path}: {errors} lookups failed with an error");
    }
    if into.0 != alloc.0 {
        return Err(format!("{path}: lookup_with_options and for_each_frame disagree"));
    }
    let n = addrs.len();
    let mut time_into = |o: FrameLookupOptions| {
        median_ns_per_lookup(n, passes, seconds, || {
            for &addr in addrs {
                let r = reader.for_each_frame(addr, o, &mut scratch, |f| keep(&f));
                keep(&r);
            }
        })
    };
    let into_names = time_into(NAMES);
    let into_full = time_into(FULL);
    let mut time_alloc = |o: FrameLookupOptions| {
        median_ns_per_lookup(n, passes, seconds, || {
            for &addr in addrs {
                let r = reader.lookup_with_options(addr, alloc_options(o), &mut scratch);
                keep(&r);
            }
        })
    };
    let alloc_names = time_alloc(NAMES);
    let alloc_full = time_alloc(FULL);
    println!("gsym-rs into-names ns={into_names:.1}");
    println!("gsym-rs into-full ns={into_full:.1} found={found} checksum={:016x}", into.0);
    println!("gsym-rs alloc-names ns={alloc_names:.1}");
    println!("gsym-rs alloc-full ns={alloc_full:.1} found={found} checksum={:016x}", alloc.0);
    Ok(())
}

fn blaze_source(kind: &str, path: &str) -> Source<'static> {
    if kind == "blazesym-elf" {
        Source::Elf(Elf::new(path))
    } else {
        Source::Gsym(BlazeGsym::File(GsymFile::new(path)))
    }
}

fn blaze_symbolizer(full: bool) -> Symbolizer {
    Symbolizer::builder()
        .enable_demangling(false)
        .enable_code_info(full)
        .enable_inlined_fns(full)
        .build()
}

fn run_blazesym(kind: &str, path: &str, addrs: &[u64], passes: usize, seconds: f64) -> Result<(), String> {
    let src = blaze_source(kind, path);
    let (c0, w0) = (thread_cpu_ns(), Instant::now());
    let symbolizer = blaze_symbolizer(true);
    let first = symbolizer
        .symbolize(&src, Input::VirtOffset(addrs))
        .map_err(|e| format!("{path}: {e}"))?;
    let (cold_cpu, cold_wall) = (thread_cpu_ns() - c0, w0.elapsed());
    let found = first.iter().filter(|s| matches!(s, Symbolized::Sym(_))).count();
    drop(first);
    let n = addrs.len();
    let warm = |s: &Symbolizer| {
        median_ns_per_lookup(n, passes, seconds, || {
            keep(&s.symbolize(&src, Input::VirtOffset(addrs)));
        })
    };
    let warm_full = warm(&symbolizer);
    let warm_names = warm(&blaze_symbolizer(false));
    println!(
        "{kind} cold cpu_ms={:.1} wall_ms={:.1} found={found}",
        cold_cpu / 1e6,
        cold_wall.as_secs_f64() * 1e3
    );
    println!("{kind} warm-full ns={warm_full:.1}");
    println!("{kind} warm-names ns={warm_names:.1}");
    Ok(())
}

fn basename(file: &[u8]) -> &[u8] {
    file.rsplit(|&c| c == b'/').next().unwrap_or(file)
}

/// "NAME BASENAME:LINE", or "NAME" without a line.
fn frame_text(out: &mut Vec<u8>, name: &[u8], file: &[u8], line: u32) {
    out.push(b'\t');
    out.extend_from_slice(name);
    if line != 0 {
        out.push(b' ');
        out.extend_from_slice(basename(file));
        out.extend_from_slice(format!(":{line}").as_bytes());
    }
}

fn blaze_frames(sym: &Sym<'_>, out: &mut Vec<u8>) {
    use std::os::unix::ffi::OsStrExt;
    // blazesym lists the function first, then its inlined calls outermost
    // first, each with the location inside it: reverse for innermost first.
    let mut frames: Vec<(&str, &[u8], u32)> = Vec::new();
    let code = |c: Option<&blazesym::symbolize::CodeInfo<'_>>| match c {
        Some(c) => (c.file.as_bytes().to_vec(), c.line.unwrap_or(0)),
        None => (Vec::new(), 0),
    };
    let outer = code(sym.code_info.as_deref());
    let inl: Vec<_> = sym.inlined.iter().map(|f| (f.name.as_ref(), code(f.code_info.as_ref()))).collect();
    frames.push((sym.name.as_ref(), &outer.0, outer.1));
    for (name, (file, line)) in &inl {
        frames.push((name, file, *line));
    }
    for (name, file, line) in frames.iter().rev() {
        frame_text(out, name.as_bytes(), file, *line);
    }
}

fn print_answers(kind: &str, path: &str, addrs: &[u64]) -> Result<(), String> {
    use std::io::Write;
    let mut out = Vec::new();
    if kind == "gsym-rs" {
        let reader = open_gsym(path)?;
        let mut scratch = LookupScratch::with_capacity(16);
        for &addr in addrs {
            out.extend_from_slice(format!("0x{addr:x}").as_bytes());
            let mut frames = Vec::new();
            match reader.for_each_frame(addr, FULL, &mut scratch, |f| frames.push(f)) {
                Ok(true) => frames.iter().for_each(|f| frame_text(&mut out, f.name, f.basename, f.line)),
                _ => out.extend_from_slice(b"\t?"),
            }
            out.push(b'\n');
        }
    } else {
        let src = blaze_source(kind, path);
        let symbolizer = blaze_symbolizer(true);
        let syms = symbolizer
            .symbolize(&src, Input::VirtOffset(addrs))
            .map_err(|e| format!("{path}: {e}"))?;
        for (addr, s) in addrs.iter().zip(&syms) {
            out.extend_from_slice(format!("0x{addr:x}").as_bytes());
            match s {
                Symbolized::Sym(sym) => blaze_frames(sym, &mut out),
                Symbolized::Unknown(_) => out.extend_from_slice(b"\t?"),
            }
            out.push(b'\n');
        }
    }
    std::io::stdout().write_all(&out).map_err(|e| e.to_string())
}

fn run(args: &[String]) -> Result<(), String> {
    let usage = "usage: rust_peers gsym-rs|blazesym-gsym|blazesym-elf FILE ADDRS [MIN_PASSES MIN_SECONDS]\n       rust_peers answers gsym-rs|blazesym-gsym|blazesym-elf FILE ADDRS";
    match args {
        [_, a, kind, file, list] if a == "answers" => print_answers(kind, file, &read_addresses(list)?),
        [_, kind, file, list, rest @ ..] if rest.is_empty() || rest.len() == 2 => {
            let (passes, seconds) = match rest {
                [p, s] => (p.parse().map_err(|_| usage)?, s.parse().map_err(|_| usage)?),
                _ => (3, 0.5),
            };
            let addrs = read_addresses(list)?;
            if !Path::new(file).exists() {
                return Err(format!("{file}: no such file"));
            }
            match kind.as_str() {
                "gsym-rs" => run_gsym_rs(file, &addrs, passes, seconds),
                "blazesym-gsym" | "blazesym-elf" => run_blazesym(kind, file, &addrs, passes, seconds),
                _ => Err(usage.to_string()),
            }
        }
        _ => Err(usage.to_string()),
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rust_peers: {e}");
            ExitCode::from(if e.starts_with("usage") { 2 } else { 1 })
        }
    }
}
