//! How the node's release binary is linked to keep little of itself resident: its hot code
//! placed together (`src/hot-text.ld`, written by `bench/hot-text.sh`) and its relative
//! relocations packed; ~6 MiB less RSS. Linux only; `QUOTAROUTE_HOT_TEXT=0` links without both
//! (a linker that takes no `SECTIONS` script: mold).
use std::env;
use std::path::Path;

fn main() {
    println!("cargo:rerun-if-changed=src/hot-text.ld");
    println!("cargo:rerun-if-env-changed=QUOTAROUTE_HOT_TEXT");
    let linux = env::var("CARGO_CFG_TARGET_OS").is_ok_and(|os| os == "linux");
    let release = env::var("PROFILE").is_ok_and(|profile| profile == "release");
    let wanted = env::var("QUOTAROUTE_HOT_TEXT").map_or(true, |value| value != "0");
    let manifest_dir = env::var("CARGO_MANIFEST_DIR");
    if let (true, true, true, Ok(manifest_dir)) = (linux, release, wanted, manifest_dir) {
        let script = Path::new(&manifest_dir).join("src/hot-text.ld");
        // INSERT BEFORE .text: the script adds `.text.hot` to the linker's default layout.
        println!(
            "cargo:rustc-link-arg-bin=quotaroute=-Wl,-T,{}",
            script.display()
        );
        // Relative relocations packed (RELR, glibc 2.36+): ld.so reads ~10 KB at start instead
        // of the 540 KB `.rela.dyn` that stays mapped.
        println!("cargo:rustc-link-arg-bin=quotaroute=-Wl,-z,pack-relative-relocs");
    }
}
