//! `troupe` is linked as a position-dependent executable (`-no-pie`) on
//! Linux: the binary starts on every tool call of every agent (the hook),
//! and as a PIE of this size the dynamic loader first applies its relative
//! relocations (55,000 in a release build, 174,000 in a debug one) and
//! copies the pages they touch. Linked at a fixed address, the linker
//! resolves them instead: a third fewer page faults and about 2 ms less CPU
//! per hook call in a debug build (BENCHMARKS.md, "Where a hook's time
//! goes"). The cost: the binary's own code and data lose address-space
//! randomisation (its libraries, stack and heap keep it).
//!
//! On glibc it is also linked statically, so no dynamic loader runs at all:
//! no shared library to find, map or resolve symbols against at each start
//! (BENCHMARKS.md, "A static `troupe`"). Rust's own switch for this,
//! `-C target-feature=+crt-static`, cannot be given to one crate from here
//! and breaks proc-macro crates when set for the whole build without
//! `--target` (which would move `target/<profile>/troupe`). So the link is
//! made static at the linker: `-static`, and a folder searched first in
//! which the libraries std names (`-lc`, `-lm`, `-lgcc_s`, ...) are links to
//! glibc's and libgcc's static archives, which the linker recognises by
//! their content. Only the binaries: tests and benches link as before. The
//! static glibc still resolves host names through `/etc/hosts` and DNS (its
//! `files` and `dns` sources are built in) and `catch_unwind` still catches
//! (`libgcc_eh`'s unwinder); `tests/it/hooks.rs` checks both on the binary.
//! Where a static archive is missing the binary stays dynamic, with a warning.

use std::path::{Path, PathBuf};

/// What std and the `libc` crate link on glibc, and the static archive for each.
const STATIC_ARCHIVES: [(&str, &str); 7] = [
    ("c", "libc.a"),
    ("m", "libm.a"),
    ("pthread", "libpthread.a"),
    ("dl", "libdl.a"),
    ("rt", "librt.a"),
    ("util", "libutil.a"),
    ("gcc_s", "libgcc_eh.a"),
];

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() != Ok("linux") {
        return;
    }
    // Only the binaries: tests and benches link as before.
    println!("cargo:rustc-link-arg-bins=-no-pie");
    if std::env::var("CARGO_CFG_TARGET_ENV").as_deref() != Ok("gnu") {
        return;
    }
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    match static_libs(&out.join("static-libs")) {
        Ok(dir) => {
            // A linker argument, not `rustc-link-search`, so only the binaries see it.
            println!("cargo:rustc-link-arg-bins=-L{}", dir.display());
            println!("cargo:rustc-link-arg-bins=-static");
        }
        Err(why) => println!("cargo:warning=troupe stays dynamically linked: {why}"),
    }
}

/// `dir` holding `lib<name>.so` links to the static archives, or why not.
fn static_libs(dir: &Path) -> Result<PathBuf, String> {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    for (name, archive) in STATIC_ARCHIVES {
        let found = archive_path(archive)?;
        println!("cargo:rerun-if-changed={}", found.display());
        let link = dir.join(format!("lib{name}.so"));
        std::os::unix::fs::symlink(&found, &link).map_err(|e| format!("cannot link {}: {e}", link.display()))?;
    }
    Ok(dir.to_path_buf())
}

/// Where the C compiler finds `archive` (`cc -print-file-name`), or why not.
fn archive_path(archive: &str) -> Result<PathBuf, String> {
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let out = std::process::Command::new(&cc)
        .arg(format!("-print-file-name={archive}"))
        .output()
        .map_err(|e| format!("cannot run {cc}: {e}"))?;
    let path = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    // Not found, the compiler prints the bare name back.
    if path.is_absolute() && path.is_file() {
        Ok(path)
    } else {
        Err(format!("{cc} finds no {archive} (install the C library's static archives, e.g. libc6-dev)"))
    }
}
