//! Compiles csrc/sb_math.c (which includes the shared csrc/sb_math.h) with IEEE-strict flags, and
//! on x86-64 also csrc/sb_math_avx2.c and csrc/sb_math_avx512.c, the vectorised slice loops
//! (AVX2 or AVX-512F, chosen at run time), and csrc/sb_math_activations.c, the closed-form
//! activations' slice loops (vectorised for the target's baseline).

/// The flags every object of the library is compiled with: no contraction (no fma), no
/// fast-math, binary32/64 expressions evaluated in their own type.
fn strict(build: &mut cc::Build) -> &mut cc::Build {
    build
        .std("c99")
        .flag("-ffp-contract=off")
        .flag("-fno-fast-math")
        .flag("-fno-math-errno")
        .flag_if_supported("-fexcess-precision=standard")
        .warnings(true)
        .extra_warnings(true)
        .warnings_into_errors(true)
}

fn main() {
    for file in [
        "sb_math.h",
        "sb_math.c",
        "sb_math_slice.h",
        "sb_math_avx2.c",
        "sb_math_avx512.c",
        "sb_math_activations.c",
    ] {
        println!("cargo:rerun-if-changed=csrc/{file}");
    }
    let x86_64 = std::env::var("CARGO_CFG_TARGET_ARCH").as_deref() == Ok("x86_64");
    let mut build = cc::Build::new();
    strict(&mut build).file("csrc/sb_math.c").opt_level(2);
    if x86_64 {
        build.define("SB_HAVE_AVX2_SLICES", None);
    }
    // sb_math first: it calls into sb_math_avx2, and static libraries resolve left to right
    build.compile("sb_math");
    // -O3 and -fno-trapping-math: the selects of the activations if-convert, the loops vectorise.
    strict(&mut cc::Build::new())
        .file("csrc/sb_math_activations.c")
        .opt_level(3)
        .flag("-fno-trapping-math")
        .compile("sb_math_activations");
    if x86_64 {
        // -O3 and -fno-trapping-math let the loop vectoriser if-convert the lane code (values are
        // unchanged: no reassociation, no contraction); -fno-tree-pre keeps table reads
        // unconditional; gathers are enabled by the Skylake tuning (generic tuning avoids them).
        strict(&mut cc::Build::new())
            .file("csrc/sb_math_avx2.c")
            .opt_level(3)
            .flag("-mavx2")
            .flag("-fno-trapping-math")
            .flag_if_supported("-fno-tree-pre")
            .flag_if_supported("-mtune=skylake")
            .compile("sb_math_avx2");
        // The same loops 512 bits wide (GCC's tunings otherwise prefer 256-bit vectors).
        strict(&mut cc::Build::new())
            .file("csrc/sb_math_avx512.c")
            .opt_level(3)
            .flag("-mavx512f")
            .flag("-fno-trapping-math")
            .flag_if_supported("-fno-tree-pre")
            .flag_if_supported("-mtune=skylake-avx512")
            .flag_if_supported("-mprefer-vector-width=512")
            .compile("sb_math_avx512");
    }
}
