//! `troupe` is linked as a position-dependent executable (`-no-pie`) on
//! Linux: the binary starts on every tool call of every agent (the hook),
//! and as a PIE of this size the dynamic loader first applies its relative
//! relocations (55,000 in a release build, 174,000 in a debug one) and
//! copies the pages they touch. Linked at a fixed address, the linker
//! resolves them instead: a third fewer page faults and about 2 ms less CPU
//! per hook call in a debug build (BENCHMARKS.md, "Where a hook's time
//! goes"). The cost: the binary's own code and data lose address-space
//! randomisation (its libraries, stack and heap keep it).

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        // Only the binaries: tests and benches link as before.
        println!("cargo:rustc-link-arg-bins=-no-pie");
    }
}
