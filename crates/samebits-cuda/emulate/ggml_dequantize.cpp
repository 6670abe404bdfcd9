// Runs the device dequantization of kernels/ggml.cu on the host, for the test
// gguf::tests::device_dequantization_equals_samebits_ggml (src/gguf.rs), which writes
// ggml_host.inc (the generated type source, then ggml.cu with its one inline PTX conversion
// replaced by sb_host_f16_to_f32) and compiles this file with g++. Usage: ggml_dequantize TYPE
// (a ggml type id) < blocks > values: the raw blocks on stdin, every element's value
// SbGgmlBlock<TYPE>(block).value(i) on stdout as raw little-endian f32; ggml_dequantize TYPE
// codes, for a type of SB_GGML_INT8_TYPES: every block's code_word(0 .. 7) as raw
// little-endian u32 (its 32 integer codes as bytes, in element order).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#define __device__
#define __forceinline__ inline
inline float __uint_as_float(unsigned u) { float f; std::memcpy(&f, &u, 4); return f; }
inline float __fmaf_rn(float a, float b, float c) { return std::fmaf(a, b, c); }
inline float sb_nanf() { return NAN; }
// Per-byte subtraction modulo 256 (what the PTX instruction behind __vsub4 does).
inline unsigned __vsub4(unsigned a, unsigned b)
{
  unsigned r = 0;
  for (int i = 0; i < 32; i += 8) r |= (((a >> i) - (b >> i)) & 0xffu) << i;
  return r;
}
// Exact f16 -> f32 (what cvt.f32.f16 does), for finite f16 values.
inline float sb_host_f16_to_f32(unsigned short h)
{
  const int exponent = (h >> 10) & 31, mantissa = h & 1023;
  const float v = exponent == 0 ? std::ldexp((float)mantissa, -24)
                                : std::ldexp((float)(mantissa | 1024), exponent - 25);
  return (h >> 15) ? -v : v;
}
#include "ggml_host.inc"

template <int TYPE>
static void dequantize(const std::vector<unsigned char>& bytes, std::vector<float>& out)
{
  using Block = SbGgmlBlock<TYPE>;
  for (size_t b = 0; b + Block::BYTES <= bytes.size(); b += Block::BYTES) {
    const Block block(bytes.data() + b);
    for (int i = 0; i < Block::ELEMS; ++i) out.push_back(block.value(i));
  }
}

template <int TYPE>
static void code_words(const std::vector<unsigned char>& bytes, std::vector<unsigned>& out)
{
  using Block = SbGgmlBlock<TYPE>;
  for (size_t b = 0; b + Block::BYTES <= bytes.size(); b += Block::BYTES) {
    const Block block(bytes.data() + b);
    for (int j = 0; j < 8; ++j) out.push_back(block.code_word(j));
  }
}

int main(int argc, char** argv)
{
  if (argc != 2 && !(argc == 3 && std::strcmp(argv[2], "codes") == 0)) return 2;
  const int type = std::atoi(argv[1]);
  std::vector<unsigned char> bytes;
  for (int c; (c = std::getchar()) != EOF;) bytes.push_back((unsigned char)c);
  if (argc == 3) {
    std::vector<unsigned> words;
#define SB_HOST_CODES(name, TYPE) \
  if (type == TYPE) {             \
    code_words<TYPE>(bytes, words); \
    std::fwrite(words.data(), sizeof(unsigned), words.size(), stdout); \
    return 0;                     \
  }
    SB_GGML_INT8_TYPES(SB_HOST_CODES)
    return 3;
  }
  std::vector<float> out;
  bool known = false;
#define SB_HOST_DEQUANTIZE(name, TYPE) \
  if (type == TYPE) {                  \
    dequantize<TYPE>(bytes, out);      \
    known = true;                      \
  }
  SB_GGML_DEVICE_TYPES(SB_HOST_DEQUANTIZE)
  if (!known) return 3;
  std::fwrite(out.data(), sizeof(float), out.size(), stdout);
  return 0;
}
