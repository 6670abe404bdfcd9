//! Compiles csrc/sb_math.c (which includes the shared csrc/sb_math.h) with IEEE-strict flags.

fn main() {
    println!("cargo:rerun-if-changed=csrc/sb_math.h");
    println!("cargo:rerun-if-changed=csrc/sb_math.c");
    cc::Build::new()
        .file("csrc/sb_math.c")
        .std("c99")
        .opt_level(2)
        .flag("-ffp-contract=off")
        .flag("-fno-fast-math")
        .flag("-fno-math-errno")
        .flag_if_supported("-fexcess-precision=standard")
        .warnings(true)
        .extra_warnings(true)
        .warnings_into_errors(true)
        .compile("sb_math");
}
