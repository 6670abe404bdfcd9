/* sb_math.h: the one definition of samebits' binary32 math, shared by the CPU (C99, compiled by
 * build.rs) and the CUDA backend (prepended to NVRTC programs, compiled with --fmad=false).
 *
 * Owns: the correctly rounded (round to nearest even) functions sb_<name>f, the composite
 * activation formulas, and their tables. The contract, the methods and their citations are in
 * docs/math.md; the tables between the GENERATED markers come from tools/gen_tables.py and
 * tools/gen_exceptions.py and are not edited by hand.
 *
 * Rules that keep CPU and GPU bit-identical: only IEEE binary64/binary32 add, sub, mul, div, sqrt,
 * conversions, integer and bit operations; no libm; no contraction (the CPU build uses
 * -ffp-contract=off, NVRTC --fmad=false); every evaluation order is written out.
 *
 * Method of every correctly rounded function (after the approach of the CORE-MATH binary32
 * functions): evaluate f(x) in binary64 as y with a relative error below a stated bound err;
 * if y - |y| err and y + |y| err round to the same float, that float is f(x) rounded; otherwise
 * (a few hundred inputs per function at most) the input is looked up in the function's table of
 * exceptions, computed with mpmath for every such input by tools/gen_exceptions.py. */
#ifndef SB_MATH_H
#define SB_MATH_H

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define SB_FN __device__ __forceinline__
#define SB_CONST __device__ const
typedef unsigned int sb_u32;
typedef int sb_i32;
typedef unsigned long long sb_u64;
typedef long long sb_i64;
SB_FN sb_u32 sb_f32_bits(float x) { return __float_as_uint(x); }
SB_FN float sb_f32_from_bits(sb_u32 u) { return __uint_as_float(u); }
SB_FN sb_u64 sb_f64_bits(double x) { return (sb_u64)__double_as_longlong(x); }
SB_FN double sb_f64_from_bits(sb_u64 u) { return __longlong_as_double((long long)u); }
SB_FN double sb_sqrt(double x) { return __dsqrt_rn(x); }
SB_FN float sb_sqrtf(float x) { return __fsqrt_rn(x); }
SB_FN sb_i32 sb_clz64(sb_u64 x) { return __clzll((long long)x); }
SB_FN double sb_u64_to_f64(sb_u64 x) { return __ull2double_rn(x); }
#else
#include <float.h>
#include <stdint.h>
#define SB_FN static inline
#define SB_CONST static const
typedef uint32_t sb_u32;
typedef int32_t sb_i32;
typedef uint64_t sb_u64;
typedef int64_t sb_i64;
/* Excess precision would change results: binary32/64 expressions must be evaluated in their type. */
typedef char sb_flt_eval_method_must_be_0[(FLT_EVAL_METHOD == 0) ? 1 : -1];
SB_FN sb_u32 sb_f32_bits(float x) { union { float f; sb_u32 u; } v; v.f = x; return v.u; }
SB_FN float sb_f32_from_bits(sb_u32 u) { union { float f; sb_u32 u; } v; v.u = u; return v.f; }
SB_FN sb_u64 sb_f64_bits(double x) { union { double f; sb_u64 u; } v; v.f = x; return v.u; }
SB_FN double sb_f64_from_bits(sb_u64 u) { union { double f; sb_u64 u; } v; v.u = u; return v.f; }
SB_FN double sb_sqrt(double x) { return __builtin_sqrt(x); }
SB_FN float sb_sqrtf(float x) { return __builtin_sqrtf(x); }
SB_FN sb_i32 sb_clz64(sb_u64 x) { return (sb_i32)__builtin_clzll(x); }
SB_FN double sb_u64_to_f64(sb_u64 x) { return (double)x; }
#endif

/* The one NaN every function returns (quiet, positive, no payload), so NaN bits agree too. */
#define SB_NAN_BITS 0x7fc00000u
SB_FN float sb_nanf(void) { return sb_f32_from_bits(SB_NAN_BITS); }
SB_FN float sb_inff(void) { return sb_f32_from_bits(0x7f800000u); }
SB_FN float sb_copysignf(float mag, float sgn)
{
  return sb_f32_from_bits((sb_f32_bits(mag) & 0x7fffffffu) | (sb_f32_bits(sgn) & 0x80000000u));
}
SB_FN double sb_with_sign(double y, sb_u32 xbits) { return (xbits >> 31) ? -y : y; }

/* Round to the nearest integer (ties to even) for |t| < 2^51. */
SB_FN double sb_rint(double t) { return (t + 0x1.8p52) - 0x1.8p52; }

/* 2^e for -1022 <= e <= 1023. */
SB_FN double sb_pow2(sb_i32 e) { return sb_f64_from_bits((sb_u64)(e + 1023) << 52); }

/* Horner evaluation of c[0] + c[1] u + ... + c[n-1] u^(n-1). */
SB_FN double sb_horner(const double *c, sb_i32 n, double u)
{
  double p = c[n - 1];
#if defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__) && !defined(__CUDACC_RTC__)
#pragma GCC unroll 16
#endif
  for (sb_i32 i = n - 2; i >= 0; i--) p = p * u + c[i];
  return p;
}

/* sb_horner(tab + row n, n, u), the coefficients read by index from the table (with a varying
 * row, a vectorising compiler gathers them; it does not gather through a row pointer). */
SB_FN double sb_horner_row(const double *tab, sb_i32 row, sb_i32 n, double u)
{
  double p = tab[row * n + n - 1];
#if defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__) && !defined(__CUDACC_RTC__)
#pragma GCC unroll 16
#endif
  for (sb_i32 i = n - 2; i >= 0; i--) p = p * u + tab[row * n + i];
  return p;
}

/* The input a vectorised lane evaluates: x, or `safe` (a value inside the kernel's domain) when
 * the lane is flagged for the scalar path. Written as a select so that loops stay branch-free. */
SB_FN float sb_lane_input(float x, sb_i32 flagged, float safe) { return flagged ? safe : x; }

/* c ? a : b (c is 0 or 1) by bit masks, for lanes that compute two kernels and keep one: with ?:
 * GCC moves the unselected kernel into a branch, and cannot if-convert the truncation that a
 * (double)(sb_i32) conversion becomes there, so the loop would not vectorise. */
SB_FN double sb_lane_select(sb_i32 c, double a, double b)
{
  sb_u64 mask = (sb_u64)0 - (sb_u64)c;
  return sb_f64_from_bits((sb_f64_bits(a) & mask) | (sb_f64_bits(b) & ~mask));
}

/* ==== BEGIN GENERATED TABLES (tools/gen_tables.py) ==== */
SB_CONST double sb_exp2_64_dd[128] = {
    0x1.0000000000000p+0, 0x0.0p+0,
    0x1.02c9a3e778061p+0, -0x1.19083535b085dp-56,
    0x1.059b0d3158574p+0, 0x1.d73e2a475b465p-55,
    0x1.0874518759bc8p+0, 0x1.186be4bb284ffp-57,
    0x1.0b5586cf9890fp+0, 0x1.8a62e4adc610bp-54,
    0x1.0e3ec32d3d1a2p+0, 0x1.03a1727c57b53p-59,
    0x1.11301d0125b51p+0, -0x1.6c51039449b3ap-54,
    0x1.1429aaea92de0p+0, -0x1.32fbf9af1369ep-54,
    0x1.172b83c7d517bp+0, -0x1.19041b9d78a76p-55,
    0x1.1a35beb6fcb75p+0, 0x1.e5b4c7b4968e4p-55,
    0x1.1d4873168b9aap+0, 0x1.e016e00a2643cp-54,
    0x1.2063b88628cd6p+0, 0x1.dc775814a8495p-55,
    0x1.2387a6e756238p+0, 0x1.9b07eb6c70573p-54,
    0x1.26b4565e27cddp+0, 0x1.2bd339940e9d9p-55,
    0x1.29e9df51fdee1p+0, 0x1.612e8afad1255p-55,
    0x1.2d285a6e4030bp+0, 0x1.0024754db41d5p-54,
    0x1.306fe0a31b715p+0, 0x1.6f46ad23182e4p-55,
    0x1.33c08b26416ffp+0, 0x1.32721843659a6p-54,
    0x1.371a7373aa9cbp+0, -0x1.63aeabf42eae2p-54,
    0x1.3a7db34e59ff7p+0, -0x1.5e436d661f5e3p-56,
    0x1.3dea64c123422p+0, 0x1.ada0911f09ebcp-55,
    0x1.4160a21f72e2ap+0, -0x1.ef3691c309278p-58,
    0x1.44e086061892dp+0, 0x1.89b7a04ef80d0p-59,
    0x1.486a2b5c13cd0p+0, 0x1.3c1a3b69062f0p-56,
    0x1.4bfdad5362a27p+0, 0x1.d4397afec42e2p-56,
    0x1.4f9b2769d2ca7p+0, -0x1.4b309d25957e3p-54,
    0x1.5342b569d4f82p+0, -0x1.07abe1db13cadp-55,
    0x1.56f4736b527dap+0, 0x1.9bb2c011d93adp-54,
    0x1.5ab07dd485429p+0, 0x1.6324c054647adp-54,
    0x1.5e76f15ad2148p+0, 0x1.ba6f93080e65ep-54,
    0x1.6247eb03a5585p+0, -0x1.383c17e40b497p-54,
    0x1.6623882552225p+0, -0x1.bb60987591c34p-54,
    0x1.6a09e667f3bcdp+0, -0x1.bdd3413b26456p-54,
    0x1.6dfb23c651a2fp+0, -0x1.bbe3a683c88abp-57,
    0x1.71f75e8ec5f74p+0, -0x1.16e4786887a99p-55,
    0x1.75feb564267c9p+0, -0x1.0245957316dd3p-54,
    0x1.7a11473eb0187p+0, -0x1.41577ee04992fp-55,
    0x1.7e2f336cf4e62p+0, 0x1.05d02ba15797ep-56,
    0x1.82589994cce13p+0, -0x1.d4c1dd41532d8p-54,
    0x1.868d99b4492edp+0, -0x1.fc6f89bd4f6bap-54,
    0x1.8ace5422aa0dbp+0, 0x1.6e9f156864b27p-54,
    0x1.8f1ae99157736p+0, 0x1.5cc13a2e3976cp-55,
    0x1.93737b0cdc5e5p+0, -0x1.75fc781b57ebcp-57,
    0x1.97d829fde4e50p+0, -0x1.d185b7c1b85d1p-54,
    0x1.9c49182a3f090p+0, 0x1.c7c46b071f2bep-56,
    0x1.a0c667b5de565p+0, -0x1.359495d1cd533p-54,
    0x1.a5503b23e255dp+0, -0x1.d2f6edb8d41e1p-54,
    0x1.a9e6b5579fdbfp+0, 0x1.0fac90ef7fd31p-54,
    0x1.ae89f995ad3adp+0, 0x1.7a1cd345dcc81p-54,
    0x1.b33a2b84f15fbp+0, -0x1.2805e3084d708p-57,
    0x1.b7f76f2fb5e47p+0, -0x1.5584f7e54ac3bp-56,
    0x1.bcc1e904bc1d2p+0, 0x1.23dd07a2d9e84p-55,
    0x1.c199bdd85529cp+0, 0x1.11065895048ddp-55,
    0x1.c67f12e57d14bp+0, 0x1.2884dff483cadp-54,
    0x1.cb720dcef9069p+0, 0x1.503cbd1e949dbp-56,
    0x1.d072d4a07897cp+0, -0x1.cbc3743797a9cp-54,
    0x1.d5818dcfba487p+0, 0x1.2ed02d75b3707p-55,
    0x1.da9e603db3285p+0, 0x1.c2300696db532p-54,
    0x1.dfc97337b9b5fp+0, -0x1.1a5cd4f184b5cp-54,
    0x1.e502ee78b3ff6p+0, 0x1.39e8980a9cc8fp-55,
    0x1.ea4afa2a490dap+0, -0x1.e9c23179c2893p-54,
    0x1.efa1bee615a27p+0, 0x1.dc7f486a4b6b0p-54,
    0x1.f50765b6e4540p+0, 0x1.9d3e12dd8a18bp-54,
    0x1.fa7c1819e90d8p+0, 0x1.74853f3a5931ep-55,
};
SB_CONST double sb_exp_q_coef[5] = {
    0x1.62e42fefa39efp-7, 0x1.ebfbdff82ac45p-15, 0x1.c6b08d70496bcp-23,
    0x1.3b2ad03eaad35p-31, 0x1.5d88127b9ea55p-40,
};
#define SB_INV_LN2_64_HI 0x1.7154765000000p+6
#define SB_INV_LN2_64_LO 0x1.5c17f0bbbe880p-25
#define SB_INV_LN2_64 0x1.71547652b82fep+6
#define SB_LOG2_10_64_HI 0x1.a934f09000000p+7
#define SB_LOG2_10_64_LO 0x1.e68dc57f24960p-23
#define SB_LN2_64_HI 0x1.62e42fefa0000p-7
#define SB_LN2_64_LO 0x1.cf79abc9e3b3ap-46
/* {r_i, -log(r_i) hi, lo}; entries i >= 128 stand for m/2 (so -log(2 r_i)) */
SB_CONST double sb_log_tab[768] = {
    0x1.0000000000000p+0, 0x0.0p+0, 0x0.0p+0,
    0x1.fd04800000000p-1, 0x1.7eddbebd889b4p-8, -0x1.651d8e27a9e81p-62,
    0x1.fb0c600000000p-1, 0x1.3e72d9d25a8fap-7, -0x1.ff100a698ec3bp-65,
    0x1.f918200000000p-1, 0x1.bcf9f6c74bdfdp-7, -0x1.e669ff6dcddebp-62,
    0x1.f727c00000000p-1, 0x1.1d8122b9f4209p-6, -0x1.c859400338055p-61,
    0x1.f53b400000000p-1, 0x1.5c44e91b8e4cbp-6, -0x1.b1929be842f0ep-60,
    0x1.f352600000000p-1, 0x1.9acf8751ce9bdp-6, -0x1.94a774cbd2df8p-61,
    0x1.f16d400000000p-1, 0x1.d91bfac548c76p-6, -0x1.be58397ed59f0p-62,
    0x1.ef8be00000000p-1, 0x1.0b94a8c19678fp-5, -0x1.25e42843162e7p-59,
    0x1.edae000000000p-1, 0x1.2a7f7221506b3p-5, 0x1.8f45948761990p-61,
    0x1.ebd3c00000000p-1, 0x1.494bd634dd635p-5, 0x1.e89169991470dp-59,
    0x1.e9fd200000000p-1, 0x1.67f960094bde0p-5, 0x1.f9f458d1606a2p-59,
    0x1.e82a000000000p-1, 0x1.8689b3084210fp-5, -0x1.dc0bab5221142p-61,
    0x1.e65a400000000p-1, 0x1.a4fe79fa3d39ep-5, -0x1.2833c39e6bef8p-62,
    0x1.e48e000000000p-1, 0x1.c3552d0923d6dp-5, -0x1.9ea1592ac7500p-60,
    0x1.e2c5200000000p-1, 0x1.e18f79c279baap-5, -0x1.e5be083b1db5ap-63,
    0x1.e0ff800000000p-1, 0x1.ffaf1519ba407p-5, 0x1.bb896e2f2264bp-60,
    0x1.df3d400000000p-1, 0x1.0ed8bab55477fp-4, -0x1.cefa57de4d68cp-58,
    0x1.dd7e600000000p-1, 0x1.1dcb16bdb19bcp-4, 0x1.bd7943d35ba85p-58,
    0x1.dbc2a00000000p-1, 0x1.2cb08ebf5f2a4p-4, 0x1.910455389907ep-63,
    0x1.da0a200000000p-1, 0x1.3b87dd0b1d8b4p-4, 0x1.5eeb74240b737p-60,
    0x1.d854e00000000p-1, 0x1.4a50cd2a1b055p-4, 0x1.7b3dac6b220e9p-59,
    0x1.d6a2c00000000p-1, 0x1.590c40df03439p-4, -0x1.88c14d10985dbp-59,
    0x1.d4f3a00000000p-1, 0x1.67bb1da6ec1f9p-4, -0x1.368f0cdcd9d5ap-58,
    0x1.d347a00000000p-1, 0x1.765c1bba6c170p-4, 0x1.9009d314282acp-58,
    0x1.d19ec00000000p-1, 0x1.84ef088e848abp-4, -0x1.374c708ea1ed3p-58,
    0x1.cff8c00000000p-1, 0x1.9375e65595edep-4, 0x1.0dce0322e68c6p-58,
    0x1.ce55c00000000p-1, 0x1.a1ef6c8062905p-4, -0x1.a1a79b792bf7ep-58,
    0x1.ccb5c00000000p-1, 0x1.b05b6abee461fp-4, -0x1.d3cfa2357d7bfp-59,
    0x1.cb18a00000000p-1, 0x1.bebace01472d3p-4, -0x1.6249c0634f7a8p-58,
    0x1.c97e600000000p-1, 0x1.cd0d6878c3a6fp-4, 0x1.ba5b0ce19b7ebp-58,
    0x1.c7e7200000000p-1, 0x1.db51ec987faeep-4, -0x1.a1897dcb0574bp-58,
    0x1.c652800000000p-1, 0x1.e98b8a9671a19p-4, 0x1.d25a563adc589p-58,
    0x1.c4c0c00000000p-1, 0x1.f7b7d6ec383c7p-4, 0x1.3c41dc9f6039ep-58,
    0x1.c331c00000000p-1, 0x1.02ebe2abf45bdp-3, 0x1.06a8f5b618d9bp-58,
    0x1.c1a5800000000p-1, 0x1.09f594ee723ecp-3, 0x1.f676c26324609p-58,
    0x1.c01c000000000p-1, 0x1.10f8ec22539f1p-3, 0x1.8f7ae28f480d3p-58,
    0x1.be95200000000p-1, 0x1.17f664cfca9e2p-3, -0x1.c507afb004e30p-57,
    0x1.bd11000000000p-1, 0x1.1eed56e2dcfe7p-3, -0x1.4f45c19da840fp-57,
    0x1.bb8f600000000p-1, 0x1.25ded36bc6ad9p-3, 0x1.4a9e35b73c1f9p-57,
    0x1.ba10600000000p-1, 0x1.2cca329f5f72bp-3, 0x1.7456a0e9f5ddbp-59,
    0x1.b894000000000p-1, 0x1.33af5f5770e8fp-3, 0x1.9946a78ff4495p-57,
    0x1.b71a200000000p-1, 0x1.3a8ed9931a954p-3, -0x1.e3f58e28234c3p-57,
    0x1.b5a2e00000000p-1, 0x1.4167f7b72866ap-3, -0x1.f07705ee5c57ep-63,
    0x1.b42e000000000p-1, 0x1.483bd0ce6e3edp-3, 0x1.293935070a0f8p-57,
    0x1.b2bba00000000p-1, 0x1.4f09bb8a233d0p-3, 0x1.689d76e2aac5fp-59,
    0x1.b14bc00000000p-1, 0x1.55d1a3c232dc9p-3, 0x1.4dd1762930909p-60,
    0x1.afde400000000p-1, 0x1.5c940cf597355p-3, 0x1.d6e8e6a46a8bcp-57,
    0x1.ae73200000000p-1, 0x1.6350e44aab83bp-3, -0x1.fbc4c6e97aba4p-58,
    0x1.ad0a800000000p-1, 0x1.6a077e0f7ae93p-3, -0x1.f3b6055f3b1b5p-62,
    0x1.aba4200000000p-1, 0x1.70b8f83a1aa77p-3, -0x1.ec255bdd9a57dp-58,
    0x1.aa40200000000p-1, 0x1.7764a768f23bep-3, 0x1.63f6e32fd4a2ap-57,
    0x1.a8de600000000p-1, 0x1.7e0b12a30c437p-3, 0x1.7e1b4619881dep-57,
    0x1.a77f000000000p-1, 0x1.84ab8d586581dp-3, 0x1.53c1d753b1147p-58,
    0x1.a621c00000000p-1, 0x1.8b473aa2373a1p-3, 0x1.fa87017fe2808p-57,
    0x1.a4c6e00000000p-1, 0x1.91dcd28340c3dp-3, 0x1.157cf2f28ca68p-57,
    0x1.a36e200000000p-1, 0x1.986d79e8194e6p-3, -0x1.4d5543b2c8d2bp-59,
    0x1.a217a00000000p-1, 0x1.9ef883676ad7bp-3, -0x1.d7c23c2edfc58p-59,
    0x1.a0c3600000000p-1, 0x1.a57ddcc244fa6p-3, -0x1.73c953f36f3c1p-60,
    0x1.9f71400000000p-1, 0x1.abfe116462766p-3, -0x1.d8ef82729d0bcp-58,
    0x1.9e21200000000p-1, 0x1.b279aea463af4p-3, -0x1.a9262e005913ap-58,
    0x1.9cd3400000000p-1, 0x1.b8ef678420c3bp-3, -0x1.3337a1c72a7bbp-58,
    0x1.9b87600000000p-1, 0x1.bf6067f0e5b98p-3, -0x1.1476fe6081a25p-57,
    0x1.9a3dc00000000p-1, 0x1.c5cb60c3af679p-3, -0x1.8ed73d5764f52p-59,
    0x1.98f6000000000p-1, 0x1.cc32200176692p-3, 0x1.03a4cfe251db0p-57,
    0x1.97b0600000000p-1, 0x1.d29355db6b3ecp-3, -0x1.404a32417ac74p-58,
    0x1.966cc00000000p-1, 0x1.d8ef922f31d5ep-3, 0x1.a03c9b4dd1ca3p-58,
    0x1.952b200000000p-1, 0x1.df46c50722d41p-3, 0x1.456188b71ce35p-57,
    0x1.93eb800000000p-1, 0x1.e598de5a87f10p-3, -0x1.a5f0594c44098p-58,
    0x1.92ade00000000p-1, 0x1.ebe5ce0dd94d4p-3, 0x1.ea1499f925ef3p-57,
    0x1.9172200000000p-1, 0x1.f22e2732f1c4ap-3, -0x1.7c0f2729dea59p-59,
    0x1.9038400000000p-1, 0x1.f871db09556adp-3, 0x1.0581da834d207p-57,
    0x1.8f00600000000p-1, 0x1.feb0367e6093fp-3, -0x1.470f8141f628fp-59,
    0x1.8dca600000000p-1, 0x1.0274e6f6c241cp-2, -0x1.d755a2162236ap-57,
    0x1.8c96400000000p-1, 0x1.058f49303ed0bp-2, 0x1.94df9596c5db3p-60,
    0x1.8b64000000000p-1, 0x1.08a73a67c57cfp-2, 0x1.d411af87e7c1cp-60,
    0x1.8a33a00000000p-1, 0x1.0bbcb310d2a47p-2, -0x1.b395efce19e49p-56,
    0x1.8905000000000p-1, 0x1.0ecffef657e06p-2, 0x1.c56a0956ab858p-56,
    0x1.87d8400000000p-1, 0x1.11e0c39ada458p-2, 0x1.06324eec37103p-57,
    0x1.86ad400000000p-1, 0x1.14ef4d3886df1p-2, 0x1.b27ca35f6b589p-57,
    0x1.8584000000000p-1, 0x1.17fb94e15097dp-2, 0x1.7458608426948p-56,
    0x1.845c800000000p-1, 0x1.1b05939f080c5p-2, 0x1.73e64ef213d20p-57,
    0x1.8336e00000000p-1, 0x1.1e0cedd371df4p-2, -0x1.ede8461a20bcap-56,
    0x1.8212e00000000p-1, 0x1.2112457861814p-2, -0x1.675bad04fa4abp-56,
    0x1.80f0a00000000p-1, 0x1.24153f1fd1925p-2, 0x1.1eda85c5a7835p-56,
    0x1.7fd0000000000p-1, 0x1.27162913f873dp-2, 0x1.e416d57492163p-57,
    0x1.7eb1200000000p-1, 0x1.2a14a75762d2fp-2, -0x1.3e8afae6cf2f3p-57,
    0x1.7d93e00000000p-1, 0x1.2d1108a509336p-2, 0x1.06eaf25cc6f65p-57,
    0x1.7c78600000000p-1, 0x1.300af0706354bp-2, 0x1.da318d2ab2a8bp-58,
    0x1.7b5e800000000p-1, 0x1.3302ade586881p-2, -0x1.04c7f53dd0563p-57,
    0x1.7a46400000000p-1, 0x1.35f83a89337dbp-2, 0x1.4018029ac8bd3p-57,
    0x1.792f800000000p-1, 0x1.38ebe6b8ed429p-2, 0x1.82f654f76d31cp-57,
    0x1.781a800000000p-1, 0x1.3bdcfe6b156ffp-2, -0x1.b5c0473bcd241p-56,
    0x1.7707000000000p-1, 0x1.3ecc290ef65e2p-2, -0x1.450ffb37e789dp-58,
    0x1.75f5000000000p-1, 0x1.41b960cce1370p-2, 0x1.7087451912a50p-56,
    0x1.74e4c00000000p-1, 0x1.44a3f0063d319p-2, -0x1.58b1e0173f7bep-56,
    0x1.73d5e00000000p-1, 0x1.478cd7b59b3e2p-2, 0x1.b7e1c4ce851e3p-58,
    0x1.72c8a00000000p-1, 0x1.4a7361eecfc16p-2, 0x1.eaf64d8cc51afp-56,
    0x1.71bce00000000p-1, 0x1.4d57e09efe723p-2, 0x1.b2f47aa38cecdp-56,
    0x1.70b2a00000000p-1, 0x1.503a4dccb2222p-2, 0x1.764f71aeff01ap-57,
    0x1.6fa9e00000000p-1, 0x1.531aa377eeff0p-2, -0x1.a53b7a75dfc46p-56,
    0x1.6ea2800000000p-1, 0x1.55f934fa4494ap-2, 0x1.bc7c317b5d5a1p-58,
    0x1.6d9cc00000000p-1, 0x1.58d549c6e0334p-2, 0x1.79843f2e60c1dp-56,
    0x1.6c98600000000p-1, 0x1.5baf8ecaa1bf1p-2, -0x1.c8f2a2f2e0324p-56,
    0x1.6b95800000000p-1, 0x1.5e87a48c296b6p-2, 0x1.d182a6b91a772p-56,
    0x1.6a94000000000p-1, 0x1.615ddf4bec15cp-2, 0x1.f2a4845682037p-56,
    0x1.6994000000000p-1, 0x1.6431df04451e0p-2, -0x1.fe78fe21b88e7p-56,
    0x1.6895400000000p-1, 0x1.6704534984a3ap-2, -0x1.da1aae9f07b9ap-57,
    0x1.6798000000000p-1, 0x1.69d4812a042acp-2, 0x1.bf0ced5ebf518p-56,
    0x1.669c400000000p-1, 0x1.6ca2626e357cdp-2, -0x1.e02561e076b64p-56,
    0x1.65a1c00000000p-1, 0x1.6f6ea818b2c01p-2, 0x1.5748d3c3eba09p-57,
    0x1.64a8a00000000p-1, 0x1.7238f18650aa8p-2, -0x1.368ed6d7002efp-56,
    0x1.63b0c00000000p-1, 0x1.7501954e2c66bp-2, 0x1.3106a9fc4e439p-57,
    0x1.62ba600000000p-1, 0x1.77c7d5e1bb928p-2, -0x1.a19460b58a51cp-56,
    0x1.61c5400000000p-1, 0x1.7a8c662cdf6bep-2, 0x1.faef5e47efe1ep-57,
    0x1.60d1800000000p-1, 0x1.7d4ee475eed4ap-2, 0x1.f37d7f4144965p-56,
    0x1.5fdf000000000p-1, 0x1.800fa83dc956dp-2, -0x1.80aab1bab9ae7p-59,
    0x1.5eede00000000p-1, 0x1.82ce4f3fe5404p-2, -0x1.78bfc2e5d741bp-56,
    0x1.5dfe000000000p-1, 0x1.858b31725d78bp-2, -0x1.4ac82f6226955p-56,
    0x1.5d0f600000000p-1, 0x1.884649e600baep-2, -0x1.ed06369956e6dp-57,
    0x1.5c22000000000p-1, 0x1.8aff93a661788p-2, -0x1.7160965fb58f4p-58,
    0x1.5b35e00000000p-1, 0x1.8db709b9e2d77p-2, -0x1.05d53baa10187p-58,
    0x1.5a4b200000000p-1, 0x1.906c4881c5263p-2, -0x1.9e1b4f13e639fp-58,
    0x1.5961800000000p-1, 0x1.932007fa355e3p-2, 0x1.0d4cec5549effp-57,
    0x1.5879200000000p-1, 0x1.95d1e4ba5cc12p-2, 0x1.3c10579810816p-57,
    0x1.5792000000000p-1, 0x1.9881d9b46b238p-2, 0x1.8cd41d8d63e11p-59,
    0x1.56ac000000000p-1, 0x1.9b304175a363fp-2, 0x1.cbd3c92f54240p-58,
    0x1.55c7400000000p-1, 0x1.9ddcb7c66e7abp-2, -0x1.1033c5d2e73a0p-56,
    0x1.54e3c00000000p-1, -0x1.25412854e4ccbp-2, -0x1.f75dd0d8c3a90p-57,
    0x1.5401600000000p-1, -0x1.229843def6f49p-2, 0x1.01ac2d1ab94d6p-58,
    0x1.5320200000000p-1, -0x1.1ff0ff1cf47a7p-2, 0x1.c4aebfbbe965bp-56,
    0x1.5240200000000p-1, -0x1.1d4bbf596b9d4p-2, 0x1.d811a204d1cdap-57,
    0x1.5161400000000p-1, -0x1.1aa828a38c4a2p-2, 0x1.790f9776de597p-56,
    0x1.5083800000000p-1, -0x1.18063f6f17f4bp-2, 0x1.fd3e68d7e3495p-57,
    0x1.4fa6e00000000p-1, -0x1.1566083455abbp-2, -0x1.32e53d9fef4c1p-56,
    0x1.4ecb600000000p-1, -0x1.12c7877007059p-2, -0x1.8528c3c68409dp-56,
    0x1.4df1000000000p-1, -0x1.102ac1a35cc1ap-2, -0x1.08808b509133ep-59,
    0x1.4d17c00000000p-1, -0x1.0d8fbb53eb1d9p-2, -0x1.b22202c3e27c2p-56,
    0x1.4c3fa00000000p-1, -0x1.0af6790b9ddedp-2, 0x1.ede250a4da1d5p-59,
    0x1.4b68800000000p-1, -0x1.085e9c78ae13fp-2, 0x1.5e72970813644p-57,
    0x1.4a92800000000p-1, -0x1.05c88c8d95036p-2, 0x1.8993f6313ad1dp-56,
    0x1.49bda00000000p-1, -0x1.03344de105852p-2, -0x1.dedde9b43059bp-56,
    0x1.48e9e00000000p-1, -0x1.00a1e50dd9d3ep-2, -0x1.b7ea0a3361610p-58,
    0x1.4817200000000p-1, -0x1.fc21e5a61eae7p-3, 0x1.e6e8e3260d047p-58,
    0x1.4745600000000p-1, -0x1.f702f62777938p-3, -0x1.eb56dff3240efp-58,
    0x1.4674a00000000p-1, -0x1.f1e7036df7aa0p-3, -0x1.90dbf3320a9efp-57,
    0x1.45a5000000000p-1, -0x1.eccede8fe7a46p-3, 0x1.93636d7c4e782p-58,
    0x1.44d6800000000p-1, -0x1.e7ba90eb75dd1p-3, -0x1.21315f9c40d21p-59,
    0x1.4408e00000000p-1, -0x1.e2a88f66b29dep-3, 0x1.3cff807148cd9p-57,
    0x1.433c400000000p-1, -0x1.dd99ab2f6c6a2p-3, -0x1.71ad86be2bca7p-57,
    0x1.4270c00000000p-1, -0x1.d88eb77b2ef64p-3, -0x1.606baeebe2fa7p-58,
    0x1.41a6200000000p-1, -0x1.d38626471e445p-3, 0x1.c580d78885e59p-58,
    0x1.40dca00000000p-1, -0x1.ce819697f0e74p-3, -0x1.152291a315c3ap-57,
    0x1.4014000000000p-1, -0x1.c97f7879d44acp-3, -0x1.61a81c3c19c3dp-57,
    0x1.3f4c600000000p-1, -0x1.c4809fc05c8c1p-3, -0x1.d30037e0d134ep-58,
    0x1.3e85c00000000p-1, -0x1.bf85148675527p-3, 0x1.1c989d4959735p-57,
    0x1.3dc0200000000p-1, -0x1.ba8cdeee4952ep-3, -0x1.9258663528dc0p-57,
    0x1.3cfb600000000p-1, -0x1.b59738613a947p-3, -0x1.dd2b6004ac259p-57,
    0x1.3c37a00000000p-1, -0x1.b0a4f6cfc0a21p-3, -0x1.283cc6fe71c79p-58,
    0x1.3b74c00000000p-1, -0x1.abb552b169353p-3, 0x1.b59700645bff0p-57,
    0x1.3ab2e00000000p-1, -0x1.a6c92304b6e75p-3, -0x1.40b3d94965698p-59,
    0x1.39f1e00000000p-1, -0x1.a1df9f4f1b2aap-3, -0x1.a1bec12c1fc78p-57,
    0x1.3931e00000000p-1, -0x1.9cf99f9ce0a0cp-3, 0x1.e1a7d43d95cb0p-57,
    0x1.3872c00000000p-1, -0x1.98165a811a4abp-3, -0x1.770edd801a9afp-58,
    0x1.37b4800000000p-1, -0x1.9335d6d5948a8p-3, 0x1.478eea7052f97p-57,
    0x1.36f7400000000p-1, -0x1.8e58ee3ac0a1ep-3, -0x1.bdc471f02bb73p-57,
    0x1.363ac00000000p-1, -0x1.897e0297b133dp-3, 0x1.bc7460ff3150fp-60,
    0x1.357f400000000p-1, -0x1.84a6c0d9f50d4p-3, -0x1.ffab5ebe97b85p-57,
    0x1.34c4a00000000p-1, -0x1.7fd25d359954fp-3, 0x1.ac0c3e649998bp-60,
    0x1.340ae00000000p-1, -0x1.7b00dea513b3dp-3, 0x1.fa7b98a3532fap-58,
    0x1.3351e00000000p-1, -0x1.763176e933595p-3, 0x1.c2755cc532517p-57,
    0x1.3299e00000000p-1, -0x1.7165d70913985p-3, -0x1.70f90d2365fabp-57,
    0x1.31e2c00000000p-1, -0x1.6c9d31520390dp-3, 0x1.3ef5b8cb061a5p-58,
    0x1.312c600000000p-1, -0x1.67d6b61784cfbp-3, 0x1.5115c2a511793p-57,
    0x1.3076e00000000p-1, -0x1.6313423333885p-3, 0x1.3f5527c687d25p-57,
    0x1.2fc2400000000p-1, -0x1.5e52dcc4bfb35p-3, 0x1.1af90244cf2c4p-57,
    0x1.2f0e800000000p-1, -0x1.59958cf1d52e8p-3, -0x1.f4d1236bf5a5fp-57,
    0x1.2e5b800000000p-1, -0x1.54da81260f839p-3, 0x1.0225a2df99a76p-57,
    0x1.2da9600000000p-1, -0x1.50229852f6794p-3, 0x1.a0c9003c182a3p-60,
    0x1.2cf8200000000p-1, -0x1.4b6dd9afdf6f5p-3, -0x1.3c7e91f5069fap-57,
    0x1.2c47800000000p-1, -0x1.46ba97f9f3ec6p-3, 0x1.d4336c1545846p-58,
    0x1.2b97e00000000p-1, -0x1.420b67b40f2c0p-3, -0x1.fd81b8cfa15f3p-59,
    0x1.2ae9000000000p-1, -0x1.3d5e9b26b969bp-3, -0x1.9dd151cf47c9fp-57,
    0x1.2a3ae00000000p-1, -0x1.38b4382025c8dp-3, -0x1.e1c7259f82c51p-57,
    0x1.298d800000000p-1, -0x1.340c447411275p-3, -0x1.1810f5636dc6ep-59,
    0x1.28e1000000000p-1, -0x1.2f67a2bbc04f2p-3, 0x1.9f75cb6e39304p-57,
    0x1.2835400000000p-1, -0x1.2ac57d15f549dp-3, -0x1.9a14b49e45857p-58,
    0x1.278a400000000p-1, -0x1.2625d966ddf1ep-3, -0x1.d3a278d84f5fcp-57,
    0x1.26e0000000000p-1, -0x1.2188bd9806263p-3, 0x1.f29fb75abd153p-60,
    0x1.2636a00000000p-1, -0x1.1cef0e585286dp-3, 0x1.dcfe734e2d596p-59,
    0x1.258de00000000p-1, -0x1.1857149bec4f1p-3, -0x1.1f70d307c8a34p-59,
    0x1.24e6000000000p-1, -0x1.13c2945c38e33p-3, 0x1.fd223a132feb1p-57,
    0x1.243ec00000000p-1, -0x1.0f2fd497cdfb5p-3, 0x1.a8091e861d8c4p-59,
    0x1.2398600000000p-1, -0x1.0aa09b5266bf8p-3, -0x1.8cf73086a422cp-57,
    0x1.22f2a00000000p-1, -0x1.06132d94d4587p-3, -0x1.3029704e15831p-59,
    0x1.224da00000000p-1, -0x1.018871acf3c4ep-3, -0x1.499a9162e4028p-61,
    0x1.21a9800000000p-1, -0x1.fa029fdb52370p-4, 0x1.9c86ed7b448b2p-58,
    0x1.2105e00000000p-1, -0x1.f0f64f5d94cc0p-4, 0x1.5ed1c9e20da0bp-63,
    0x1.2063200000000p-1, -0x1.e7f14b9a32b8bp-4, -0x1.a6221acae28fap-60,
    0x1.1fc1000000000p-1, -0x1.def014d4622b1p-4, 0x1.4a97c0171e173p-58,
    0x1.1f1fa00000000p-1, -0x1.d5f47cd91b47dp-4, -0x1.686c3c1107998p-60,
    0x1.1e7f000000000p-1, -0x1.ccfe8ffee0860p-4, -0x1.18616de4085eep-59,
    0x1.1ddf000000000p-1, -0x1.c40c9025a04e9p-4, -0x1.e2b64d030a547p-61,
    0x1.1d3fc00000000p-1, -0x1.bb205236d3cecp-4, 0x1.4a6bae45134a5p-59,
    0x1.1ca1400000000p-1, -0x1.b239e2a52e07cp-4, 0x1.8ec2f423e38dep-59,
    0x1.1c03600000000p-1, -0x1.a957806caa445p-4, -0x1.6bb6ecf5f6af7p-58,
    0x1.1b66200000000p-1, -0x1.a079351277c97p-4, -0x1.0c9b4039cb001p-58,
    0x1.1ac9a00000000p-1, -0x1.97a0d9a4ca8b7p-4, -0x1.4485d51952ff5p-60,
    0x1.1a2dc00000000p-1, -0x1.8eccaa3aeb5e0p-4, 0x1.cde36812ba12cp-60,
    0x1.1992800000000p-1, -0x1.85fcb07500686p-4, 0x1.bc4fa08516cdep-60,
    0x1.18f8000000000p-1, -0x1.7d32c87c261c9p-4, 0x1.d43b93e04c5dep-58,
    0x1.185e200000000p-1, -0x1.746d2b82208dfp-4, -0x1.58df349c73df8p-61,
    0x1.17c5000000000p-1, -0x1.6badb7c187e6ep-4, 0x1.85c7d85f0de99p-60,
    0x1.172c800000000p-1, -0x1.62f2a47d70ff1p-4, -0x1.c8f5df1685448p-59,
    0x1.1694800000000p-1, -0x1.5a3a2501ab233p-4, -0x1.ce2f09ca32e77p-58,
    0x1.15fd400000000p-1, -0x1.5187ef225f07ep-4, 0x1.8ca53efb05a80p-58,
    0x1.1566a00000000p-1, -0x1.48da373c2d54dp-4, -0x1.cbbc27d9af470p-59,
    0x1.14d0c00000000p-1, -0x1.4032e0b40ef86p-4, -0x1.16534840aad16p-58,
    0x1.143b600000000p-1, -0x1.378e437748082p-4, 0x1.ce3e9afbc2194p-61,
    0x1.13a6a00000000p-1, -0x1.2eee41fb40298p-4, 0x1.c24908a498ad9p-60,
    0x1.1312800000000p-1, -0x1.2652e63d8a057p-4, -0x1.d2f5816fef0ecp-58,
    0x1.127f000000000p-1, -0x1.1dbc3a43cac43p-4, -0x1.055e475d7f782p-59,
    0x1.11ec400000000p-1, -0x1.152c269bb0254p-4, -0x1.c847cac4c8a1cp-60,
    0x1.115a000000000p-1, -0x1.0c9ef95ac20f7p-4, 0x1.56ebd78474341p-59,
    0x1.10c8600000000p-1, -0x1.04169a1e6fb23p-4, -0x1.49935dcbc3c32p-58,
    0x1.1037400000000p-1, -0x1.f7226317f5592p-5, 0x1.933125127e5e3p-59,
    0x1.0fa6e00000000p-1, -0x1.e62517a0b5761p-5, -0x1.c8b4d0609ac81p-63,
    0x1.0f17000000000p-1, -0x1.d52dde4059c5fp-5, -0x1.11d5675a72deap-59,
    0x1.0e87c00000000p-1, -0x1.c4408e6f6bb0dp-5, -0x1.dc0b67b983105p-60,
    0x1.0df9200000000p-1, -0x1.b35d3cb58a29bp-5, 0x1.5a84741d6a178p-59,
    0x1.0d6b200000000p-1, -0x1.a283fda92fa4ap-5, -0x1.a4e5e1ceab6eep-59,
    0x1.0cdda00000000p-1, -0x1.91b116efd5922p-5, 0x1.123cfb6a30ee2p-60,
    0x1.0c50c00000000p-1, -0x1.80e8683d84f9cp-5, 0x1.fce3549f33e82p-59,
    0x1.0bc4600000000p-1, -0x1.702633550e5fbp-5, 0x1.f133250e84da8p-61,
    0x1.0b38a00000000p-1, -0x1.5f6e5c078ef33p-5, -0x1.95feb96026b13p-59,
    0x1.0aad800000000p-1, -0x1.4ec0f734928cbp-5, 0x1.2983ff55b5300p-59,
    0x1.0a22e00000000p-1, -0x1.3e1a40ca01f52p-5, 0x1.842876e934bc7p-59,
    0x1.0998c00000000p-1, -0x1.2d7a47c3c434dp-5, 0x1.cb6dea62b793bp-59,
    0x1.090f400000000p-1, -0x1.1ce4f82bc17a9p-5, 0x1.c54046ba0fba2p-59,
    0x1.0886600000000p-1, -0x1.0c5a6719d788fp-5, -0x1.3e1c971d5a67bp-59,
    0x1.07fe000000000p-1, -0x1.f7ad9167647d6p-6, 0x1.d264f338f9be1p-61,
    0x1.0776200000000p-1, -0x1.d6b45859724aep-6, 0x1.abedac977b591p-60,
    0x1.06eec00000000p-1, -0x1.b5c9418b60d84p-6, -0x1.357381ed80fa7p-63,
    0x1.0668000000000p-1, -0x1.94f4399a17c75p-6, -0x1.dac1798dbc074p-60,
    0x1.05e1e00000000p-1, -0x1.74356b3cea95ap-6, -0x1.325d7e14cd1d7p-61,
    0x1.055c200000000p-1, -0x1.537d5545f1aa8p-6, -0x1.9b24235f9d091p-61,
    0x1.04d7000000000p-1, -0x1.32dbbea131f02p-6, 0x1.a6f8d0a65c38ap-60,
    0x1.0452600000000p-1, -0x1.1248f4550782bp-6, -0x1.8048f30e77d0bp-62,
    0x1.03ce400000000p-1, -0x1.e38a2b032bac8p-7, 0x1.1b2e1f1e8f7cap-61,
    0x1.034ac00000000p-1, -0x1.a2b04ec1459dep-7, -0x1.a661427282f11p-62,
    0x1.02c7a00000000p-1, -0x1.61e5028b4dd05p-7, -0x1.d84654e8a555bp-65,
    0x1.0245200000000p-1, -0x1.21482539ea208p-7, 0x1.b52f7ee1d5393p-61,
    0x1.01c3200000000p-1, -0x1.c19453b0ab0b9p-8, 0x1.c681f85c5e247p-63,
    0x1.0141a00000000p-1, -0x1.40d69f4725fe0p-8, -0x1.13f13476a1d15p-70,
    0x1.00c0a00000000p-1, -0x1.80af5827a723dp-9, -0x1.611ec44616b91p-67,
    0x1.0000000000000p-1, 0x0.0p+0, 0x0.0p+0,
};
SB_CONST double sb_log1p_p[7] = {
    -0x1.0000000000000p-1, 0x1.5555555555556p-2, -0x1.0000000000001p-2,
    0x1.99999998d1b4bp-3, -0x1.55555554a16dbp-3, 0x1.2493d826440bep-3,
    -0x1.0001671b26ccap-3,
};
#define SB_LN2_HI 0x1.62e42fefa3800p-1
#define SB_LN2_LO 0x1.ef35793c76730p-45
#define SB_INV_LN2 0x1.71547652b82fep+0
#define SB_INV_LN10 0x1.bcb7b1526e50ep-2
SB_CONST double sb_sin_s[8] = {
    -0x1.5555555555555p-3, 0x1.1111111111111p-7, -0x1.a01a01a01a019p-13,
    0x1.71de3a556c2bap-19, -0x1.ae64567e70e27p-26, 0x1.61245fb21e813p-33,
    -0x1.ae7c5016c2d46p-41, 0x1.9240e323ae8b8p-49,
};
SB_CONST double sb_cos_c[9] = {
    -0x1.0000000000000p-1, 0x1.5555555555555p-5, -0x1.6c16c16c16c17p-10,
    0x1.a01a01a01a018p-16, -0x1.27e4fb7789a9ep-22, 0x1.1eed8efedc282p-29,
    -0x1.939748a51b0b5p-37, 0x1.ae7c333fd95f3p-45, -0x1.6586b73be9c59p-53,
};
#define SB_PIO2_1 0x1.921fb54440000p+0
#define SB_PIO2_2 0x1.68c234c4c0000p-39
#define SB_PIO2_3 0x1.98a2e03707345p-77
#define SB_PIO2_HI 0x1.921fb54442d18p+0
#define SB_PIO2_LO 0x1.1a62633145c07p-54
#define SB_TWO_OVER_PI 0x1.45f306dc9c883p-1
SB_CONST sb_u32 sb_two_over_pi_words[12] = {
    0x00000000u, 0xa2f9836eu, 0x4e441529u, 0xfc2757d1u, 0xf534ddc0u, 0xdb629599u,
    0x3c439041u, 0xfe5163abu, 0xdebbc561u, 0xb7246e3au, 0x424dd2e0u, 0x06492eeau,
};
SB_CONST double sb_atan_tab[34] = {
    0x0.0p+0, 0x0.0p+0,
    0x1.ff55bb72cfdeap-5, -0x1.c934d86d23f1dp-60,
    0x1.fd5ba9aac2f6ep-4, -0x1.cd37686760c17p-59,
    0x1.7b97b4bce5b02p-3, 0x1.347b0b4f881cap-58,
    0x1.f5b75f92c80ddp-3, 0x1.8ab6e3cf7afbdp-57,
    0x1.362773707ebccp-2, -0x1.963a544b672d8p-57,
    0x1.6f61941e4def1p-2, -0x1.c63aae6f6e918p-56,
    0x1.a64eec3cc23fdp-2, -0x1.24dec1b50b7ffp-56,
    0x1.dac670561bb4fp-2, 0x1.a2b7f222f65e2p-56,
    0x1.0657e94db30d0p-1, -0x1.d5b495f6349e6p-56,
    0x1.1e00babdefeb4p-1, -0x1.928df287a668fp-58,
    0x1.345f01cce37bbp-1, 0x1.1021137c71102p-55,
    0x1.4978fa3269ee1p-1, 0x1.2419a87f2a458p-56,
    0x1.5d58987169b18p-1, 0x1.0028e4bc5e7cap-57,
    0x1.700a7c5784634p-1, -0x1.8c34d25aadef6p-56,
    0x1.819d0b7158a4dp-1, -0x1.bf76229d3b917p-56,
    0x1.921fb54442d18p-1, 0x1.1a62633145c07p-55,
};
SB_CONST double sb_atan_a[6] = {
    -0x1.5555555555555p-2, 0x1.999999999999ap-3, -0x1.24924924920dbp-3,
    0x1.c71c71bf4e731p-4, -0x1.745cdbfafa213p-4, 0x1.3a44054c3f8c7p-4,
};
SB_CONST double sb_erf_e[12] = {
    0x1.20dd750429b6dp+0, -0x1.812746b0379e7p-2, 0x1.ce2f21a042be2p-4,
    -0x1.b82ce31288b4ep-6, 0x1.565bcd0e6a387p-8, -0x1.c02db4002d265p-11,
    0x1.f9a326f0e22dep-14, -0x1.f4d2599d0a165p-17, 0x1.b9e644282c75dp-20,
    -0x1.5f629a47e1656p-23, 0x1.f9d3dea464774p-27, -0x1.2d3aacffc2004p-30,
};
#define SB_ERFC_DEG 13
/* coefficients of g(c_k + t), lowest degree first, c_k = 0.625 + k/4 */
SB_CONST double sb_erfc_g[546] = {
    0x1.1d16b5809eaf6p-1, -0x1.babd0e4f1a24dp-2, 0x1.2577420fcd07dp-2,
    -0x1.59c35c06f7ffep-3, 0x1.72d46a9b3f165p-4, -0x1.6fce5df0ba15ep-5,
    0x1.552fe6ffdeb0fp-6, -0x1.2a7f4fb794306p-7, 0x1.efd03d10f7ac6p-9,
    -0x1.88ef9a04d0a19p-10, 0x1.2a69625e9a574p-11, -0x1.b3e48618f56fbp-13,
    0x1.34f8a4a18a180p-14, -0x1.a4d0573fb9b44p-16, 0x1.db747ee409ac5p-2,
    -0x1.4369f60195edcp-2, 0x1.80ef8f454cf88p-3, -0x1.9d5868de0b581p-4,
    0x1.9831c2c850081p-5, -0x1.779dd2a3da265p-6, 0x1.452648d612d72p-7,
    -0x1.0ab3832b8b5dfp-8, 0x1.a0ef7f72b6698p-10, -0x1.37fe711139064p-11,
    0x1.c0b1e01cd722fp-13, -0x1.3709745c45a57p-14, 0x1.a32a96f5de262p-16,
    -0x1.10079ffdcee25p-17, 0x1.9531e09b149b5p-2, -0x1.e78b356770fbbp-3,
    0x1.05e72521ca1b8p-3, -0x1.01343a2c92265p-4, 0x1.d4e711a2df9a8p-6,
    -0x1.910a5d7c0a738p-7, 0x1.446c5166bcf97p-8, -0x1.f38c6d04fd9ffp-10,
    0x1.6fd9a5d60f879p-11, -0x1.041e390adbe24p-12, 0x1.6273304c075abp-14,
    -0x1.d2b1c60efe83dp-16, 0x1.2b1ce998b18e1p-17, -0x1.72278937bbc96p-19,
    0x1.5f88f52f3c76bp-2, -0x1.797a639d8129dp-3, 0x1.701342cbcea7bp-4,
    -0x1.4bcdb9d9083c2p-5, 0x1.17eba60d31fd9p-6, -0x1.bdf24bccac627p-8,
    0x1.51ab9ffcdc60ep-9, -0x1.e8ae68b41256bp-11, 0x1.535f583c45bfbp-12,
    -0x1.c5fa6b4faa7edp-14, 0x1.254e1b3fce6dfp-15, -0x1.6f055a0011209p-17,
    0x1.bfca2adc23768p-19, -0x1.08501dcd1644dp-20, 0x1.3583f6644327bp-2,
    -0x1.2b11e6959934cp-3, 0x1.0a15ac2adab35p-4, -0x1.ba018e6428103p-6,
    0x1.5a142948a9b3ap-7, -0x1.014eae28304b3p-8, 0x1.6d609f6aa9705p-10,
    -0x1.f1b43d3aafd44p-12, 0x1.465ecd4230b08p-13, -0x1.9d62285c6e3f4p-15,
    0x1.fafb8a2f14265p-17, -0x1.2db32b19eb814p-18, 0x1.5e9ed25fee818p-20,
    -0x1.8b1ab15e88ceep-22, 0x1.13e5743b60480p-2, -0x1.e36580c7f734ap-4,
    0x1.8a6efeed233adp-5, -0x1.2ef92f6f10797p-6, 0x1.b99589d40f244p-8,
    -0x1.33237c3eeacf2p-9, 0x1.99b60e42d7894p-11, -0x1.070e0cb5df686p-12,
    0x1.4631c4d1ecdf6p-14, -0x1.87a61e65ef5c8p-16, 0x1.c8588521f5818p-18,
    -0x1.0285d0e551559p-19, 0x1.1e6a8b4e3be69p-21, -0x1.344d4615bc580p-23,
    0x1.f0fd28fdc20abp-3, -0x1.8d6f73d5aa121p-4, 0x1.2adaf7aaf55e1p-5,
    -0x1.aa2443aac74b2p-7, 0x1.21decee0edf8fp-8, -0x1.7a181925bb091p-10,
    0x1.dab55d6f5eba0p-12, -0x1.1fc8912a679dcp-13, 0x1.51e0867e7f088p-15,
    -0x1.8104949cd6d31p-17, 0x1.aaac8061f0c65p-19, -0x1.cca424140875dp-21,
    0x1.e6f24cbf819d9p-23, -0x1.f5105b5cb034ep-25, 0x1.c3987d04d0b98p-3,
    -0x1.4baeac94dc8b2p-4, 0x1.cdc880a056a24p-6, -0x1.32a8abc8db398p-7,
    0x1.8680d28749382p-9, -0x1.deb45e9cfe682p-11, 0x1.1b649b9ad946dp-12,
    -0x1.44f8e8c28356dp-14, 0x1.69c345b2589f0p-16, -0x1.87bc535e936bfp-18,
    0x1.9d575f7e032c0p-20, -0x1.a9a2ee5d845c0p-22, 0x1.adb6bffab16b0p-24,
    -0x1.a7088ddd5d98ep-26, 0x1.9d7738e1f4db7p-3, -0x1.18737afe106cep-4,
    0x1.6afd3ba3fa642p-6, -0x1.c28dd3c4d6775p-8, 0x1.0d40a2ab36977p-9,
    -0x1.36e9940d2f685p-11, 0x1.5bd1dd62fbb18p-13, -0x1.79dac38104363p-15,
    0x1.8f69346ad1173p-17, -0x1.9b86209894022p-19, 0x1.9de9c91b0c9e4p-21,
    -0x1.96f548908d728p-23, 0x1.88c3196ae3b0ep-25, -0x1.723b97eb269fcp-27,
    0x1.7d0a5e9dd5710p-3, -0x1.dfc0205709b2cp-5, 0x1.21c23afa33c47p-6,
    -0x1.512f92fca6d77p-8, 0x1.7b404aa4decc7p-10, -0x1.9d6f22275e1d4p-12,
    0x1.b5d78b2dba277p-14, -0x1.c35c651db2c1dp-16, 0x1.c5b48a10c5a4dp-18,
    -0x1.bd5eb18f6a538p-20, 0x1.ab812e5fe5783p-22, -0x1.91be8360bb868p-24,
    0x1.7304e235a42b5p-26, -0x1.4f2c8fbba9e0dp-28, 0x1.612a8125451bdp-3,
    -0x1.9e8803e177224p-5, 0x1.d503e1d20090ep-7, -0x1.009a927223b07p-8,
    0x1.104973fea3350p-10, -0x1.18d46547b4602p-12, 0x1.1a12c4a34b9bcp-14,
    -0x1.146359dc03553p-16, 0x1.089499c47b584p-18, -0x1.ef88f00a6e467p-21,
    0x1.c679fc89b42f7p-23, -0x1.98a6b14310b57p-25, 0x1.697e37143635cp-27,
    -0x1.393fe0b6489eap-29, 0x1.48f8f10299b71p-3, -0x1.696d353f008b5p-5,
    0x1.804cc15714188p-7, -0x1.8c84c13afb9c4p-9, 0x1.8de5f26a7e652p-11,
    -0x1.8511846d9fc64p-13, 0x1.7350e39ffd3bfp-15, -0x1.5a61388c070e0p-17,
    0x1.3c3b6fadb1f69p-19, -0x1.1ae04139c5891p-21, 0x1.f05ab9d529e8ap-24,
    -0x1.ab7eefbaf27bep-26, 0x1.6a971f213b9fdp-28, -0x1.2da897ad828aap-30,
    0x1.33cb19179d7f6p-3, -0x1.3dacc8d85f6c4p-5, 0x1.3e68313870541p-7,
    -0x1.36992d37bc011p-9, 0x1.276b01ef6f988p-11, -0x1.1267afc4c5926p-13,
    0x1.f28b1c36854cdp-16, -0x1.bb73ad92e3885p-18, 0x1.82a91baba4a29p-20,
    -0x1.4acfbac06c6a8p-22, 0x1.15f5cac692ee5p-24, -0x1.cb1c08a08e28dp-27,
    0x1.75be63591e334p-29, -0x1.2acc32bbfbc1dp-31, 0x1.211c625924e34p-3,
    -0x1.193eb7b9bf564p-5, 0x1.0a7a05d3387a8p-7, -0x1.ecb581c2b7f7ep-10,
    0x1.bd21af8e75e66p-12, -0x1.8985979e24d14p-14, 0x1.54d6c39c0ba6ep-16,
    -0x1.218709b22a3a0p-18, 0x1.e2df91c17e09fp-21, -0x1.8ba1c0c691226p-23,
    0x1.3ebc408fabee7p-25, -0x1.f9588a4420dd4p-28, 0x1.8b3b927363144p-30,
    -0x1.2feaaba0c5d6bp-32, 0x1.10845e1dcb19ap-3, -0x1.f53cfd5c11186p-6,
    0x1.c21d6f4a4921ap-8, -0x1.8b46c64f91e7bp-10, 0x1.53e39641d5556p-12,
    -0x1.1e807be458fdep-14, 0x1.d9f64543bb0e5p-17, -0x1.810db87aba647p-19,
    0x1.33807c17a300ep-21, -0x1.e325202ac3f13p-24, 0x1.75a20d38ad666p-26,
    -0x1.1c9c9d1bab2a0p-28, 0x1.ac22d13bb67eep-31, -0x1.3cf008d9f36ecp-33,
    0x1.01afcc22e71b8p-3, -0x1.c14b6f7f3c2f0p-6, 0x1.7f51652a46399p-8,
    -0x1.406f090aa4007p-10, 0x1.06bf9a3516c8bp-12, -0x1.a712d1a0f43f3p-15,
    0x1.4eb8a60b621f2p-17, -0x1.0471a4a6dee70p-19, 0x1.8ee2cfaa00aadp-22,
    -0x1.2cd287c62f7fbp-24, 0x1.bf1cf06257c02p-27, -0x1.479ad3f22ba27p-29,
    0x1.da63bf1245b8cp-32, -0x1.5261686411db9p-34, 0x1.e8b725e90fb8dp-4,
    -0x1.94e4c65b27fd6p-6, 0x1.48ea08fa97bd8p-8, -0x1.0641d50f05c2bp-10,
    0x1.9adeaa139146ep-13, -0x1.3c748962b0492p-15, 0x1.dfa9cd0f8f49ap-18,
    -0x1.65f119eae7d31p-20, 0x1.072c1c6168ec0p-22, -0x1.7d80b29159a0ep-25,
    0x1.10be0e0d72025p-27, -0x1.80d65dd9c50c1p-30, 0x1.0c7930ab22e71p-32,
    -0x1.715ea6ed550cdp-35, 0x1.d0a2236d493eap-4, -0x1.6ea9db64452a6p-6,
    0x1.1c3200b14f2f0p-8, -0x1.b1138bae636d6p-11, 0x1.44a17930a985bp-13,
    -0x1.df2332f43db90p-16, 0x1.5c5596d37ef67p-18, -0x1.f33ef816aca6dp-21,
    0x1.60d9bd2f298b3p-23, -0x1.ec27d1fd51a04p-26, 0x1.52d626b103ef2p-28,
    -0x1.ccc9f19aa71cfp-31, 0x1.3606c407d3573p-33, -0x1.9bb64243f3aa7p-36,
    0x1.bac6ca42e1bfbp-4, -0x1.4d86dc544600bp-6, 0x1.ee3ffedd01da2p-9,
    -0x1.687d168ebc146p-11, 0x1.02fdcfb107006p-13, -0x1.6ecb6c3227cadp-16,
    0x1.00254409900f8p-18, -0x1.60fd095a8a913p-21, 0x1.e032a0badc0cdp-24,
    -0x1.429282c8b0a59p-26, 0x1.ac2c244dbd2e2p-29, -0x1.18de1054081c3p-31,
    0x1.6cd54c4aad2c9p-34, -0x1.d40c58a76d0dfp-37, 0x1.a6dab49575b6dp-4,
    -0x1.30a0ebefa7ff4p-6, 0x1.b04ef16d7ef9bp-9, -0x1.2e52cf81e3f52p-11,
    0x1.a0faa96f4a848p-14, -0x1.1bb8488e4b686p-16, 0x1.7d2054ab8ca16p-19,
    -0x1.f99c8c377deffp-22, 0x1.4b5933b3312f2p-24, -0x1.ad3dbe3b266f4p-27,
    0x1.12e48c5efa560p-29, -0x1.5c3d69c20e3e2p-32, 0x1.b50a05d4e23b7p-35,
    -0x1.0f0c49090dcfep-37, 0x1.949fbeb63d761p-4, -0x1.1748bb019ff2dp-6,
    0x1.7c2ef77e9114dp-9, -0x1.fe9e2a1afd5bep-12, 0x1.527c1e396f03bp-14,
    -0x1.bb2e614fa9888p-17, 0x1.1ea5688f28a0dp-19, -0x1.6e7df03a03488p-22,
    0x1.cf4dba671cbb0p-25, -0x1.21a59683551cbp-27, 0x1.66525013ef260p-30,
    -0x1.b6b64e368106fp-33, 0x1.0a33ca5ac3187p-35, -0x1.3f80fb0c12a12p-38,
    0x1.83e1a154593d6p-4, -0x1.00f0a28e0b70dp-6, 0x1.500652770df53p-9,
    -0x1.b1ffaa6f881fcp-12, 0x1.14e914d25fde0p-14, -0x1.5d443153c4159p-17,
    0x1.b3956212527b9p-20, -0x1.0ca90bf08d971p-22, 0x1.47e8c448c91c9p-25,
    -0x1.8c1dfd17d957bp-28, 0x1.d9bca7fa483a2p-31, -0x1.188816db64a17p-33,
    0x1.4979f7d7f26c9p-36, -0x1.7ef1e29e5f9d3p-39, 0x1.747414effdae0p-4,
    -0x1.da4a7e35becddp-7, 0x1.2a6189daf30dep-9, -0x1.7318428a380c4p-12,
    0x1.c85edd24048e7p-15, -0x1.1594dc883a5cap-17, 0x1.4e1f24cf2201ap-20,
    -0x1.8e1298b04ed29p-23, 0x1.d58e7e833020ep-26, -0x1.12438d040f247p-28,
    0x1.3d605388b6c59p-31, -0x1.6be6075f5a839p-34, 0x1.9df42b93d892fp-37,
    -0x1.d24605f61deddp-40, 0x1.66315c5706f0bp-4, -0x1.b70fb7681780ep-7,
    0x1.0a1ac60286bf7p-9, -0x1.3f1651ac0ffcdp-12, 0x1.7a9f9dad403eap-15,
    -0x1.bcb66700144aap-18, 0x1.0298266200c93p-20, -0x1.29daa2fef70aap-23,
    0x1.53dec7edbede9p-26, -0x1.8048a61bb4301p-29, 0x1.aea4eea4b57b1p-32,
    -0x1.de6acba41aa4ep-35, 0x1.07c365d0fb8b7p-37, -0x1.20232da7c5583p-40,
    0x1.58f91d4c57ccap-4, -0x1.9794607880b05p-7, 0x1.dc8f5a234ea65p-10,
    -0x1.13ce26f04be19p-12, 0x1.3c1e9a550f8b8p-15, -0x1.66e18362b3681p-18,
    0x1.93a775f194c2fp-21, -0x1.c1eab19e03afdp-24, 0x1.f111adac3734dp-27,
    -0x1.103945aa4a8d7p-29, 0x1.27aba11c256c6p-32, -0x1.3e8159796a43ep-35,
    0x1.54aded62eaea8p-38, -0x1.6930efa6eeec7p-41, 0x1.4caf750fa3231p-4,
    -0x1.7b56355cc257fp-7, 0x1.ac57ccfb07de2p-10, -0x1.df2033814383ap-13,
    0x1.09820b7f1d8ffp-15, -0x1.23a26323a29cfp-18, 0x1.3d8a865fd169ap-21,
    -0x1.56cf678554df6p-24, 0x1.6f04969427ceap-27, -0x1.85bf7376e654bp-30,
    0x1.9a9a5547b44bap-33, -0x1.ad37b8340064ep-36, 0x1.bdab68e8bb0fdp-39,
    -0x1.cae420efb531ep-42, 0x1.413c3b2dcd435p-4, -0x1.61e827af73702p-7,
    0x1.825df5629cdd9p-10, -0x1.a214309a9f1fdp-13, 0x1.c07f431ce4a77p-16,
    -0x1.dd15aee38c458p-19, 0x1.f7544784fa1ecp-22, -0x1.07611d2ec48e9p-24,
    0x1.117a5c4d9c33ep-27, -0x1.19c90de1bbcc3p-30, 0x1.202a2ce980173p-33,
    -0x1.24857a337d484p-36, 0x1.270e06991a376p-39, -0x1.2740cf755ad68p-42,
    0x1.368a68664ffeep-4, -0x1.4aee62ebfbeecp-7, 0x1.5da94d30efafbp-10,
    -0x1.6e62a07a7ecdcp-13, 0x1.7ccc2800593f7p-16, -0x1.88a45c37a7208p-19,
    0x1.91b83fc0ee73fp-22, -0x1.97e4acb317b5fp-25, 0x1.9b1708bd95c31p-28,
    -0x1.9b4d5e7a812f4p-31, 0x1.9895dad7d4c9fp-34, -0x1.930de562c5082p-37,
    0x1.8b31ce913e5acp-40, -0x1.80928f1652c31p-43, 0x1.2c8799eb812b4p-4,
    -0x1.361b27d94cc85p-7, 0x1.3d6dfc18ff169p-10, -0x1.426342e99bcdcp-13,
    0x1.44ec0a4ad2cdep-16, -0x1.45074f6de35b1p-19, 0x1.42c18c81d7958p-22,
    -0x1.3e33d27022403p-25, 0x1.37827eef9feafp-28, -0x1.2edba2e2a59dcp-31,
    0x1.24752ab2a87d4p-34, -0x1.188afad84209cp-37, 0x1.0b90f96ab3d15p-40,
    -0x1.faba56593737ap-44, 0x1.2323ab16589c9p-4, -0x1.232c4d153e57cp-7,
    0x1.2103cd5bcf8c1p-10, -0x1.1cc27d2501a58p-13, 0x1.168b456c3da55p-16,
    -0x1.0e8a14a54bdfdp-19, 0x1.04f21775e9bfdp-22, -0x1.f3f7a675f7c0dp-26,
    0x1.dbc670fb794ebp-29, -0x1.c1cb837b7de50p-32, 0x1.a6815ae144b1cp-35,
    -0x1.8a5ee6e5f22fep-38, 0x1.6e1852af99f31p-41, -0x1.51882ddd84f2cp-44,
    0x1.1a50610170102p-4, -0x1.11e93f59f33b9p-7, 0x1.07df2a8541e56p-10,
    -0x1.f8dd63896f897p-14, 0x1.dfaf7e5dd0666p-17, -0x1.c4b71e9d968c2p-20,
    0x1.a8759b259fffdp-23, -0x1.8b67c9f493186p-26, 0x1.6e032093d34efp-29,
    -0x1.50b361b3687a3p-32, 0x1.33d8da4415fb8p-35, -0x1.17c7442e39a49p-38,
    0x1.f9e2dd8480eaap-42, -0x1.c665504670831p-45, 0x1.12012483654f3p-4,
    -0x1.0221654dd3f7bp-7, 0x1.e3173af5b3ec8p-11, -0x1.c11425bd434cfp-14,
    0x1.9ec46e722efe9p-17, -0x1.7ca69c929c3edp-20, 0x1.5b2ae0b99e664p-23,
    -0x1.3ab1cee0be828p-26, 0x1.1b8bc2658af04p-29, -0x1.fbf1b52c66dbcp-33,
    0x1.c452efc5c755ap-36, -0x1.907e62cd87c07p-39, 0x1.60d6ddb4fcb38p-42,
    -0x1.34ee9398dc765p-45, 0x1.0a2ac7c5cca9ap-4, -0x1.e755a2e90fed5p-8,
    0x1.bb4efa1509dacp-11, -0x1.90bf8c658cea9p-14, 0x1.680ed6f1bdba9p-17,
    -0x1.418e10e46fbe0p-20, 0x1.1d790f9f1ace9p-23, -0x1.f7ef6f8eb0fb0p-27,
    0x1.ba3faf8611d9fp-30, -0x1.81ee92cb8ac57p-33, 0x1.4eec73250f66cp-36,
    -0x1.211308d183fa0p-39, 0x1.f0a29e1a31defp-43, -0x1.a8186322913d5p-46,
    0x1.02c3554c1d773p-4, -0x1.ccc263b906921p-8, 0x1.97c0fdbde918dp-11,
    -0x1.66b709b9546c4p-14, 0x1.39bdde89ee17cp-17, -0x1.10d715a1a0fd6p-20,
    0x1.d7e06c6fea6fcp-24, -0x1.95ccc881d9953p-27, 0x1.5b13dffde9de1p-30,
    -0x1.274355922ed10p-33, 0x1.f3b7b031f2940p-37, -0x1.a4ad032855f80p-40,
    0x1.6087fad5ffd35p-43, -0x1.25c24a193189cp-46, 0x1.f783cd62d82c6p-5,
    -0x1.b449e1ca6d840p-8, 0x1.77e1f5fcd0731p-11, -0x1.420633ad4aca0p-14,
    0x1.125c6164e4962p-17, -0x1.d0f7513e02f1ep-21, 0x1.87e382967c079p-24,
    -0x1.488ee0bd88a12p-27, 0x1.1208a3e4d407fp-30, -0x1.c6c7c166937b0p-34,
    0x1.7778bf4ef0c5ep-37, -0x1.347484c44e278p-40, 0x1.f89ab41ff17ddp-44,
    -0x1.9a84907bdad8cp-47, 0x1.ea3d037a209f6p-5, -0x1.9db4fa9a996a4p-8,
    0x1.5b3b733d35b82p-11, -0x1.21e297cfbe68ep-14, 0x1.e17a5570a550ep-18,
    -0x1.8dc8598c4f193p-21, 0x1.46f66004b7f11p-24, -0x1.0b66ee32d307ep-27,
    0x1.b3381c252bef4p-31, -0x1.60734d02da928p-34, 0x1.1c0cafbd99fccp-37,
    -0x1.c7acc37990cf9p-41, 0x1.6bfbd2265ab23p-44, -0x1.213e329abda42p-47,
    0x1.dda3f567c9b7ap-5, -0x1.88d363ba5e5f5p-8, 0x1.41685ae40b3ccp-11,
    -0x1.05a3baaacf080p-14, 0x1.a7d793a289c86p-18, -0x1.559bf89b3ab13p-21,
    0x1.11fe60a5ee442p-24, -0x1.b56ae75edc6dbp-28, 0x1.5b822edbc58ebp-31,
    -0x1.12cb0e23f4e35p-34, 0x1.b09692aa41f26p-38, -0x1.52f3a34f9b708p-41,
    0x1.0887813e82b75p-44, -0x1.9adb22fcf09cap-48, 0x1.d1abb604a6b6fp-5,
    -0x1.757aad4ad1e98p-8, 0x1.2a120712e6accp-11, -0x1.d9798529b96e0p-15,
    0x1.7641b8c98eb4cp-18, -0x1.267081b153e41p-21, 0x1.cd241dc73134ep-25,
    -0x1.67759dc5130a0p-28, 0x1.16eef07ee6aedp-31, -0x1.aef6c47fa99c9p-35,
    0x1.4b76b6b89e47ep-38, -0x1.fba805879b945p-42, 0x1.83463e7ad2871p-45,
    -0x1.260a783e4f25dp-48, 0x1.c648970cc38a0p-5, -0x1.63856e15f97f3p-8,
    0x1.14edee3cf140dp-11, -0x1.ad6edaf2b860fp-15, 0x1.4b71ebd624dffp-18,
    -0x1.fd55b189f11adp-22, 0x1.859d94cf0cd35p-25, -0x1.28bb83b4eb5e4p-28,
    0x1.c20843c26e144p-32, -0x1.53cf33fdcfa22p-35, 0x1.ff0095927d809p-39,
    -0x1.7e9eda56288e9p-42, 0x1.1d72afdf3e7b0p-45, -0x1.a7f9b0a3d05d9p-49,
};
SB_CONST double sb_cbrt_seed[4] = {
    0x1.1c90a1fb8969fp-1, 0x1.296213a52f037p-1, -0x1.44f0d2e8403a6p-3, 0x1.6ae260afe5091p-6,
};
SB_CONST double sb_cbrt_2k3[3] = {
    0x1.0000000000000p+0, 0x1.428a2f98d728bp+0, 0x1.965fea53d6e3dp+0,
};
#define SB_LN2_T0 0x1.62e42fefa3800p-1
#define SB_LN2_T1 0x1.ef35793c76730p-45
#define SB_LN2_T2 0x1.f97b57a079a19p-103
#define SB_LN2_64_T0 0x1.62e42fefa0000p-7
#define SB_LN2_64_T1 0x1.cf79abc9e3b3ap-46
#define SB_LN2_64_T2 -0x1.ff0342542fc33p-100
/* 1/k!, k = 0..10, as double-double (hi, lo) */
SB_CONST double sb_exp_taylor_dd[22] = {
    0x1.0000000000000p+0, 0x0.0p+0,
    0x1.0000000000000p+0, 0x0.0p+0,
    0x1.0000000000000p-1, 0x0.0p+0,
    0x1.5555555555555p-3, 0x1.5555555555555p-57,
    0x1.5555555555555p-5, 0x1.5555555555555p-59,
    0x1.1111111111111p-7, 0x1.1111111111111p-63,
    0x1.6c16c16c16c17p-10, -0x1.f49f49f49f49fp-65,
    0x1.a01a01a01a01ap-13, 0x1.a01a01a01a01ap-73,
    0x1.a01a01a01a01ap-16, 0x1.a01a01a01a01ap-76,
    0x1.71de3a556c734p-19, -0x1.c154f8ddc6c00p-73,
    0x1.27e4fb7789f5cp-22, 0x1.cbbc05b4fa99ap-76,
};
/* (-1)^(k+1)/k, k = 1..13, as double-double (hi, lo): log1p(z) = sum of c_k z^k */
SB_CONST double sb_log1p_taylor_dd[26] = {
    0x1.0000000000000p+0, 0x0.0p+0,
    -0x1.0000000000000p-1, 0x0.0p+0,
    0x1.5555555555555p-2, 0x1.5555555555555p-56,
    -0x1.0000000000000p-2, 0x0.0p+0,
    0x1.999999999999ap-3, -0x1.999999999999ap-57,
    -0x1.5555555555555p-3, -0x1.5555555555555p-57,
    0x1.2492492492492p-3, 0x1.2492492492492p-57,
    -0x1.0000000000000p-3, 0x0.0p+0,
    0x1.c71c71c71c71cp-4, 0x1.c71c71c71c71cp-58,
    -0x1.999999999999ap-4, 0x1.999999999999ap-58,
    0x1.745d1745d1746p-4, -0x1.745d1745d1746p-59,
    -0x1.5555555555555p-4, -0x1.5555555555555p-58,
    0x1.3b13b13b13b14p-4, -0x1.3b13b13b13b14p-58,
};
/* ==== END GENERATED TABLES ==== */

/* ==== BEGIN GENERATED EXCEPTIONS (tools/gen_exceptions.py) ==== */
/* exp: 8 inputs fail the rounding test, 0 need an entry */
SB_CONST sb_u32 sb_exp_exceptions[][2] = {
    {0xffffffffu, 0u}, /* sentinel */
};
/* exp2: 12 inputs fail the rounding test, 2 need an entry */
SB_CONST sb_u32 sb_exp2_exceptions[][2] = {
    {0x3b429d37u, 0x3f804385u},
    {0xbcf3a937u, 0x3f7ac6b1u},
    {0xffffffffu, 0u}, /* sentinel */
};
/* exp10: 10 inputs fail the rounding test, 0 need an entry */
SB_CONST sb_u32 sb_exp10_exceptions[][2] = {
    {0xffffffffu, 0u}, /* sentinel */
};
/* expm1: 19 inputs fail the rounding test, 1 need an entry */
SB_CONST sb_u32 sb_expm1_exceptions[][2] = {
    {0x3a254e7au, 0x3a255bd3u},
    {0xffffffffu, 0u}, /* sentinel */
};
/* log: 47 inputs fail the rounding test, 5 need an entry */
SB_CONST sb_u32 sb_log_exceptions[][2] = {
    {0x41178febu, 0x400fe5e7u},
    {0x4c5d65a5u, 0x418f034bu},
    {0x5ee8984eu, 0x422e4a21u},
    {0x65d890d3u, 0x4254d1f9u},
    {0x6f31a8ecu, 0x42845a89u},
    {0xffffffffu, 0u}, /* sentinel */
};
/* log2: 136 inputs fail the rounding test, 0 need an entry */
SB_CONST sb_u32 sb_log2_exceptions[][2] = {
    {0xffffffffu, 0u}, /* sentinel */
};
/* log10: 43 inputs fail the rounding test, 3 need an entry */
SB_CONST sb_u32 sb_log10_exceptions[][2] = {
    {0x0a4d4ce8u, 0xc2000527u},
    {0x0efeee7au, 0xc1e99d23u},
    {0x2f149212u, 0xc11de885u},
    {0xffffffffu, 0u}, /* sentinel */
};
/* log1p: 36 inputs fail the rounding test, 10 need an entry */
SB_CONST sb_u32 sb_log1p_exceptions[][2] = {
    {0x35400003u, 0x353fffffu},
    {0x3710001bu, 0x370ffff3u},
    {0x3efd81adu, 0x3ecdeee1u},
    {0x41078febu, 0x400fe5e7u},
    {0x5ee8984eu, 0x422e4a21u},
    {0x65d890d3u, 0x4254d1f9u},
    {0x6f31a8ecu, 0x42845a89u},
    {0xb53ffffdu, 0xb5400001u},
    {0xb70fffe5u, 0xb710000du},
    {0xbb0ec8c4u, 0xbb0ef0a5u},
    {0xffffffffu, 0u}, /* sentinel */
};
/* sin: 134 inputs fail the rounding test, 2 need an entry */
SB_CONST sb_u32 sb_sin_exceptions[][2] = {
    {0x46199998u, 0xbeb1fa5du},
    {0xc6199998u, 0x3eb1fa5du},
    {0xffffffffu, 0u}, /* sentinel */
};
/* cos: 138 inputs fail the rounding test, 4 need an entry */
SB_CONST sb_u32 sb_cos_exceptions[][2] = {
    {0x5f18b878u, 0x3f7f14bbu},
    {0x6115cb11u, 0x3f78142fu},
    {0xdf18b878u, 0x3f7f14bbu},
    {0xe115cb11u, 0x3f78142fu},
    {0xffffffffu, 0u}, /* sentinel */
};
/* tan: 66 inputs fail the rounding test, 0 need an entry */
SB_CONST sb_u32 sb_tan_exceptions[][2] = {
    {0xffffffffu, 0u}, /* sentinel */
};
/* asin: 14 inputs fail the rounding test, 0 need an entry */
SB_CONST sb_u32 sb_asin_exceptions[][2] = {
    {0xffffffffu, 0u}, /* sentinel */
};
/* acos: 16 inputs fail the rounding test, 2 need an entry */
SB_CONST sb_u32 sb_acos_exceptions[][2] = {
    {0x328885a3u, 0x3fc90fdbu},
    {0x39826222u, 0x3fc907b5u},
    {0xffffffffu, 0u}, /* sentinel */
};
/* atan: 46 inputs fail the rounding test, 2 need an entry */
SB_CONST sb_u32 sb_atan_exceptions[][2] = {
    {0x3d8d6b23u, 0x3d8d31c3u},
    {0xbd8d6b23u, 0xbd8d31c3u},
    {0xffffffffu, 0u}, /* sentinel */
};
/* sinh: 0 inputs fail the rounding test, 0 need an entry */
SB_CONST sb_u32 sb_sinh_exceptions[][2] = {
    {0xffffffffu, 0u}, /* sentinel */
};
/* cosh: 0 inputs fail the rounding test, 0 need an entry */
SB_CONST sb_u32 sb_cosh_exceptions[][2] = {
    {0xffffffffu, 0u}, /* sentinel */
};
/* tanh: 8 inputs fail the rounding test, 0 need an entry */
SB_CONST sb_u32 sb_tanh_exceptions[][2] = {
    {0xffffffffu, 0u}, /* sentinel */
};
/* asinh: 110 inputs fail the rounding test, 8 need an entry */
SB_CONST sb_u32 sb_asinh_exceptions[][2] = {
    {0x4bdd65a5u, 0x418f034bu},
    {0x5e68984eu, 0x422e4a21u},
    {0x655890d3u, 0x4254d1f9u},
    {0x6eb1a8ecu, 0x42845a89u},
    {0xcbdd65a5u, 0xc18f034bu},
    {0xde68984eu, 0xc22e4a21u},
    {0xe55890d3u, 0xc254d1f9u},
    {0xeeb1a8ecu, 0xc2845a89u},
    {0xffffffffu, 0u}, /* sentinel */
};
/* acosh: 50 inputs fail the rounding test, 3 need an entry */
SB_CONST sb_u32 sb_acosh_exceptions[][2] = {
    {0x5e68984eu, 0x422e4a21u},
    {0x655890d3u, 0x4254d1f9u},
    {0x6eb1a8ecu, 0x42845a89u},
    {0xffffffffu, 0u}, /* sentinel */
};
/* atanh: 0 inputs fail the rounding test, 0 need an entry */
SB_CONST sb_u32 sb_atanh_exceptions[][2] = {
    {0xffffffffu, 0u}, /* sentinel */
};
/* erf: 214 inputs fail the rounding test, 0 need an entry */
SB_CONST sb_u32 sb_erf_exceptions[][2] = {
    {0xffffffffu, 0u}, /* sentinel */
};
/* erfc: 21 inputs fail the rounding test, 1 need an entry */
SB_CONST sb_u32 sb_erfc_exceptions[][2] = {
    {0xb76c9f62u, 0x3f800085u},
    {0xffffffffu, 0u}, /* sentinel */
};
/* cbrt: 0 inputs fail the rounding test, 0 need an entry */
SB_CONST sb_u32 sb_cbrt_exceptions[][2] = {
    {0xffffffffu, 0u}, /* sentinel */
};
/* ==== END GENERATED EXCEPTIONS ==== */

/* ---- rounding test and exception lookup ---------------------------------------------------- */

/* Binary search of xbits in a sorted {input bits, result bits} table ending with a sentinel. */
SB_FN float sb_exception_lookup(sb_u32 xbits, const sb_u32 (*tab)[2], sb_i32 n, float fallback)
{
  sb_i32 lo = 0, hi = n - 1;
  while (lo < hi) {
    sb_i32 mid = (lo + hi) / 2;
    if (tab[mid][0] < xbits) lo = mid + 1; else hi = mid;
  }
  return tab[lo][0] == xbits ? sb_f32_from_bits(tab[lo][1]) : fallback;
}

/* f(x) rounded from its binary64 approximation y (relative error < rel). */
SB_FN float sb_round_checked(double y, double rel, sb_u32 xbits, const sb_u32 (*tab)[2], sb_i32 n)
{
  double e = (y < 0.0 ? -y : y) * rel;
  float lo = (float)(y - e), hi = (float)(y + e);
  if (lo == hi) return lo;
  return sb_exception_lookup(xbits, tab, n, (float)y);
}

/* For tools/hard-case search: 2^32 | bits((float)y) when the rounding test fails, else 0. */
SB_FN sb_u64 sb_hard_case(double y, double rel)
{
  double e = (y < 0.0 ? -y : y) * rel;
  if ((float)(y - e) == (float)(y + e)) return 0;
  return ((sb_u64)1 << 32) | sb_f32_bits((float)y);
}

/* Defines sb_<name>f(x) and sb_<name>f_hard_case(x) from sb_<name>_core, which returns 1 with the
 * final result in *r for special inputs, or 0 with the binary64 approximation in *y; and
 * sb_<name>_err(), the bound of the rounding test (for the vectorised slice loops of sb_math.c). */
#define SB_DEFINE_CORRECTLY_ROUNDED(name, rel_err)                                                 \
  SB_FN double sb_##name##_err(void) { return rel_err; }                                          \
  SB_FN float sb_##name##f(float x)                                                                \
  {                                                                                                \
    float r;                                                                                       \
    double y;                                                                                      \
    if (sb_##name##_core(x, &r, &y)) return r;                                                     \
    return sb_round_checked(y, rel_err, sb_f32_bits(x), sb_##name##_exceptions,                    \
                            (sb_i32)(sizeof(sb_##name##_exceptions) / sizeof(sb_##name##_exceptions[0]))); \
  }                                                                                                \
  SB_FN sb_u64 sb_##name##f_hard_case(float x)                                                     \
  {                                                                                                \
    float r;                                                                                       \
    double y;                                                                                      \
    if (sb_##name##_core(x, &r, &y)) return 0;                                                     \
    return sb_hard_case(y, rel_err);                                                               \
  }

/* ---- exponential kernels --------------------------------------------------------------------- */

/* 2^(h/64) - 1 for |h| <= 1/2 + 2^-12. */
SB_FN double sb_exp_q(double h) { return h * sb_horner(sb_exp_q_coef, 5, h); }

/* 2^((k + h)/64) for |h| <= 1/2 + 2^-12 and -64*1000 < k < 64*1000. Relative error < 2^-52.5:
 * table entry as double-double, q(h) with fit error < 2^-60, one rounding in the final add. */
SB_FN double sb_exp2_64_kernel(sb_i32 k, double h)
{
  sb_i32 i = k & 63; /* signed table indices let a vectorising compiler use gathers */
  sb_i32 e = (k - i) / 64;
  double th = sb_exp2_64_dd[2 * i], tl = sb_exp2_64_dd[2 * i + 1];
  double y = th + (tl + th * sb_exp_q(h));
  return y * sb_pow2(e);
}

/* 2^((k + h)/64) - 1, same ranges. (s_hi - 1) is exact where cancellation matters (s in [1/2, 2])
 * and the rest carries the table's low part, so the relative error stays < 2^-51.5. */
SB_FN double sb_expm1_64_kernel(sb_i32 k, double h)
{
  sb_i32 i = k & 63; /* signed, as in sb_exp2_64_kernel */
  sb_i32 e = (k - i) / 64;
  double s = sb_pow2(e);
  double sh = sb_exp2_64_dd[2 * i] * s, sl = sb_exp2_64_dd[2 * i + 1] * s;
  return (sh - 1.0) + (sl + sh * sb_exp_q(h));
}

/* t -> (k, h) with t / ln2 = (k + h)/64 for a binary64 t, |t| < 700: t - k ln2/64 is exact
 * (ln2/64 high part has 38 bits, |k| < 2^15) and h carries a relative error < 2^-52. */
SB_FN sb_i32 sb_exp_reduce(double t, double *h)
{
  double kd = sb_rint(t * SB_INV_LN2_64);
  double r = (t - kd * SB_LN2_64_HI) - kd * SB_LN2_64_LO;
  *h = r * SB_INV_LN2_64;
  return (sb_i32)kd;
}

SB_FN double sb_exp_f64(double t)
{
  double h;
  sb_i32 k = sb_exp_reduce(t, &h);
  return sb_exp2_64_kernel(k, h);
}

SB_FN double sb_expm1_f64(double t)
{
  double h;
  sb_i32 k = sb_exp_reduce(t, &h);
  return sb_expm1_64_kernel(k, h);
}

/* For a binary32 x: x * 64/ln2 = k + h with x*HI exact (24 + 29 bits). */
SB_FN sb_i32 sb_exp_reduce_f32(float x, double c_hi, double c_lo, double *h)
{
  double a = (double)x * c_hi;
  double kd = sb_rint(a);
  *h = (a - kd) + (double)x * c_lo;
  return (sb_i32)kd;
}

/* ---- logarithm kernel -------------------------------------------------------------------------- */

/* log(hi + lo) for a positive normal binary64 hi and |lo| <= 2^-52 hi. hi = 2^e m, m in [1, 2);
 * r_i ~ 1/m from 8 bits of m (20-bit r_i, so m_hi r_i is exact), z = m r_i - 1 with |z| <= 2^-8;
 * log = e ln2 - log r_i + log1p(z) + lo/hi. Entries i >= 128 use m/2 (e + 1), which avoids the
 * cancellation of e ln2 against log m just below powers of two. Relative error < 2^-51.5. */
SB_FN double sb_log_dd(double hi, double lo)
{
  sb_u64 u = sb_f64_bits(hi);
  sb_i32 e = (sb_i32)(u >> 52) - 1023;
  sb_u64 mbits = (u & 0x000fffffffffffffull) | 0x3ff0000000000000ull;
  sb_i32 i = (sb_i32)((u >> 44) & 255u);
  double m = sb_f64_from_bits(mbits);
  double mh = sb_f64_from_bits(mbits & ~((1ull << 26) - 1ull));
  double ml = m - mh;
  double r = sb_log_tab[3 * i], lh = sb_log_tab[3 * i + 1], ll = sb_log_tab[3 * i + 2];
  double z = (mh * r - 1.0) + ml * r;
  double p = z + (z * z) * sb_horner(sb_log1p_p, 7, z);
  double ed = (double)(e + (i >> 7));
  double tail = p + (ll + ed * SB_LN2_LO);
  /* lo == 0 (binary32 arguments) skips the division; tail is never -0, so the bits are equal */
  if (lo != 0.0) tail = tail + lo / hi;
  return (ed * SB_LN2_HI + lh) + tail;
}

/* log1p(w) for a binary64 w > -1 (1 + w is split exactly into hi + lo). */
SB_FN double sb_log1p_f64(double w)
{
  double hi, lo;
  if (w > 1.0 || w < -1.0) {
    hi = w + 1.0;
    lo = 1.0 - (hi - w);
  } else {
    hi = 1.0 + w;
    lo = w - (hi - 1.0);
  }
  return sb_log_dd(hi, lo);
}

/* ---- exp, exp2, exp10, expm1 ------------------------------------------------------------------ */

/* Shared special cases of the exponentials: NaN, +-inf, overflow above `over`, underflow to
 * `under_result` below `under`. */
SB_FN sb_i32 sb_exp_specials(float x, float over, float under, float under_result, float *r)
{
  if (x != x) { *r = sb_nanf(); return 1; }
  if (x > over) { *r = sb_inff(); return 1; }
  if (x < under) { *r = under_result; return 1; }
  return 0;
}

/* exp x in binary64 for -104 <= x <= 89. */
SB_FN double sb_exp_y(float x)
{
  double h;
  sb_i32 k = sb_exp_reduce_f32(x, SB_INV_LN2_64_HI, SB_INV_LN2_64_LO, &h);
  return sb_exp2_64_kernel(k, h);
}

SB_FN sb_i32 sb_exp_core(float x, float *r, double *y)
{
  if (sb_exp_specials(x, 89.0f, -104.0f, 0.0f, r)) return 1;
  *y = sb_exp_y(x);
  return 0;
}

/* Lane functions (for the vectorised slice loops): 1 when x is a special input of the core
 * (the scalar function answers it), else 0 with *y the core's binary64 value; no branches. */
SB_FN sb_i32 sb_exp_lane(float x, double *y)
{
  sb_i32 flagged = !((x >= -104.0f) & (x <= 89.0f));
  *y = sb_exp_y(sb_lane_input(x, flagged, 0.0f));
  return flagged;
}
SB_DEFINE_CORRECTLY_ROUNDED(exp, 0x1p-50)

/* 2^x in binary64 for -150 <= x <= 128. */
SB_FN double sb_exp2_y(float x)
{
  double t = (double)x * 64.0, kd = sb_rint(t);
  return sb_exp2_64_kernel((sb_i32)kd, t - kd);
}

SB_FN sb_i32 sb_exp2_core(float x, float *r, double *y)
{
  if (sb_exp_specials(x, 128.0f, -150.0f, 0.0f, r)) return 1;
  *y = sb_exp2_y(x);
  return 0;
}

SB_FN sb_i32 sb_exp2_lane(float x, double *y)
{
  sb_i32 flagged = !((x >= -150.0f) & (x <= 128.0f));
  *y = sb_exp2_y(sb_lane_input(x, flagged, 0.0f));
  return flagged;
}
SB_DEFINE_CORRECTLY_ROUNDED(exp2, 0x1p-50)

SB_FN sb_i32 sb_exp10_core(float x, float *r, double *y)
{
  double h;
  sb_i32 k;
  if (sb_exp_specials(x, 39.0f, -46.0f, 0.0f, r)) return 1;
  k = sb_exp_reduce_f32(x, SB_LOG2_10_64_HI, SB_LOG2_10_64_LO, &h);
  *y = sb_exp2_64_kernel(k, h);
  return 0;
}
SB_DEFINE_CORRECTLY_ROUNDED(exp10, 0x1p-50)

SB_FN sb_i32 sb_expm1_core(float x, float *r, double *y)
{
  double h;
  sb_i32 k;
  if (sb_exp_specials(x, 89.0f, -25.0f, -1.0f, r)) return 1;
  /* |x| < 2^-25: x + x^2/2 is within a quarter ulp of x (and keeps the sign of zero). */
  if ((sb_f32_bits(x) & 0x7fffffffu) < 0x33000000u) { *r = x; return 1; }
  k = sb_exp_reduce_f32(x, SB_INV_LN2_64_HI, SB_INV_LN2_64_LO, &h);
  *y = sb_expm1_64_kernel(k, h);
  return 0;
}
SB_DEFINE_CORRECTLY_ROUNDED(expm1, 0x1p-49)

/* ---- log, log2, log10, log1p -------------------------------------------------------------------- */

/* Shared special cases for log-like functions of x whose pole is at x == pole:
 * NaN -> NaN, x < pole -> NaN, x == pole -> -inf, +inf -> +inf. */
SB_FN sb_i32 sb_log_specials(float x, float pole, float *r)
{
  if (!(x > pole)) { *r = (x == pole) ? -sb_inff() : sb_nanf(); return 1; }
  if (x == sb_inff()) { *r = x; return 1; }
  return 0;
}

SB_FN sb_i32 sb_log_core(float x, float *r, double *y)
{
  if (sb_log_specials(x, 0.0f, r)) return 1;
  *y = sb_log_dd((double)x, 0.0);
  return 0;
}
SB_DEFINE_CORRECTLY_ROUNDED(log, 0x1p-50)

/* Positive finite x (the inputs sb_log_specials passes on). */
SB_FN sb_i32 sb_log_domain(float x) { return (x > 0.0f) & (x < sb_inff()); }

SB_FN sb_i32 sb_log_lane(float x, double *y)
{
  sb_i32 flagged = !sb_log_domain(x);
  *y = sb_log_dd((double)sb_lane_input(x, flagged, 1.0f), 0.0);
  return flagged;
}

SB_FN sb_i32 sb_log2_core(float x, float *r, double *y)
{
  if (sb_log_specials(x, 0.0f, r)) return 1;
  *y = sb_log_dd((double)x, 0.0) * SB_INV_LN2;
  return 0;
}
SB_DEFINE_CORRECTLY_ROUNDED(log2, 0x1p-50)

SB_FN sb_i32 sb_log2_lane(float x, double *y)
{
  sb_i32 flagged = !sb_log_domain(x);
  *y = sb_log_dd((double)sb_lane_input(x, flagged, 1.0f), 0.0) * SB_INV_LN2;
  return flagged;
}

SB_FN sb_i32 sb_log10_core(float x, float *r, double *y)
{
  if (sb_log_specials(x, 0.0f, r)) return 1;
  *y = sb_log_dd((double)x, 0.0) * SB_INV_LN10;
  return 0;
}
SB_DEFINE_CORRECTLY_ROUNDED(log10, 0x1p-50)

SB_FN sb_i32 sb_log1p_core(float x, float *r, double *y)
{
  if (sb_log_specials(x, -1.0f, r)) return 1;
  /* |x| < 2^-25: x - x^2/2 is within a quarter ulp of x (and keeps the sign of zero). */
  if ((sb_f32_bits(x) & 0x7fffffffu) < 0x33000000u) { *r = x; return 1; }
  *y = sb_log1p_f64((double)x);
  return 0;
}
SB_DEFINE_CORRECTLY_ROUNDED(log1p, 0x1p-50)

/* ---- hyperbolic functions ------------------------------------------------------------------------ */

SB_FN sb_i32 sb_tanh_core(float x, float *r, double *y)
{
  sb_u32 ux = sb_f32_bits(x), ax = ux & 0x7fffffffu;
  double em;
  if (ax > 0x7f800000u) { *r = sb_nanf(); return 1; }
  /* |x| > 9.2: 1 - tanh|x| < 2^-25, rounds to 1. */
  if (ax > 0x41133333u) { *r = sb_copysignf(1.0f, x); return 1; }
  /* |x| < 2^-12: x - x^3/3 rounds to x. */
  if (ax < 0x39800000u) { *r = x; return 1; }
  em = sb_expm1_f64(2.0 * (double)sb_f32_from_bits(ax));
  *y = sb_with_sign(em / (em + 2.0), ux);
  return 0;
}
SB_DEFINE_CORRECTLY_ROUNDED(tanh, 0x1p-49)

/* Lanes of tanh: NaN, |x| > 9.2 and |x| < 2^-12 are flagged. */
SB_FN sb_i32 sb_tanh_lane(float x, double *y)
{
  sb_u32 ux = sb_f32_bits(x), ax = ux & 0x7fffffffu;
  sb_i32 flagged = (ax > 0x41133333u) | (ax < 0x39800000u);
  double em = sb_expm1_f64(2.0 * (double)sb_lane_input(sb_f32_from_bits(ax), flagged, 1.0f));
  *y = sb_with_sign(em / (em + 2.0), ux);
  return flagged;
}

SB_FN sb_i32 sb_sinh_core(float x, float *r, double *y)
{
  sb_u32 ux = sb_f32_bits(x), ax = ux & 0x7fffffffu;
  double em;
  if (ax > 0x7f800000u) { *r = sb_nanf(); return 1; }
  if (ax > 0x42b40000u) { *r = sb_copysignf(sb_inff(), x); return 1; } /* |x| > 90 */
  if (ax < 0x39800000u) { *r = x; return 1; }                          /* |x| < 2^-12 */
  em = sb_expm1_f64((double)sb_f32_from_bits(ax));
  *y = sb_with_sign(0.5 * (em + em / (em + 1.0)), ux);
  return 0;
}
SB_DEFINE_CORRECTLY_ROUNDED(sinh, 0x1p-49)

SB_FN sb_i32 sb_cosh_core(float x, float *r, double *y)
{
  sb_u32 ax = sb_f32_bits(x) & 0x7fffffffu;
  double e;
  if (ax > 0x7f800000u) { *r = sb_nanf(); return 1; }
  if (ax > 0x42b40000u) { *r = sb_inff(); return 1; }  /* |x| > 90 */
  if (ax < 0x39000000u) { *r = 1.0f; return 1; }      /* |x| < 2^-13: 1 + x^2/2 rounds to 1 */
  e = sb_exp_f64((double)sb_f32_from_bits(ax));
  *y = 0.5 * e + 0.5 / e;
  return 0;
}
SB_DEFINE_CORRECTLY_ROUNDED(cosh, 0x1p-50)

SB_FN sb_i32 sb_asinh_core(float x, float *r, double *y)
{
  sb_u32 ux = sb_f32_bits(x), ax = ux & 0x7fffffffu;
  double a, w;
  if (ax > 0x7f800000u) { *r = sb_nanf(); return 1; }
  if (ax == 0x7f800000u || ax < 0x39800000u) { *r = x; return 1; } /* inf, |x| < 2^-12 */
  a = (double)sb_f32_from_bits(ax);
  /* asinh a = log1p(a + a^2 / (1 + sqrt(1 + a^2))), a^2 exact. */
  w = a + (a * a) / (1.0 + sb_sqrt(1.0 + a * a));
  *y = sb_with_sign(sb_log1p_f64(w), ux);
  return 0;
}
SB_DEFINE_CORRECTLY_ROUNDED(asinh, 0x1p-49)

SB_FN sb_i32 sb_acosh_core(float x, float *r, double *y)
{
  double t;
  if (x != x || x < 1.0f) { *r = sb_nanf(); return 1; }
  if (x == 1.0f) { *r = 0.0f; return 1; }
  if (x == sb_inff()) { *r = x; return 1; }
  /* acosh x = log1p(t + sqrt(t (t + 2))), t = x - 1 exact. */
  t = (double)x - 1.0;
  *y = sb_log1p_f64(t + sb_sqrt(t * (t + 2.0)));
  return 0;
}
SB_DEFINE_CORRECTLY_ROUNDED(acosh, 0x1p-49)

SB_FN sb_i32 sb_atanh_core(float x, float *r, double *y)
{
  sb_u32 ux = sb_f32_bits(x), ax = ux & 0x7fffffffu;
  double a;
  if (ax > 0x3f800000u) { *r = sb_nanf(); return 1; }                   /* |x| > 1, NaN */
  if (ax == 0x3f800000u) { *r = sb_copysignf(sb_inff(), x); return 1; } /* |x| = 1 */
  if (ax < 0x39800000u) { *r = x; return 1; }                           /* |x| < 2^-12 */
  a = (double)sb_f32_from_bits(ax);
  /* atanh a = log1p(2a / (1 - a)) / 2, 1 - a and 2a exact. */
  *y = sb_with_sign(0.5 * sb_log1p_f64((2.0 * a) / (1.0 - a)), ux);
  return 0;
}
SB_DEFINE_CORRECTLY_ROUNDED(atanh, 0x1p-49)

/* ---- trigonometric functions ------------------------------------------------------------------- */

/* The 32 bits of the limb array p[0..5] (little-endian) starting at bit b (b may be negative). */
SB_FN sb_u32 sb_limbs_word(const sb_u32 *p, sb_i32 b)
{
  sb_i32 idx, sh;
  sb_u64 lo, hi;
  if (b < 0) return p[0] << (sb_u32)(-b);
  idx = b >> 5;
  sh = b & 31;
  lo = idx < 6 ? p[idx] : 0u;
  hi = idx + 1 < 6 ? p[idx + 1] : 0u;
  return (sb_u32)((((hi << 32) | lo) >> sh) & 0xffffffffu);
}

/* Payne-Hanek reduction of a = m 2^E (24-bit m, a >= 2^17): a 2/pi = q + f mod 4 with |f| <= 1/2.
 * Bits of 2/pi of weight above 2^-(32 k0 - 32) only add multiples of 4 and are skipped; five
 * words (160 bits) are multiplied exactly by m; the fraction keeps 128 bits (truncation error
 * below 2^-100, while |f| > 2^-40 for every binary32 a). Returns q; *r = f pi/2 (rel err < 2^-52). */
SB_FN sb_i32 sb_reduce_payne_hanek(float a, double *r)
{
  sb_u32 ua = sb_f32_bits(a);
  sb_u64 m = (ua & 0x7fffffu) | 0x800000u;
  sb_i32 E = (sb_i32)(ua >> 23) - 127 - 23;
  sb_i32 k0 = (E + 30) / 32, s, q, lz, j;
  sb_u32 p[6];
  sb_u64 carry = 0, fh, fl;
  double f;
  for (j = 0; j < 5; j++) {
    sb_u64 t = m * sb_two_over_pi_words[k0 + 4 - j] + carry;
    p[j] = (sb_u32)t;
    carry = t >> 32;
  }
  p[5] = (sb_u32)carry;
  s = 32 * (k0 + 4) - E; /* binary point of the product */
  q = (sb_i32)(sb_limbs_word(p, s) & 3u);
  fh = ((sb_u64)sb_limbs_word(p, s - 32) << 32) | sb_limbs_word(p, s - 64);
  fl = ((sb_u64)sb_limbs_word(p, s - 96) << 32) | sb_limbs_word(p, s - 128);
  if (fh >> 63) { /* f >= 1/2: take f - 1, next quadrant */
    q = (q + 1) & 3;
    fl = ~fl + 1u;
    fh = ~fh + (fl == 0 ? 1u : 0u);
    lz = sb_clz64(fh);
    fh = (fh << lz) | (lz ? fl >> (64 - lz) : 0u);
    f = -sb_u64_to_f64(fh) * sb_pow2(-64 - lz);
  } else {
    lz = sb_clz64(fh);
    fh = (fh << lz) | (lz ? fl >> (64 - lz) : 0u);
    f = sb_u64_to_f64(fh) * sb_pow2(-64 - lz);
  }
  *r = f * SB_PIO2_HI + f * SB_PIO2_LO;
  return q;
}

/* a = q pi/2 + r, |r| <= pi/4 + 2^-20, for a binary32 a >= 0 (finite). Below 2^17 Cody-Waite with
 * pi/2 in three parts: k P1 and k P2 are exact (36-bit parts, k < 2^17), a - k P1 is exact, and
 * the second subtraction is exact when it cancels, so r has relative error < 2^-52. */
SB_FN sb_i32 sb_reduce_cody_waite(float a, double *r)
{
  double ad = (double)a, kd = sb_rint(ad * SB_TWO_OVER_PI);
  *r = ((ad - kd * SB_PIO2_1) - kd * SB_PIO2_2) - kd * SB_PIO2_3;
  return (sb_i32)kd & 3;
}
SB_FN sb_i32 sb_reduce_pio2(float a, double *r)
{
  if (a < 0x1p17f) return sb_reduce_cody_waite(a, r);
  return sb_reduce_payne_hanek(a, r);
}

/* sin r = r + r u S(u), cos r = 1 + u C(u), u = r^2, |r| <= pi/4 + 2^-10 (fit errors < 2^-58). */
SB_FN double sb_sin_poly(double r)
{
  double u = r * r;
  return r + (r * u) * sb_horner(sb_sin_s, 8, u);
}
SB_FN double sb_cos_poly(double r)
{
  double u = r * r;
  return 1.0 + u * sb_horner(sb_cos_c, 9, u);
}

/* sin x from the reduction |x| = q pi/2 + t (ux: the bits of x). */
SB_FN double sb_sin_reduced(sb_i32 q, double t, sb_u32 ux)
{
  double v = (q & 1) ? sb_cos_poly(t) : sb_sin_poly(t);
  if (q & 2) v = -v;
  return sb_with_sign(v, ux);
}
/* cos x from the reduction |x| = q pi/2 + t. */
SB_FN double sb_cos_reduced(sb_i32 q, double t)
{
  double v = (q & 1) ? sb_sin_poly(t) : sb_cos_poly(t);
  if ((q + 1) & 2) v = -v;
  return v;
}

SB_FN sb_i32 sb_sin_core(float x, float *r, double *y)
{
  sb_u32 ux = sb_f32_bits(x), ax = ux & 0x7fffffffu;
  double t;
  sb_i32 q;
  if (ax >= 0x7f800000u) { *r = sb_nanf(); return 1; }
  if (ax < 0x39800000u) { *r = x; return 1; } /* |x| < 2^-12: x - x^3/6 rounds to x */
  q = sb_reduce_pio2(sb_f32_from_bits(ax), &t);
  *y = sb_sin_reduced(q, t, ux);
  return 0;
}
SB_DEFINE_CORRECTLY_ROUNDED(sin, 0x1p-49)

/* Lanes of sin and cos take the Cody-Waite reduction only (|x| < 2^17); larger arguments,
 * tiny ones, infinities and NaN are flagged. */
SB_FN sb_i32 sb_sin_lane(float x, double *y)
{
  sb_u32 ux = sb_f32_bits(x), ax = ux & 0x7fffffffu;
  sb_i32 flagged = (ax >= 0x48000000u) | (ax < 0x39800000u), q;
  double t;
  q = sb_reduce_cody_waite(sb_lane_input(sb_f32_from_bits(ax), flagged, 1.0f), &t);
  *y = sb_sin_reduced(q, t, ux);
  return flagged;
}

SB_FN sb_i32 sb_cos_core(float x, float *r, double *y)
{
  sb_u32 ax = sb_f32_bits(x) & 0x7fffffffu;
  double t;
  sb_i32 q;
  if (ax >= 0x7f800000u) { *r = sb_nanf(); return 1; }
  if (ax < 0x39000000u) { *r = 1.0f; return 1; } /* |x| < 2^-13: 1 - x^2/2 rounds to 1 */
  q = sb_reduce_pio2(sb_f32_from_bits(ax), &t);
  *y = sb_cos_reduced(q, t);
  return 0;
}
SB_DEFINE_CORRECTLY_ROUNDED(cos, 0x1p-49)

SB_FN sb_i32 sb_cos_lane(float x, double *y)
{
  sb_u32 ax = sb_f32_bits(x) & 0x7fffffffu;
  sb_i32 flagged = (ax >= 0x48000000u) | (ax < 0x39000000u), q;
  double t;
  q = sb_reduce_cody_waite(sb_lane_input(sb_f32_from_bits(ax), flagged, 1.0f), &t);
  *y = sb_cos_reduced(q, t);
  return flagged;
}

SB_FN sb_i32 sb_tan_core(float x, float *r, double *y)
{
  sb_u32 ux = sb_f32_bits(x), ax = ux & 0x7fffffffu;
  double t, s, c;
  sb_i32 q;
  if (ax >= 0x7f800000u) { *r = sb_nanf(); return 1; }
  if (ax < 0x39800000u) { *r = x; return 1; } /* |x| < 2^-12: x + x^3/3 rounds to x */
  q = sb_reduce_pio2(sb_f32_from_bits(ax), &t);
  s = sb_sin_poly(t);
  c = sb_cos_poly(t);
  *y = sb_with_sign((q & 1) ? -c / s : s / c, ux);
  return 0;
}
SB_DEFINE_CORRECTLY_ROUNDED(tan, 0x1p-49)

/* ---- inverse trigonometric functions ------------------------------------------------------------ */

/* atan t for a binary64 t >= 0 (+inf allowed). t > 1 uses pi/2 - atan(1/t); then
 * atan t = atan c + atan((t - c)/(1 + t c)) with c = i/16 nearest t (t - c exact), and
 * |(t - c)/(1 + t c)| <= 1/32. Relative error < 2^-51. */
SB_FN double sb_atan_f64(double t)
{
  sb_i32 inv = t > 1.0, i;
  double c, v, a;
  if (inv) t = 1.0 / t;
  i = (sb_i32)sb_rint(t * 16.0);
  c = (double)i * 0.0625;
  v = (t - c) / (1.0 + t * c);
  a = sb_atan_tab[2 * i] + (sb_atan_tab[2 * i + 1] + (v + (v * (v * v)) * sb_horner(sb_atan_a, 6, v * v)));
  if (inv) a = (SB_PIO2_HI - a) + SB_PIO2_LO;
  return a;
}

SB_FN sb_i32 sb_atan_core(float x, float *r, double *y)
{
  sb_u32 ux = sb_f32_bits(x), ax = ux & 0x7fffffffu;
  if (ax > 0x7f800000u) { *r = sb_nanf(); return 1; }
  if (ax < 0x39800000u) { *r = x; return 1; } /* |x| < 2^-12: x - x^3/3 rounds to x */
  *y = sb_with_sign(sb_atan_f64((double)sb_f32_from_bits(ax)), ux);
  return 0;
}
SB_DEFINE_CORRECTLY_ROUNDED(atan, 0x1p-49)

SB_FN sb_i32 sb_atan_lane(float x, double *y)
{
  sb_u32 ux = sb_f32_bits(x), ax = ux & 0x7fffffffu;
  sb_i32 flagged = (ax > 0x7f800000u) | (ax < 0x39800000u);
  float a = sb_lane_input(sb_f32_from_bits(ax), flagged, 0.5f);
  *y = sb_with_sign(sb_atan_f64((double)a), ux);
  return flagged;
}

/* asin a = atan(a / sqrt((1 - a)(1 + a))) for 0 <= a <= 1; 1 - a, 1 + a exact; a = 1 gives
 * atan(inf). */
SB_FN double sb_asin_abs(float a)
{
  double ad = (double)a;
  return sb_atan_f64(ad / sb_sqrt((1.0 - ad) * (1.0 + ad)));
}

SB_FN sb_i32 sb_asin_core(float x, float *r, double *y)
{
  sb_u32 ux = sb_f32_bits(x), ax = ux & 0x7fffffffu;
  if (ax > 0x3f800000u) { *r = sb_nanf(); return 1; } /* |x| > 1, NaN */
  if (ax < 0x39800000u) { *r = x; return 1; }         /* |x| < 2^-12: x + x^3/6 rounds to x */
  *y = sb_with_sign(sb_asin_abs(sb_f32_from_bits(ax)), ux);
  return 0;
}
SB_DEFINE_CORRECTLY_ROUNDED(asin, 0x1p-49)

SB_FN sb_i32 sb_asin_lane(float x, double *y)
{
  sb_u32 ux = sb_f32_bits(x), ax = ux & 0x7fffffffu;
  sb_i32 flagged = (ax > 0x3f800000u) | (ax < 0x39800000u);
  *y = sb_with_sign(sb_asin_abs(sb_lane_input(sb_f32_from_bits(ax), flagged, 0.5f)), ux);
  return flagged;
}

/* acos x = 2 atan(sqrt((1 - x)/(1 + x))) for -1 <= x <= 1; x = -1 gives 2 atan(inf) = pi. */
SB_FN double sb_acos_y(float x)
{
  double a = (double)x;
  return 2.0 * sb_atan_f64(sb_sqrt((1.0 - a) / (1.0 + a)));
}

SB_FN sb_i32 sb_acos_core(float x, float *r, double *y)
{
  if (!(x >= -1.0f && x <= 1.0f)) { *r = sb_nanf(); return 1; }
  *y = sb_acos_y(x);
  return 0;
}
SB_DEFINE_CORRECTLY_ROUNDED(acos, 0x1p-49)

SB_FN sb_i32 sb_acos_lane(float x, double *y)
{
  sb_i32 flagged = !((x >= -1.0f) & (x <= 1.0f));
  *y = sb_acos_y(sb_lane_input(x, flagged, 0.5f));
  return flagged;
}

/* ---- erf, erfc ----------------------------------------------------------------------------------- */

/* erf a for 0 <= a < 1/2: a E(a^2), fit error < 2^-58. */
SB_FN double sb_erf_small(double a) { return a * sb_horner(sb_erf_e, 12, a * a); }

/* erfc a for 1/2 <= a < 10.25: exp(-a^2) g(a), a^2 exact, g = erfc exp(a^2) fitted on
 * intervals of width 1/4 (fit errors < 2^-57). Relative error < 2^-51.5. */
SB_FN double sb_erfc_large(double a)
{
  sb_i32 k = (sb_i32)((a - 0.5) * 4.0);
  double t = a - (0.625 + 0.25 * (double)k);
  return sb_exp_f64(-(a * a)) * sb_horner_row(sb_erfc_g, k, SB_ERFC_DEG + 1, t);
}

SB_FN sb_i32 sb_erf_core(float x, float *r, double *y)
{
  sb_u32 ux = sb_f32_bits(x), ax = ux & 0x7fffffffu;
  double a;
  if (ax > 0x7f800000u) { *r = sb_nanf(); return 1; }
  if (ax >= 0x40800000u) { *r = sb_copysignf(1.0f, x); return 1; } /* |x| >= 4: erfc < 2^-25 */
  if (ax == 0) { *r = x; return 1; }
  a = (double)sb_f32_from_bits(ax);
  *y = sb_with_sign(a < 0.5 ? sb_erf_small(a) : 1.0 - sb_erfc_large(a), ux);
  return 0;
}
SB_DEFINE_CORRECTLY_ROUNDED(erf, 0x1p-49)

/* Lanes of erf evaluate both kernels of sb_erf_core and select; the large one takes 1/2 where
 * |x| < 1/2 so that its table index stays in range. NaN, |x| >= 4 and zeros are flagged. */
SB_FN sb_i32 sb_erf_lane(float x, double *y)
{
  sb_u32 ux = sb_f32_bits(x), ax = ux & 0x7fffffffu;
  sb_i32 flagged = (ax >= 0x40800000u) | (ax == 0u), small;
  double a = (double)sb_lane_input(sb_f32_from_bits(ax), flagged, 1.0f), ys, yl;
  small = a < 0.5;
  ys = sb_erf_small(a);
  yl = 1.0 - sb_erfc_large(small ? 0.5 : a);
  *y = sb_with_sign(sb_lane_select(small, ys, yl), ux);
  return flagged;
}

SB_FN sb_i32 sb_erfc_core(float x, float *r, double *y)
{
  double a = (double)x;
  if (x != x) { *r = sb_nanf(); return 1; }
  if (x >= 10.25f) { *r = 0.0f; return 1; }  /* erfc x < 2^-150 */
  if (x <= -10.25f) { *r = 2.0f; return 1; } /* 2 - erfc|x| rounds to 2 */
  if (x < -0.5f) *y = 2.0 - sb_erfc_large(-a);
  else if (x < 0.5f) *y = 1.0 - sb_erf_small(a);
  else *y = sb_erfc_large(a);
  return 0;
}
SB_DEFINE_CORRECTLY_ROUNDED(erfc, 0x1p-49)

/* Lanes of erfc evaluate both kernels of sb_erfc_core and select; the large one takes 1/2 where
 * -1/2 <= x < 1/2. NaN and |x| >= 10.25 are flagged. */
SB_FN sb_i32 sb_erfc_lane(float x, double *y)
{
  sb_i32 flagged = !((x > -10.25f) & (x < 10.25f)), neg, small;
  float xs = sb_lane_input(x, flagged, 1.0f);
  double a = (double)xs, ys, yl;
  neg = xs < -0.5f;
  small = !neg & (xs < 0.5f);
  ys = 1.0 - sb_erf_small(a);
  yl = sb_erfc_large(small ? 0.5 : (neg ? -a : a));
  *y = sb_lane_select(small, ys, sb_lane_select(neg, 2.0 - yl, yl));
  return flagged;
}

/* ---- cbrt ---------------------------------------------------------------------------------------- */

/* cbrt of a positive finite binary32 a. */
SB_FN double sb_cbrt_abs(float a)
{
  sb_u64 u = sb_f64_bits((double)a);
  sb_i32 e, q, rem, i;
  double m, c;
  e = (sb_i32)(u >> 52) - 1023;
  m = sb_f64_from_bits((u & 0x000fffffffffffffull) | 0x3ff0000000000000ull);
  q = (e + 300) / 3 - 100;
  rem = e - 3 * q;
  /* cbrt m, m in [1, 2): polynomial seed (rel err < 2^-10), then three Newton steps. */
  c = sb_horner(sb_cbrt_seed, 4, m);
  for (i = 0; i < 3; i++) c = c - (c * c * c - m) / (3.0 * (c * c));
  return c * sb_cbrt_2k3[rem] * sb_pow2(q);
}

SB_FN sb_i32 sb_cbrt_core(float x, float *r, double *y)
{
  sb_u32 ux = sb_f32_bits(x), ax = ux & 0x7fffffffu;
  if (ax > 0x7f800000u) { *r = sb_nanf(); return 1; }
  if (ax == 0x7f800000u || ax == 0) { *r = x; return 1; }
  *y = sb_with_sign(sb_cbrt_abs(sb_f32_from_bits(ax)), ux);
  return 0;
}
SB_DEFINE_CORRECTLY_ROUNDED(cbrt, 0x1p-49)

SB_FN sb_i32 sb_cbrt_lane(float x, double *y)
{
  sb_u32 ux = sb_f32_bits(x), ax = ux & 0x7fffffffu;
  sb_i32 flagged = (ax >= 0x7f800000u) | (ax == 0u);
  *y = sb_with_sign(sb_cbrt_abs(sb_lane_input(sb_f32_from_bits(ax), flagged, 1.0f)), ux);
  return flagged;
}

/* ---- pow ------------------------------------------------------------------------------------------ */

/* Double-double arithmetic (Dekker, Knuth; no fma): a value is hi + lo with |lo| <= ulp(hi)/2. */
typedef struct { double hi, lo; } sb_dd;

SB_FN sb_dd sb_dd_fast_sum(double a, double b) /* |a| >= |b| or a == 0 */
{
  sb_dd r;
  r.hi = a + b;
  r.lo = b - (r.hi - a);
  return r;
}
SB_FN sb_dd sb_dd_two_sum(double a, double b)
{
  sb_dd r;
  double bb;
  r.hi = a + b;
  bb = r.hi - a;
  r.lo = (a - (r.hi - bb)) + (b - bb);
  return r;
}
SB_FN sb_dd sb_dd_two_prod(double a, double b) /* exact a b (Veltkamp split) */
{
  sb_dd r;
  double ca = 134217729.0 * a, cb = 134217729.0 * b;
  double ah = ca - (ca - a), al = a - ah, bh = cb - (cb - b), bl = b - bh;
  r.hi = a * b;
  r.lo = (((ah * bh - r.hi) + ah * bl) + al * bh) + al * bl;
  return r;
}
SB_FN sb_dd sb_dd_add(sb_dd a, sb_dd b)
{
  sb_dd s = sb_dd_two_sum(a.hi, b.hi);
  return sb_dd_fast_sum(s.hi, s.lo + (a.lo + b.lo));
}
SB_FN sb_dd sb_dd_mul(sb_dd a, sb_dd b)
{
  sb_dd p = sb_dd_two_prod(a.hi, b.hi);
  return sb_dd_fast_sum(p.hi, p.lo + (a.hi * b.lo + a.lo * b.hi));
}
SB_FN sb_dd sb_dd_mul_d(sb_dd a, double b)
{
  sb_dd p = sb_dd_two_prod(a.hi, b);
  return sb_dd_fast_sum(p.hi, p.lo + a.lo * b);
}
SB_FN sb_dd sb_dd_from(const double *c) { sb_dd r; r.hi = c[0]; r.lo = c[1]; return r; }

/* log x as double-double for a positive finite binary32 x (relative error < 2^-100):
 * the reduction of sb_log_dd with z exact, log1p(z) by its Taylor series (degree 13,
 * |z| <= 2^-8), the first five Horner steps in double-double, and ln2 in three parts. */
SB_FN sb_dd sb_log_accurate(float x)
{
  sb_u64 u = sb_f64_bits((double)x);
  sb_i32 e = (sb_i32)(u >> 52) - 1023, k;
  sb_u32 i = (sb_u32)(u >> 44) & 255u;
  double m = sb_f64_from_bits((u & 0x000fffffffffffffull) | 0x3ff0000000000000ull);
  double z = m * sb_log_tab[3 * i] - 1.0, ed, q = sb_log1p_taylor_dd[24];
  sb_dd acc, l, t;
  for (k = 11; k >= 5; k--) q = q * z + sb_log1p_taylor_dd[2 * k];
  acc = sb_dd_fast_sum(sb_log1p_taylor_dd[8], sb_log1p_taylor_dd[9] + q * z); /* c_5 + z Q */
  for (k = 3; k >= 0; k--) acc = sb_dd_add(sb_dd_from(sb_log1p_taylor_dd + 2 * k), sb_dd_mul_d(acc, z));
  acc = sb_dd_mul_d(acc, z);
  ed = (double)(e + (sb_i32)(i >> 7));
  t = sb_dd_two_prod(ed, SB_LN2_T1);
  l = sb_dd_fast_sum(ed * SB_LN2_T0, t.hi); /* e ln2_0 exact, |t.hi| much smaller */
  l.lo += t.lo + ed * SB_LN2_T2;
  l = sb_dd_add(l, sb_dd_from(sb_log_tab + 3 * i + 1));
  return sb_dd_add(l, acc);
}

/* exp t for a double-double t with |t| < 105, as double-double (relative error < 2^-100):
 * t = k ln2/64 + r with ln2/64 in three parts, exp r by its Taylor series (degree 10,
 * |r| <= 2^-7.4), 2^(k/64) from the double-double table. */
SB_FN sb_dd sb_exp_accurate(sb_dd t)
{
  double kd = sb_rint(t.hi * SB_INV_LN2_64), q = sb_exp_taylor_dd[20];
  sb_i32 j, k = (sb_i32)kd;
  sb_u32 i = (sb_u32)k & 63u;
  sb_dd r = sb_dd_two_sum(t.hi - kd * SB_LN2_64_T0, t.lo), acc, p;
  p = sb_dd_two_prod(kd, SB_LN2_64_T1);
  r = sb_dd_add(r, sb_dd_fast_sum(-p.hi, -p.lo - kd * SB_LN2_64_T2));
  for (j = 9; j >= 5; j--) q = q * r.hi + sb_exp_taylor_dd[2 * j];
  acc = sb_dd_fast_sum(sb_exp_taylor_dd[8], sb_exp_taylor_dd[9] + q * r.hi); /* 1/4! + r Q */
  for (j = 3; j >= 0; j--) acc = sb_dd_add(sb_dd_from(sb_exp_taylor_dd + 2 * j), sb_dd_mul(acc, r));
  acc = sb_dd_mul(acc, sb_dd_from(sb_exp2_64_dd + 2 * i));
  p.hi = acc.hi * sb_pow2((k - (sb_i32)i) / 64);
  p.lo = acc.lo * sb_pow2((k - (sb_i32)i) / 64);
  return p;
}

/* v = W^N 2^(G N) exactly equal to the double m? (x = X 2^ex, y = Y 2^ey with X, Y odd).
 * Only exact binary32 midpoints need this: x^y is then rational, so y = Y/2^k needs
 * X = W^(2^k) and 2^k | ex, and a 25-bit odd M = W^N needs W < 2^25 and small N. */
SB_FN sb_i32 sb_pow_equals(float x, float y, double m)
{
  sb_u32 ux = sb_f32_bits(x), uy = sb_f32_bits(y);
  sb_u64 X = ux >> 23 ? (ux & 0x7fffffu) | 0x800000u : ux, M, W, P;
  sb_i32 ex = ux >> 23 ? (sb_i32)(ux >> 23) - 150 : -149;
  sb_i64 Y = (sb_i64)(uy & 0x7fffffu), N, G, E;
  sb_i32 ey = (sb_i32)((uy >> 23) & 255u) - 150, j;
  sb_u64 um = sb_f64_bits(m);
  if (((uy >> 23) & 255u) >= 127 + 20) return 0; /* |y| >= 2^20: |G N| would exceed 2^20 */
  if ((uy >> 23) & 255u) Y |= 0x800000; else ey = -149;
  M = (um & 0x000fffffffffffffull) | 0x0010000000000000ull;
  E = (sb_i64)((um >> 52) & 2047u) - 1075;
  while ((M & 1u) == 0) { M >>= 1; E++; }
  while ((X & 1u) == 0) { X >>= 1; ex++; }
  while ((Y & 1) == 0) { Y >>= 1; ey++; }
  W = X;
  G = ex;
  if (ey >= 0) {
    N = Y << ey;
  } else {
    for (j = 0; j < -ey; j++) {
      sb_u64 s = (sb_u64)sb_sqrt((double)W);
      if (s * s != W || (G & 1) != 0) return 0;
      W = s;
      G /= 2;
    }
    N = Y;
  }
  if (uy >> 31) N = -N;
  if (G * N != E) return 0;
  if (N < 0) return W == 1 && M == 1;
  for (P = 1, j = 0; j < N && P <= M; j++) P *= W;
  return P == M;
}

/* Correct rounding of x^y from its double-double value v (v > 0): the float midpoint m nearest
 * to v.hi decides; d = v - m is exact enough, and |d| <= 2^-91 v only for exact midpoints
 * (checked with sb_pow_equals; ties to even) or for pairs closer than 2^-91 to a midpoint. */
SB_FN float sb_pow_round(sb_dd v, float x, float y)
{
  float f = (float)v.hi, below, above;
  sb_u32 fb = sb_f32_bits(f);
  double m, d;
  if (fb == 0x7f800000u) { /* v.hi at or above the overflow midpoint: decide against it */
    fb = 0x7f7fffffu;
    f = sb_f32_from_bits(fb);
  }
  if (v.hi >= (double)f) {
    double next = fb == 0x7f7fffffu ? 0x1p128 : (double)sb_f32_from_bits(fb + 1u);
    m = 0.5 * ((double)f + next);
    below = f;
    above = sb_f32_from_bits(fb + 1u);
  } else {
    m = 0.5 * ((double)f + (double)sb_f32_from_bits(fb - 1u));
    below = sb_f32_from_bits(fb - 1u);
    above = f;
  }
  d = (v.hi - m) + v.lo;
  if (d > v.hi * 0x1p-91) return above;
  if (d < -v.hi * 0x1p-91) return below;
  if (sb_pow_equals(x, y, m)) return (sb_f32_bits(below) & 1u) ? above : below;
  return d < 0.0 ? below : above;
}

/* pow(x, y) as C99 powf: special cases of C99 F.9.4.4, NaN results canonical. */
SB_FN float sb_powf(float x, float y)
{
  sb_u32 ux = sb_f32_bits(x), uy = sb_f32_bits(y), ax = ux & 0x7fffffffu, ay = uy & 0x7fffffffu;
  sb_i32 y_int, y_odd, negate = 0, ey;
  float a;
  double l, t, v, e;
  /* a signaling NaN gives NaN even where a quiet one gives 1 (IEEE 754-2019, 9.2.1) */
  if ((ax > 0x7f800000u && !(ax & 0x400000u)) || (ay > 0x7f800000u && !(ay & 0x400000u))) return sb_nanf();
  if (ay == 0 || ux == 0x3f800000u) return 1.0f;
  if (ax > 0x7f800000u || ay > 0x7f800000u) return sb_nanf();
  /* x^2 correctly rounded is the one rounding of x * x (LayerNorm's Pow(x, 2)); checked equal
   * to the general path below on all 2^32 x (docs/math.md) */
  if (uy == 0x40000000u) return x * x;
  ey = (sb_i32)(ay >> 23) - 127; /* |y| in [2^ey, 2^(ey+1)) */
  if (ey >= 23) {
    y_int = 1; /* units bit has weight 2^(ey-23) */
    y_odd = ey == 23 && (ay & 1u);
  } else if (ey >= 0) {
    y_int = (ay << (9 + ey)) == 0; /* no fraction bits */
    y_odd = y_int && ((((ay & 0x7fffffu) | 0x800000u) >> (23 - ey)) & 1u);
  } else {
    y_int = y_odd = 0;
  }
  if (ay == 0x7f800000u) {
    if (ax == 0x3f800000u) return 1.0f;
    return ((ax < 0x3f800000u) == ((uy >> 31) != 0)) ? sb_inff() : 0.0f;
  }
  if (ax == 0 || ax == 0x7f800000u) {
    /* |x|^y is 0 or inf; the sign is x's when y is an odd integer */
    float mag = ((ax == 0) == ((uy >> 31) != 0)) ? sb_inff() : 0.0f;
    return y_odd ? sb_copysignf(mag, x) : mag;
  }
  if (ux >> 31) {
    if (!y_int) return sb_nanf();
    negate = y_odd;
  }
  a = sb_f32_from_bits(ax);
  l = sb_log_dd((double)a, 0.0);
  t = (double)y * l;
  if (t > 89.5) return negate ? -sb_inff() : sb_inff();
  if (t < -104.5) return negate ? -0.0f : 0.0f;
  /* fast path: |t| < 105 has absolute error < 105 (2^-51.5 + 2^-53) < 2^-44.2 (log kernel and
   * product), so v has relative error < 2^-44.1; the test uses 2^-43 */
  v = sb_exp_f64(t);
  e = v * 0x1p-43;
  if ((float)(v - e) == (float)(v + e)) {
    float r = (float)v;
    return negate ? -r : r;
  }
  {
    float r = sb_pow_round(sb_exp_accurate(sb_dd_mul_d(sb_log_accurate(a), (double)y)), a, y);
    return negate ? -r : r;
  }
}

/* ---- composite activation formulas (binary32 arithmetic, one rounding per written op) ----------- */
/* Each formula is written in docs/math.md; NaN inputs give the canonical NaN, and so do NaN
 * results of non-NaN inputs (inf * 0, sqrt of a negative), whose bits the hardware would
 * otherwise choose (x86: 0xffc00000, CUDA: 0x7fffffff). */

SB_FN float sb_canonical_nanf(float r) { return r == r ? r : sb_nanf(); }

/* sigmoid x = 1 / (1 + exp(-x)) for x >= 0, e / (1 + e) with e = exp(x) for x < 0: both with
 * e = exp(-|x|), which sb_sigmoid_of_expf takes computed (the slice loop of sb_math.c passes it
 * from the vectorised exp slice; the formula is written here only). */
SB_FN float sb_sigmoid_of_expf(float x, float e)
{
  if (x != x) return sb_nanf();
  if (x >= 0.0f) return 1.0f / (1.0f + e);
  return e / (1.0f + e);
}
SB_FN float sb_sigmoidf(float x) { return sb_sigmoid_of_expf(x, sb_expf(sb_copysignf(x, -1.0f))); }

/* softplus x = max(x, 0) + log1p(exp(-|x|)). */
SB_FN float sb_softplusf(float x)
{
  float ax = sb_copysignf(x, 1.0f);
  if (x != x) return sb_nanf();
  return (x > 0.0f ? x : 0.0f) + sb_log1pf(sb_expf(-ax));
}

/* gelu_erf x = (0.5 x) (1 + erf(x * 0x1.6a09e6p-1)), 0x1.6a09e6p-1 = 1/sqrt(2) rounded. */
SB_FN float sb_gelu_erff(float x)
{
  if (x != x) return sb_nanf();
  return sb_canonical_nanf((0.5f * x) * (1.0f + sb_erff(x * 0x1.6a09e6p-1f)));
}

/* gelu_tanh x = (0.5 x) (1 + tanh(0x1.988454p-1 * (x + 0.044715 ((x x) x)))),
 * 0x1.988454p-1 = sqrt(2/pi) rounded; 0.044715 rounded to binary32. */
SB_FN float sb_gelu_tanhf(float x)
{
  float inner;
  if (x != x) return sb_nanf();
  inner = 0x1.988454p-1f * (x + 0.044715f * ((x * x) * x));
  return sb_canonical_nanf((0.5f * x) * (1.0f + sb_tanhf(inner)));
}

/* hardsigmoid x = min(1, max(0, alpha x + beta)). */
SB_FN float sb_hardsigmoidf(float x, float alpha, float beta)
{
  float v;
  if (x != x) return sb_nanf();
  v = alpha * x + beta;
  v = v > 0.0f ? v : 0.0f;
  return v < 1.0f ? v : 1.0f;
}

/* hardswish x = x hardsigmoid(x; alpha = 1/6 rounded, beta = 1/2). */
SB_FN float sb_hardswishf(float x)
{
  if (x != x) return sb_nanf();
  return sb_canonical_nanf(x * sb_hardsigmoidf(x, 0x1.555556p-3f, 0.5f));
}

/* mish x = x tanh(softplus x). */
SB_FN float sb_mishf(float x)
{
  if (x != x) return sb_nanf();
  return sb_canonical_nanf(x * sb_tanhf(sb_softplusf(x)));
}

/* elu x = x for x > 0, alpha expm1(x) otherwise. */
SB_FN float sb_eluf(float x, float alpha)
{
  if (x != x) return sb_nanf();
  return x > 0.0f ? x : alpha * sb_expm1f(x);
}

/* selu x = gamma x for x > 0, gamma (alpha expm1(x)) otherwise. */
SB_FN float sb_seluf(float x, float alpha, float gamma)
{
  if (x != x) return sb_nanf();
  return x > 0.0f ? gamma * x : gamma * (alpha * sb_expm1f(x));
}

/* celu x = x for x > 0, alpha expm1(x / alpha) otherwise. */
SB_FN float sb_celuf(float x, float alpha)
{
  if (x != x) return sb_nanf();
  return x > 0.0f ? x : alpha * sb_expm1f(x / alpha);
}

/* leaky_relu x = alpha x for x < 0, x otherwise. */
SB_FN float sb_leaky_reluf(float x, float alpha)
{
  if (x != x) return sb_nanf();
  return x < 0.0f ? sb_canonical_nanf(alpha * x) : x;
}

/* rsqrt_formula x = 1 / sqrt(x) (two correctly rounded binary32 operations). */
SB_FN float sb_rsqrt_formulaf(float x)
{
  if (x != x) return sb_nanf();
  return sb_canonical_nanf(1.0f / sb_sqrtf(x));
}

#endif /* SB_MATH_H */
