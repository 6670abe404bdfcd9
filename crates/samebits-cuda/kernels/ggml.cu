// The device dequantization of the ggml block formats: one definition per format, read by every
// kernel over GGUF weights (kernels/gguf.cu: the products, the gather and the dequantized
// transpose; kernels/attention.cu through sb_gguf_tile_of). The type codes SB_GGML_<NAME>, the
// block geometry SB_GGML_<NAME>_ELEMS / SB_GGML_<NAME>_BYTES and the list of device types
// SB_GGML_DEVICE_TYPES(X) are generated before this file from samebits-ggml's type table
// (src/gguf.rs, ggml_type_source).
//
// The formulas are those of docs/gguf.md ("F32, F16, BF16", "Q4_0, Q4_1, Q5_0, Q5_1, Q8_0",
// "Q4_K, Q5_K, Q6_K", "Q2_K, Q3_K" and "IQ4_NL, IQ4_XS"), defined on the CPU by crates/samebits-ggml/src/{float,legacy,kquant}.rs; the test
// gguf::tests::device_dequantization_equals_samebits_ggml compiles this file on the host and
// compares every format with samebits-ggml bit for bit on random blocks:
//   F32: the stored float; F16, BF16: exact conversion; Q4_0: d * (q - 8); Q4_1, Q5_1:
//   fma(d, q, m); Q5_0: d * (q - 16); Q8_0: d * q (q signed). d and m are f16, converted exactly; the integer codes become floats
//   exactly through the 2^23 exponent trick (one logical op and one exact subtraction).

// The integer q (0 <= q < 2^23) as a float, exactly: 2^23 + q has q in its low mantissa bits.
__device__ __forceinline__ float sb_small_uint_to_f32(unsigned int q)
{
  return __uint_as_float(0x4b000000u | q) - 8388608.0f;
}

// Exact f16 -> f32 conversion of the bits `h`.
__device__ __forceinline__ float sb_f16_to_f32(unsigned short h)
{
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}

// SbGgmlBlock<TYPE>(block): the block of a ggml type that starts at `block` (BYTES bytes, a
// whole number of blocks from the start of a row, so aligned as noted per format), its scales
// read once; value(i) is element i (0 <= i < ELEMS) dequantized. The types of the exact-integer
// products (SB_GGML_INT8_TYPES: Q4_0, Q4_1, Q8_0) also give code_word(j), their integer codes
// four at a time, the codes of contract section int8-products. The products unroll i over a
// block (every shift a constant, each code word loaded once); the gather takes one run-time i.
template <int TYPE>
struct SbGgmlBlock;

template <>
struct SbGgmlBlock<SB_GGML_F32> {
  static constexpr int ELEMS = SB_GGML_F32_ELEMS, BYTES = SB_GGML_F32_BYTES;
  const float* w;
  __device__ __forceinline__ explicit SbGgmlBlock(const unsigned char* block)
      : w(reinterpret_cast<const float*>(block)) {}
  __device__ __forceinline__ float value(int) const { return *w; }
};

template <>
struct SbGgmlBlock<SB_GGML_F16> {
  static constexpr int ELEMS = SB_GGML_F16_ELEMS, BYTES = SB_GGML_F16_BYTES;
  const unsigned short* w;
  __device__ __forceinline__ explicit SbGgmlBlock(const unsigned char* block)
      : w(reinterpret_cast<const unsigned short*>(block)) {}
  __device__ __forceinline__ float value(int) const { return sb_f16_to_f32(*w); }
};

// BF16: the 16 high bits of an f32, so the conversion is exact (the bits shifted up).
template <>
struct SbGgmlBlock<SB_GGML_BF16> {
  static constexpr int ELEMS = SB_GGML_BF16_ELEMS, BYTES = SB_GGML_BF16_BYTES;
  const unsigned short* w;
  __device__ __forceinline__ explicit SbGgmlBlock(const unsigned char* block)
      : w(reinterpret_cast<const unsigned short*>(block)) {}
  __device__ __forceinline__ float value(int) const { return __uint_as_float((unsigned int)*w << 16); }
};

// Q4_0, 2-byte aligned: d (f16), then 16 code bytes as 8 u16 words: element i < 16 is the low
// nibble of code byte i, element i + 16 its high nibble. x = d * (q - 8).
template <>
struct SbGgmlBlock<SB_GGML_Q4_0> {
  static constexpr int ELEMS = SB_GGML_Q4_0_ELEMS, BYTES = SB_GGML_Q4_0_BYTES;
  float d;
  const unsigned short* qs;
  __device__ __forceinline__ explicit SbGgmlBlock(const unsigned char* block)
  {
    const unsigned short* h = reinterpret_cast<const unsigned short*>(block);
    d = sb_f16_to_f32(h[0]);
    qs = h + 1;
  }
  __device__ __forceinline__ float value(int i) const
  {
    const unsigned int q = (qs[(i & 15) >> 1] >> (8 * (i & 1) + 4 * (i >> 4))) & 0x0fu;
    return d * (sb_small_uint_to_f32(q) - 8.0f);
  }
  // The integer codes q - 8 of elements 4j .. 4j + 3 (0 <= j < 8) as signed bytes, element
  // 4j + r in byte r (contract: int8-products).
  __device__ __forceinline__ unsigned int code_word(int j) const
  {
    const unsigned int w = (unsigned int)qs[2 * (j & 3)] | ((unsigned int)qs[2 * (j & 3) + 1] << 16);
    return __vsub4((w >> (4 * (j >> 2))) & 0x0f0f0f0fu, 0x08080808u);
  }
};

// Q4_1, 4-byte aligned: d and m (f16) in the first u32 word, then 16 code bytes as 4 u32 words,
// nibbles as Q4_0. x = fma(d, q, m).
template <>
struct SbGgmlBlock<SB_GGML_Q4_1> {
  static constexpr int ELEMS = SB_GGML_Q4_1_ELEMS, BYTES = SB_GGML_Q4_1_BYTES;
  float d, m;
  const unsigned int* qs;
  __device__ __forceinline__ explicit SbGgmlBlock(const unsigned char* block)
  {
    const unsigned int* words = reinterpret_cast<const unsigned int*>(block);
    const unsigned int dm = words[0];
    d = sb_f16_to_f32((unsigned short)(dm & 0xffffu));
    m = sb_f16_to_f32((unsigned short)(dm >> 16));
    qs = words + 1;
  }
  __device__ __forceinline__ float value(int i) const
  {
    const unsigned int q = (qs[(i & 15) >> 2] >> (8 * (i & 3) + 4 * (i >> 4))) & 0x0fu;
    return __fmaf_rn(d, sb_small_uint_to_f32(q), m);
  }
  // The integer codes q of elements 4j .. 4j + 3 (0 <= j < 8) as bytes, element 4j + r in
  // byte r (contract: int8-products).
  __device__ __forceinline__ unsigned int code_word(int j) const
  {
    return (qs[j & 3] >> (4 * (j >> 2))) & 0x0f0f0f0fu;
  }
};

// The 5-bit code of element i of Q5_0 / Q5_1: the Q4_0 nibble of the 16 code bytes `qs` (read
// as bytes: Q5_0's are only 2-byte aligned) and bit i of the 32-bit `qh` as bit 4.
__device__ __forceinline__ unsigned int sb_five_bit_code(const unsigned char* qs, unsigned int qh,
                                                        int i)
{
  return ((qs[i & 15] >> (4 * (i >> 4))) & 0x0fu) | (((qh >> i) & 1u) << 4);
}

// Q5_0, 2-byte aligned: d (f16), qh (4 bytes, as two u16 words), 16 code bytes.
// x = d * (q - 16).
template <>
struct SbGgmlBlock<SB_GGML_Q5_0> {
  static constexpr int ELEMS = SB_GGML_Q5_0_ELEMS, BYTES = SB_GGML_Q5_0_BYTES;
  float d;
  unsigned int qh;
  const unsigned char* qs;
  __device__ __forceinline__ explicit SbGgmlBlock(const unsigned char* block) : qs(block + 6)
  {
    const unsigned short* h = reinterpret_cast<const unsigned short*>(block);
    d = sb_f16_to_f32(h[0]);
    qh = (unsigned int)h[1] | ((unsigned int)h[2] << 16);
  }
  __device__ __forceinline__ float value(int i) const
  {
    return d * (sb_small_uint_to_f32(sb_five_bit_code(qs, qh, i)) - 16.0f);
  }
};

// Q5_1, 4-byte aligned: d and m (f16) in the first u32 word, qh (u32), 16 code bytes.
// x = fma(d, q, m).
template <>
struct SbGgmlBlock<SB_GGML_Q5_1> {
  static constexpr int ELEMS = SB_GGML_Q5_1_ELEMS, BYTES = SB_GGML_Q5_1_BYTES;
  float d, m;
  unsigned int qh;
  const unsigned char* qs;
  __device__ __forceinline__ explicit SbGgmlBlock(const unsigned char* block) : qs(block + 8)
  {
    const unsigned int* words = reinterpret_cast<const unsigned int*>(block);
    d = sb_f16_to_f32((unsigned short)(words[0] & 0xffffu));
    m = sb_f16_to_f32((unsigned short)(words[0] >> 16));
    qh = words[1];
  }
  __device__ __forceinline__ float value(int i) const
  {
    return __fmaf_rn(d, sb_small_uint_to_f32(sb_five_bit_code(qs, qh, i)), m);
  }
};

// Q8_0, 2-byte aligned: d (f16), then 32 signed code bytes as 16 u16 words. x = d * q, with
// q + 128 taken from the code's bits (code ^ 0x80), then exactly (q + 128) - 128.
template <>
struct SbGgmlBlock<SB_GGML_Q8_0> {
  static constexpr int ELEMS = SB_GGML_Q8_0_ELEMS, BYTES = SB_GGML_Q8_0_BYTES;
  float d;
  const unsigned short* qs;
  __device__ __forceinline__ explicit SbGgmlBlock(const unsigned char* block)
  {
    const unsigned short* h = reinterpret_cast<const unsigned short*>(block);
    d = sb_f16_to_f32(h[0]);
    qs = h + 1;
  }
  __device__ __forceinline__ float value(int i) const
  {
    const unsigned int q = ((qs[i >> 1] >> (8 * (i & 1))) & 0xffu) ^ 0x80u;
    return d * (sb_small_uint_to_f32(q) - 128.0f);
  }
  // The signed codes q of elements 4j .. 4j + 3 (0 <= j < 8), element 4j + r in byte r
  // (contract: int8-products).
  __device__ __forceinline__ unsigned int code_word(int j) const
  {
    return (unsigned int)qs[2 * j] | ((unsigned int)qs[2 * j + 1] << 16);
  }
};

// The 6-bit scale and min of sub-block j (0..8) of a Q4_K / Q5_K super-block, packed in 12
// bytes: sub-blocks 0..3 in the low 6 bits of bytes j and j + 4; 4..7 in a nibble of byte j + 4
// and the top 2 bits of bytes j - 4 and j.
__device__ __forceinline__ void sb_kquant_scale_min(const unsigned char* packed, int j,
                                                    unsigned int& sc, unsigned int& mn)
{
  if (j < 4) {
    sc = packed[j] & 63u;
    mn = packed[j + 4] & 63u;
  } else {
    sc = (packed[j + 4] & 0x0fu) | ((packed[j - 4] >> 6) << 4);
    mn = (packed[j + 4] >> 4) | ((packed[j] >> 6) << 4);
  }
}

// What Q4_K and Q5_K share: d and dmin (f16) first, then 12 bytes of packed 6-bit scales and
// mins; element i of sub-block s = i / 32 with unsigned code q is
// x = fma(d * sc, q, -(dmin * mn)) (both products exact).
struct SbKquantScaledMin {
  float d, dmin;
  const unsigned char* b;
  __device__ __forceinline__ explicit SbKquantScaledMin(const unsigned char* block) : b(block)
  {
    const unsigned short* h = reinterpret_cast<const unsigned short*>(block);
    d = sb_f16_to_f32(h[0]);
    dmin = sb_f16_to_f32(h[1]);
  }
  __device__ __forceinline__ float scaled(int s, unsigned int q) const
  {
    unsigned int sc, mn;
    sb_kquant_scale_min(b + 4, s, sc, mn);
    return __fmaf_rn(d * sb_small_uint_to_f32(sc), sb_small_uint_to_f32(q),
                     -(dmin * sb_small_uint_to_f32(mn)));
  }
};

// Q4_K, 2-byte aligned, 256 elements: the shared header, then 128 code bytes. Element i
// (s = i / 32, g = s / 2, high = s % 2, l = i % 32): code (qs[32 g + l] >> 4 high) & 15.
template <>
struct SbGgmlBlock<SB_GGML_Q4_K> : SbKquantScaledMin {
  static constexpr int ELEMS = SB_GGML_Q4_K_ELEMS, BYTES = SB_GGML_Q4_K_BYTES;
  __device__ __forceinline__ explicit SbGgmlBlock(const unsigned char* block)
      : SbKquantScaledMin(block) {}
  __device__ __forceinline__ float value(int i) const
  {
    const int s = i >> 5;
    return scaled(s, (b[16 + 32 * (s >> 1) + (i & 31)] >> (4 * (s & 1))) & 0x0fu);
  }
};

// Q5_K, 2-byte aligned, 256 elements: the shared header, 32 bytes qh, then 128 code bytes as
// Q4_K's; the code's bit 4 is bit s of qh[l].
template <>
struct SbGgmlBlock<SB_GGML_Q5_K> : SbKquantScaledMin {
  static constexpr int ELEMS = SB_GGML_Q5_K_ELEMS, BYTES = SB_GGML_Q5_K_BYTES;
  __device__ __forceinline__ explicit SbGgmlBlock(const unsigned char* block)
      : SbKquantScaledMin(block) {}
  __device__ __forceinline__ float value(int i) const
  {
    const int s = i >> 5, l = i & 31;
    const unsigned int low = (b[48 + 32 * (s >> 1) + l] >> (4 * (s & 1))) & 0x0fu;
    return scaled(s, low | (((b[16 + l] >> s) & 1u) << 4));
  }
};

// Q6_K, 2-byte aligned, 256 elements: 128 bytes ql, 64 bytes qh, 16 signed scales, d (f16).
// Element i: half h = i / 128, r = (i % 128) / 32, l = i % 32; code = nibble r / 2 of
// ql[64 h + l + 32 (r % 2)] | bits 2 r, 2 r + 1 of qh[32 h + l] as bits 4, 5; scale
// sc = scales[8 h + 2 r + l / 16]; x = (d * sc) * (code - 32) (the first product exact).
template <>
struct SbGgmlBlock<SB_GGML_Q6_K> {
  static constexpr int ELEMS = SB_GGML_Q6_K_ELEMS, BYTES = SB_GGML_Q6_K_BYTES;
  float d;
  const unsigned char* b;
  __device__ __forceinline__ explicit SbGgmlBlock(const unsigned char* block) : b(block)
  {
    d = sb_f16_to_f32(reinterpret_cast<const unsigned short*>(block)[104]);
  }
  __device__ __forceinline__ float value(int i) const
  {
    const int h = i >> 7, r = (i >> 5) & 3, l = i & 31;
    const unsigned int low = (b[64 * h + l + 32 * (r & 1)] >> (4 * (r >> 1))) & 0x0fu;
    const unsigned int q = low | (((b[128 + 32 * h + l] >> (2 * r)) & 3u) << 4);
    const float sc = (float)(signed char)b[192 + 8 * h + 2 * r + (l >> 4)];
    return (d * sc) * (sb_small_uint_to_f32(q) - 32.0f);
  }
};

// IQ4_NL, 2-byte aligned, 32 elements: d (f16), then 16 code bytes; element i < 16 is the low
// nibble of byte i, element i + 16 its high nibble; x = d * sb_iq4nl_values[code].
template <>
struct SbGgmlBlock<SB_GGML_IQ4_NL> {
  static constexpr int ELEMS = SB_GGML_IQ4_NL_ELEMS, BYTES = SB_GGML_IQ4_NL_BYTES;
  float d;
  const unsigned char* qs;
  __device__ __forceinline__ explicit SbGgmlBlock(const unsigned char* block) : qs(block + 2)
  {
    d = sb_f16_to_f32(reinterpret_cast<const unsigned short*>(block)[0]);
  }
  __device__ __forceinline__ float value(int i) const
  {
    const unsigned int q = (qs[i & 15] >> (4 * (i >> 4))) & 0x0fu;
    return d * (float)sb_iq4nl_values[q];
  }
};

// IQ4_XS, 2-byte aligned, 256 elements: d (f16), scales_h (u16), scales_l[4], 128 code bytes.
// Sub-block s = i / 32 has ls = ((scales_l[s / 2] >> 4 (s % 2)) & 15) | ((scales_h >> 2 s) & 3)
// << 4 and the code bytes 16 s .., nibbles as IQ4_NL; x = (d * (ls - 32)) * value[code].
template <>
struct SbGgmlBlock<SB_GGML_IQ4_XS> {
  static constexpr int ELEMS = SB_GGML_IQ4_XS_ELEMS, BYTES = SB_GGML_IQ4_XS_BYTES;
  float d;
  unsigned int scales_h;
  const unsigned char* b;
  __device__ __forceinline__ explicit SbGgmlBlock(const unsigned char* block) : b(block)
  {
    const unsigned short* h = reinterpret_cast<const unsigned short*>(block);
    d = sb_f16_to_f32(h[0]);
    scales_h = h[1];
  }
  __device__ __forceinline__ float value(int i) const
  {
    const int s = i >> 5, j = i & 31;
    const int ls = (int)((b[4 + (s >> 1)] >> (4 * (s & 1))) & 0x0fu) |
                   (int)(((scales_h >> (2 * s)) & 3u) << 4);
    const unsigned int q = (b[8 + 16 * s + (j & 15)] >> (4 * (j >> 4))) & 0x0fu;
    return (d * (float)(ls - 32)) * (float)sb_iq4nl_values[q];
  }
};

// The 2-bit code of element e of Q2_K / Q3_K's 64 code bytes: element 128 g + 32 s + l takes
// bits 2 s, 2 s + 1 of qs[32 g + l].
__device__ __forceinline__ unsigned int sb_two_bit_code(const unsigned char* qs, int e)
{
  return (qs[32 * (e >> 7) + (e & 31)] >> (2 * ((e >> 5) & 3))) & 3u;
}

// Q2_K, 2-byte aligned, 256 elements: scales[16], qs[64], d, dmin (f16). Sub-block j = e / 16
// has dl = d * (scales[j] & 15), ml = dmin * (scales[j] >> 4) (exact); x = dl * q - ml.
template <>
struct SbGgmlBlock<SB_GGML_Q2_K> {
  static constexpr int ELEMS = SB_GGML_Q2_K_ELEMS, BYTES = SB_GGML_Q2_K_BYTES;
  float d, dmin;
  const unsigned char* b;
  __device__ __forceinline__ explicit SbGgmlBlock(const unsigned char* block) : b(block)
  {
    const unsigned short* h = reinterpret_cast<const unsigned short*>(block);
    d = sb_f16_to_f32(h[40]);
    dmin = sb_f16_to_f32(h[41]);
  }
  __device__ __forceinline__ float value(int e) const
  {
    const unsigned int sc = b[e >> 4];
    const float dl = d * sb_small_uint_to_f32(sc & 15u), ml = dmin * sb_small_uint_to_f32(sc >> 4);
    return dl * sb_small_uint_to_f32(sb_two_bit_code(b + 16, e)) - ml;
  }
};

// Q3_K, 2-byte aligned, 256 elements: hmask[32], qs[64], scales[12], d (f16). Sub-block
// j = e / 16 has the 6-bit scale ((scales[j % 8] >> 4 (j / 8)) & 15) | ((scales[8 + j % 4] >>
// 2 (j / 4)) & 3) << 4, minus 32; the code loses 4 when bit e / 32 of hmask[e % 32] is clear;
// x = (d * scale) * q (exact).
template <>
struct SbGgmlBlock<SB_GGML_Q3_K> {
  static constexpr int ELEMS = SB_GGML_Q3_K_ELEMS, BYTES = SB_GGML_Q3_K_BYTES;
  float d;
  const unsigned char* b;
  __device__ __forceinline__ explicit SbGgmlBlock(const unsigned char* block) : b(block)
  {
    d = sb_f16_to_f32(reinterpret_cast<const unsigned short*>(block)[54]);
  }
  __device__ __forceinline__ float value(int e) const
  {
    const int j = e >> 4;
    const unsigned int low = (b[96 + (j & 7)] >> (4 * (j >> 3))) & 15u;
    const unsigned int high = (b[104 + (j & 3)] >> (2 * (j >> 2))) & 3u;
    const int scale = (int)(low | (high << 4)) - 32;
    const int clear = ((b[e & 31] >> (e >> 5)) & 1u) == 0u;
    const int q = (int)sb_two_bit_code(b + 32, e) - 4 * clear;
    return (d * (float)scale) * (float)q;
  }
};
