// Generated from Rust by samebits-cuda/src/device_abi.rs: constants and kernel argument
// structs shared with the host code. Do not edit; change the Rust definitions.

// terms of one reduction tile (contract: canonical-sum), samebits_kernels::REDUCTION_TILE
#define SB_TILE 64
// most axes of a broadcast, strided copy or resize
#define SB_MAX_RANK 6
// binary operation code of BinaryKernel::Add (sb_binary_op, chain steps)
#define SB_BINARY_ADD 0
// binary operation code of BinaryKernel::Sub
#define SB_BINARY_SUB 1
// binary operation code of BinaryKernel::Mul
#define SB_BINARY_MUL 2
// binary operation code of BinaryKernel::Div
#define SB_BINARY_DIV 3
// binary operation code of BinaryKernel::Max (contract: reduce-extrema)
#define SB_BINARY_MAX 4
// binary operation code of BinaryKernel::Min (contract: reduce-extrema)
#define SB_BINARY_MIN 5
// binary operation code of BinaryKernel::Pow (sb_powf, contract: activation)
#define SB_BINARY_POW 6
// most steps of a device chain
#define SB_CHAIN_STEPS 16
// most inputs of a device chain
#define SB_CHAIN_INPUTS 32
// most operands of a chain step
#define SB_CHAIN_OPERANDS 5
// a chain step's missing operand
#define SB_CHAIN_ABSENT (-1000)
// chain input layout: the whole output shape
#define SB_CHAIN_FULL 0
// chain input layout: one element
#define SB_CHAIN_SCALAR 1
// chain input layout: one value per channel
#define SB_CHAIN_CHANNEL 2
// chain input layout: one value per row of the last axis
#define SB_CHAIN_ROW 3
// chain input layout: one value per position along the last axis
#define SB_CHAIN_LAST 4
// chain step code of Relu; codes below it are the binary operations of sb_binary_op
#define SB_CHAIN_RELU 7
// chain step code of Clip (operands x, lo, hi)
#define SB_CHAIN_CLIP 8
// chain step code of BatchNormalization (operands x, scale, bias, mean, var)
#define SB_CHAIN_BATCH_NORM 9
// chain step code of activation 0 of sb_activation; activation a is this + a
#define SB_CHAIN_ACTIVATION 16
// reduction code of ReduceKind::Sum
#define SB_REDUCE_SUM 0
// reduction code of ReduceKind::SumSquares
#define SB_REDUCE_SUM_SQUARES 1
// reduction code of ReduceKind::Prod
#define SB_REDUCE_PROD 2
// reduction code of ReduceKind::Max
#define SB_REDUCE_MAX 3
// reduction code of ReduceKind::Min
#define SB_REDUCE_MIN 4
// most rows of the split-K GEMV
#define SB_GEMV_MAX_M 8
// rows a warp of the recurrent kernel reduces at once, samebits_ops::RECURRENT_STAGE_ROWS
#define SB_RECURRENT_ROWS 32
// columns of one staged piece of them, samebits_ops::RECURRENT_STAGE_COLS
#define SB_RECURRENT_COLS 16
// floats one 64-term tile of a GGUF product's activation row takes in shared memory
#define SB_GGUF_PITCH 68
// Generated from samebits-ggml's type table (src/gguf.rs).
#define SB_GGML_F32 0
#define SB_GGML_F32_ELEMS 1
#define SB_GGML_F32_BYTES 4
#define SB_GGML_F16 1
#define SB_GGML_F16_ELEMS 1
#define SB_GGML_F16_BYTES 2
#define SB_GGML_BF16 30
#define SB_GGML_BF16_ELEMS 1
#define SB_GGML_BF16_BYTES 2
#define SB_GGML_Q4_0 2
#define SB_GGML_Q4_0_ELEMS 32
#define SB_GGML_Q4_0_BYTES 18
#define SB_GGML_Q4_1 3
#define SB_GGML_Q4_1_ELEMS 32
#define SB_GGML_Q4_1_BYTES 20
#define SB_GGML_Q5_0 6
#define SB_GGML_Q5_0_ELEMS 32
#define SB_GGML_Q5_0_BYTES 22
#define SB_GGML_Q5_1 7
#define SB_GGML_Q5_1_ELEMS 32
#define SB_GGML_Q5_1_BYTES 24
#define SB_GGML_Q8_0 8
#define SB_GGML_Q8_0_ELEMS 32
#define SB_GGML_Q8_0_BYTES 34
#define SB_GGML_Q2_K 10
#define SB_GGML_Q2_K_ELEMS 256
#define SB_GGML_Q2_K_BYTES 84
#define SB_GGML_Q3_K 11
#define SB_GGML_Q3_K_ELEMS 256
#define SB_GGML_Q3_K_BYTES 110
#define SB_GGML_Q4_K 12
#define SB_GGML_Q4_K_ELEMS 256
#define SB_GGML_Q4_K_BYTES 144
#define SB_GGML_Q5_K 13
#define SB_GGML_Q5_K_ELEMS 256
#define SB_GGML_Q5_K_BYTES 176
#define SB_GGML_Q6_K 14
#define SB_GGML_Q6_K_ELEMS 256
#define SB_GGML_Q6_K_BYTES 210
#define SB_GGML_IQ4_NL 20
#define SB_GGML_IQ4_NL_ELEMS 32
#define SB_GGML_IQ4_NL_BYTES 18
#define SB_GGML_IQ4_XS 23
#define SB_GGML_IQ4_XS_ELEMS 256
#define SB_GGML_IQ4_XS_BYTES 136
#define SB_GGML_DEVICE_TYPES(X) X(f32, SB_GGML_F32) X(f16, SB_GGML_F16) X(bf16, SB_GGML_BF16) X(q4_0, SB_GGML_Q4_0) X(q4_1, SB_GGML_Q4_1) X(q5_0, SB_GGML_Q5_0) X(q5_1, SB_GGML_Q5_1) X(q8_0, SB_GGML_Q8_0) X(q2_k, SB_GGML_Q2_K) X(q3_k, SB_GGML_Q3_K) X(q4_k, SB_GGML_Q4_K) X(q5_k, SB_GGML_Q5_K) X(q6_k, SB_GGML_Q6_K) X(iq4_nl, SB_GGML_IQ4_NL) X(iq4_xs, SB_GGML_IQ4_XS)
#define SB_GGML_INT8_TYPES(X) X(q4_0, SB_GGML_Q4_0) X(q4_1, SB_GGML_Q4_1) X(q8_0, SB_GGML_Q8_0)
// The values of IQ4_NL / IQ4_XS codes (samebits-ggml's IQ4_NL_VALUES).
__device__ const signed char sb_iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// The layout of a broadcast binary operation: output dims (row-major, last fastest) and
// each operand's element strides over them (0 along broadcast axes), all padded in front
// to [`MAX_RANK`] axes (unused leading axes have dim 1).
struct SbBroadcast {
  long long dims[6];
  long long a_strides[6];
  long long b_strides[6];
};
static_assert(sizeof(SbBroadcast) == 144, "SbBroadcast: Rust size");
static_assert(alignof(SbBroadcast) == 8, "SbBroadcast: Rust alignment");
static_assert(sizeof(SbBroadcast::dims) == 48, "SbBroadcast::dims: Rust size");
static_assert(sizeof(SbBroadcast::a_strides) == 48, "SbBroadcast::a_strides: Rust size");
static_assert(sizeof(SbBroadcast::b_strides) == 48, "SbBroadcast::b_strides: Rust size");

// A strided batched matrix view: element (b, r, c) at offset + b*batch + r*row + c*col.
struct SbMat {
  long long offset;
  long long batch_stride;
  long long row_stride;
  long long col_stride;
};
static_assert(sizeof(SbMat) == 32, "SbMat: Rust size");
static_assert(alignof(SbMat) == 8, "SbMat: Rust alignment");
static_assert(sizeof(SbMat::offset) == 8, "SbMat::offset: Rust size");
static_assert(sizeof(SbMat::batch_stride) == 8, "SbMat::batch_stride: Rust size");
static_assert(sizeof(SbMat::row_stride) == 8, "SbMat::row_stride: Rust size");
static_assert(sizeof(SbMat::col_stride) == 8, "SbMat::col_stride: Rust size");

// contract: gemm-epilogue. kind 0: acc; 1: acc + c; 2: alpha * acc;
// 3: (alpha * acc) + (beta * c). `c` is indexed (b, i, j) through `view`.
struct SbEpilogue {
  SbMat view;
  float alpha;
  float beta;
  int kind;
};
static_assert(sizeof(SbEpilogue) == 48, "SbEpilogue: Rust size");
static_assert(alignof(SbEpilogue) == 8, "SbEpilogue: Rust alignment");
static_assert(sizeof(SbEpilogue::view) == 32, "SbEpilogue::view: Rust size");
static_assert(sizeof(SbEpilogue::alpha) == 4, "SbEpilogue::alpha: Rust size");
static_assert(sizeof(SbEpilogue::beta) == 4, "SbEpilogue::beta: Rust size");
static_assert(sizeof(SbEpilogue::kind) == 4, "SbEpilogue::kind: Rust size");

// One matrix of a products launch (kernels/gguf.cu): weights [rows, cols], output y
// [M, rows]; `add` ([M, rows] or null) is added to each finished dot; with rot > 0 the
// first rot features of each head of head_size outputs are rotated as interleaved pairs by
// the cos / sin rows (one row of `width` values per activation row).
struct SbGgufMatrix {
  const unsigned char* w;
  float* y;
  const float* add;
  int rows;
  int head_size;
  int rot;
  int pad;
};
static_assert(sizeof(SbGgufMatrix) == 40, "SbGgufMatrix: Rust size");
static_assert(alignof(SbGgufMatrix) == 8, "SbGgufMatrix: Rust alignment");
static_assert(sizeof(SbGgufMatrix::w) == 8, "SbGgufMatrix::w: Rust size");
static_assert(sizeof(SbGgufMatrix::y) == 8, "SbGgufMatrix::y: Rust size");
static_assert(sizeof(SbGgufMatrix::add) == 8, "SbGgufMatrix::add: Rust size");
static_assert(sizeof(SbGgufMatrix::rows) == 4, "SbGgufMatrix::rows: Rust size");
static_assert(sizeof(SbGgufMatrix::head_size) == 4, "SbGgufMatrix::head_size: Rust size");
static_assert(sizeof(SbGgufMatrix::rot) == 4, "SbGgufMatrix::rot: Rust size");
static_assert(sizeof(SbGgufMatrix::pad) == 4, "SbGgufMatrix::pad: Rust size");

// The matrices of one products launch.
struct SbGgufMatrices {
  SbGgufMatrix m[3];
};
static_assert(sizeof(SbGgufMatrices) == 120, "SbGgufMatrices: Rust size");
static_assert(alignof(SbGgufMatrices) == 8, "SbGgufMatrices: Rust alignment");
static_assert(sizeof(SbGgufMatrices::m) == 120, "SbGgufMatrices::m: Rust size");

// Strides of one tensor: batch, head, position (the feature stride is 1).
struct SbStrides {
  long long b;
  long long h;
  long long s;
};
static_assert(sizeof(SbStrides) == 24, "SbStrides: Rust size");
static_assert(alignof(SbStrides) == 8, "SbStrides: Rust alignment");
static_assert(sizeof(SbStrides::b) == 8, "SbStrides::b: Rust size");
static_assert(sizeof(SbStrides::h) == 8, "SbStrides::h: Rust size");
static_assert(sizeof(SbStrides::s) == 8, "SbStrides::s: Rust size");

// The output product fused into attention (kernels/attention.cu `sb_attention_product`).
struct SbAttentionProduct {
  const unsigned char* w;
  const float* add;
  float* out;
  // [query rows, heads, rows]
  float* partials;
  // one per query row, zero
  unsigned* tickets;
  long long row_bytes;
  int rows;
  int ggml_type;
};
static_assert(sizeof(SbAttentionProduct) == 56, "SbAttentionProduct: Rust size");
static_assert(alignof(SbAttentionProduct) == 8, "SbAttentionProduct: Rust alignment");
static_assert(sizeof(SbAttentionProduct::w) == 8, "SbAttentionProduct::w: Rust size");
static_assert(sizeof(SbAttentionProduct::add) == 8, "SbAttentionProduct::add: Rust size");
static_assert(sizeof(SbAttentionProduct::out) == 8, "SbAttentionProduct::out: Rust size");
static_assert(sizeof(SbAttentionProduct::partials) == 8, "SbAttentionProduct::partials: Rust size");
static_assert(sizeof(SbAttentionProduct::tickets) == 8, "SbAttentionProduct::tickets: Rust size");
static_assert(sizeof(SbAttentionProduct::row_bytes) == 8, "SbAttentionProduct::row_bytes: Rust size");
static_assert(sizeof(SbAttentionProduct::rows) == 4, "SbAttentionProduct::rows: Rust size");
static_assert(sizeof(SbAttentionProduct::ggml_type) == 4, "SbAttentionProduct::ggml_type: Rust size");

// One sequence of a ragged attention launch (kernels/attention.cu `sb_ragged_attention`):
// its cache storage's keys, values and `[filled, ticket]` counter with their strides, and
// its rows of the launch's queries, new keys and values, and outputs. Uploaded as bytes:
// every field is 8 bytes but the two last, so the struct has no padding.
struct SbRaggedSequence {
  float* k;
  float* v;
  int* counter;
  SbStrides ks;
  SbStrides vs;
  // Its first row.
  long long first;
  int rows;
  // Zero (the struct's size stays a multiple of 8 without padding).
  int pad;
};
static_assert(sizeof(SbRaggedSequence) == 88, "SbRaggedSequence: Rust size");
static_assert(alignof(SbRaggedSequence) == 8, "SbRaggedSequence: Rust alignment");
static_assert(sizeof(SbRaggedSequence::k) == 8, "SbRaggedSequence::k: Rust size");
static_assert(sizeof(SbRaggedSequence::v) == 8, "SbRaggedSequence::v: Rust size");
static_assert(sizeof(SbRaggedSequence::counter) == 8, "SbRaggedSequence::counter: Rust size");
static_assert(sizeof(SbRaggedSequence::ks) == 24, "SbRaggedSequence::ks: Rust size");
static_assert(sizeof(SbRaggedSequence::vs) == 24, "SbRaggedSequence::vs: Rust size");
static_assert(sizeof(SbRaggedSequence::first) == 8, "SbRaggedSequence::first: Rust size");
static_assert(sizeof(SbRaggedSequence::rows) == 4, "SbRaggedSequence::rows: Rust size");
static_assert(sizeof(SbRaggedSequence::pad) == 4, "SbRaggedSequence::pad: Rust size");

// A convolution's geometry (kernels/conv.cu): spatial sizes widened to 3 axes.
struct SbConv {
  int input[3];
  int output[3];
  int kernel[3];
  int strides[3];
  int dilations[3];
  // pads at the beginning of each axis
  int pads[3];
  int groups;
  // input channels per group
  int cg;
  // output channels per group
  int mg;
};
static_assert(sizeof(SbConv) == 84, "SbConv: Rust size");
static_assert(alignof(SbConv) == 4, "SbConv: Rust alignment");
static_assert(sizeof(SbConv::input) == 12, "SbConv::input: Rust size");
static_assert(sizeof(SbConv::output) == 12, "SbConv::output: Rust size");
static_assert(sizeof(SbConv::kernel) == 12, "SbConv::kernel: Rust size");
static_assert(sizeof(SbConv::strides) == 12, "SbConv::strides: Rust size");
static_assert(sizeof(SbConv::dilations) == 12, "SbConv::dilations: Rust size");
static_assert(sizeof(SbConv::pads) == 12, "SbConv::pads: Rust size");
static_assert(sizeof(SbConv::groups) == 4, "SbConv::groups: Rust size");
static_assert(sizeof(SbConv::cg) == 4, "SbConv::cg: Rust size");
static_assert(sizeof(SbConv::mg) == 4, "SbConv::mg: Rust size");

// A pooling window's geometry (kernels/pool.cu): spatial sizes widened to 3 axes.
struct SbPool {
  int input[3];
  int output[3];
  int kernel[3];
  int strides[3];
  int dilations[3];
  int pads_begin[3];
  int pads_end[3];
  // 0 max, 1 average over taps in the input, 2 average with count_include_pad
  int kind;
};
static_assert(sizeof(SbPool) == 88, "SbPool: Rust size");
static_assert(alignof(SbPool) == 4, "SbPool: Rust alignment");
static_assert(sizeof(SbPool::input) == 12, "SbPool::input: Rust size");
static_assert(sizeof(SbPool::output) == 12, "SbPool::output: Rust size");
static_assert(sizeof(SbPool::kernel) == 12, "SbPool::kernel: Rust size");
static_assert(sizeof(SbPool::strides) == 12, "SbPool::strides: Rust size");
static_assert(sizeof(SbPool::dilations) == 12, "SbPool::dilations: Rust size");
static_assert(sizeof(SbPool::pads_begin) == 12, "SbPool::pads_begin: Rust size");
static_assert(sizeof(SbPool::pads_end) == 12, "SbPool::pads_end: Rust size");
static_assert(sizeof(SbPool::kind) == 4, "SbPool::kind: Rust size");

// The output of a resize (kernels/resize.cu).
struct SbResize {
  // output dims (the first `rank` entries)
  long long out[6];
  // per axis: index of coordinate 0 in `first` / `count`
  int coord_base[6];
  int rank;
  float extrapolation;
};
static_assert(sizeof(SbResize) == 80, "SbResize: Rust size");
static_assert(alignof(SbResize) == 8, "SbResize: Rust alignment");
static_assert(sizeof(SbResize::out) == 48, "SbResize::out: Rust size");
static_assert(sizeof(SbResize::coord_base) == 24, "SbResize::coord_base: Rust size");
static_assert(sizeof(SbResize::rank) == 4, "SbResize::rank: Rust size");
static_assert(sizeof(SbResize::extrapolation) == 4, "SbResize::extrapolation: Rust size");

// One strided copy (kernels/layout.cu): dims and strides padded in front with unit axes.
struct SbCopy {
  long long shape[6];
  long long src[6];
  long long dst[6];
  long long src_offset;
  long long dst_offset;
};
static_assert(sizeof(SbCopy) == 160, "SbCopy: Rust size");
static_assert(alignof(SbCopy) == 8, "SbCopy: Rust alignment");
static_assert(sizeof(SbCopy::shape) == 48, "SbCopy::shape: Rust size");
static_assert(sizeof(SbCopy::src) == 48, "SbCopy::src: Rust size");
static_assert(sizeof(SbCopy::dst) == 48, "SbCopy::dst: Rust size");
static_assert(sizeof(SbCopy::src_offset) == 8, "SbCopy::src_offset: Rust size");
static_assert(sizeof(SbCopy::dst_offset) == 8, "SbCopy::dst_offset: Rust size");

// One chain (kernels/chain.cu): its inputs, then its steps in order.
struct SbChain {
  const float* inputs[32];
  // SB_CHAIN_FULL, SB_CHAIN_SCALAR, SB_CHAIN_CHANNEL, SB_CHAIN_ROW or SB_CHAIN_LAST
  int layout[32];
  // step codes: the binary operations of sb_binary_op, SB_CHAIN_RELU, ...
  int op[16];
  // i >= 0: input i; -1 - j: step j; SB_CHAIN_ABSENT
  int arg[16][5];
  // batch norm's epsilon, or an activation's first parameter
  float eps[16];
  // an activation's second parameter
  float p1[16];
  int steps;
  int channels;
  // elements per (image, channel) row
  long long inner;
  // the length of the output's last axis
  long long last;
};
static_assert(sizeof(SbChain) == 920, "SbChain: Rust size");
static_assert(alignof(SbChain) == 8, "SbChain: Rust alignment");
static_assert(sizeof(SbChain::inputs) == 256, "SbChain::inputs: Rust size");
static_assert(sizeof(SbChain::layout) == 128, "SbChain::layout: Rust size");
static_assert(sizeof(SbChain::op) == 64, "SbChain::op: Rust size");
static_assert(sizeof(SbChain::arg) == 320, "SbChain::arg: Rust size");
static_assert(sizeof(SbChain::eps) == 64, "SbChain::eps: Rust size");
static_assert(sizeof(SbChain::p1) == 64, "SbChain::p1: Rust size");
static_assert(sizeof(SbChain::steps) == 4, "SbChain::steps: Rust size");
static_assert(sizeof(SbChain::channels) == 4, "SbChain::channels: Rust size");
static_assert(sizeof(SbChain::inner) == 8, "SbChain::inner: Rust size");
static_assert(sizeof(SbChain::last) == 8, "SbChain::last: Rust size");

// The argument of an op's own kernel (samebits-ops `SourceKernel`): its float32 input
// buffers then its tables, the outputs, output 0's element count (per-element launches)
// or the number of blocks, and the parameters.
struct SbSourceKernel {
  const float* buffers[8];
  float* out[3];
  long long count;
  long long ints[16];
  float floats[8];
};
static_assert(sizeof(SbSourceKernel) == 256, "SbSourceKernel: Rust size");
static_assert(alignof(SbSourceKernel) == 8, "SbSourceKernel: Rust alignment");
static_assert(sizeof(SbSourceKernel::buffers) == 64, "SbSourceKernel::buffers: Rust size");
static_assert(sizeof(SbSourceKernel::out) == 24, "SbSourceKernel::out: Rust size");
static_assert(sizeof(SbSourceKernel::count) == 8, "SbSourceKernel::count: Rust size");
static_assert(sizeof(SbSourceKernel::ints) == 128, "SbSourceKernel::ints: Rust size");
static_assert(sizeof(SbSourceKernel::floats) == 32, "SbSourceKernel::floats: Rust size");
