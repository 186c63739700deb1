// What a generated kernel computes, as plain data. A spec fully determines the
// emitted code (together with the CPU's micro-kernel row in CpuTable), so its key()
// is the kernel cache key; the JIT appends the CPU name and features.
//
// Guarantees: key() is stable across runs and differs whenever the emitted code
// would differ; it uses only [a-z0-9_] so it can be part of a symbol name.
#pragma once
#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "compiler/codegen/CpuTable.h"
#include "compiler/support/DType.h"

namespace nnc::codegen {

enum class Activation : uint8_t {
  None,
  Relu,
  Relu6,
  Sigmoid,
  Tanh,
  Gelu,     // erf form, as PyTorch nn.GELU(): 0.5 x (1 + erf(x / sqrt 2))
  GeluTanh, // nn.GELU(approximate="tanh")
  Silu,     // x * sigmoid(x)
};

inline constexpr Activation kAllActivations[] = {
    Activation::None, Activation::Relu,     Activation::Relu6, Activation::Sigmoid,
    Activation::Tanh, Activation::Gelu, Activation::GeluTanh, Activation::Silu};

constexpr std::string_view activationName(Activation a) {
  switch (a) {
  case Activation::None: return "none";
  case Activation::Relu: return "relu";
  case Activation::Relu6: return "relu6";
  case Activation::Sigmoid: return "sigmoid";
  case Activation::Tanh: return "tanh";
  case Activation::Gelu: return "gelu";
  case Activation::GeluTanh: return "gelu_tanh";
  case Activation::Silu: return "silu";
  }
  return "?";
}

// The exact text of a double for a key: %a, with its sign characters spelled out ('-'
// m, '+' p, so 0x1p+3 and 0x1p-3 differ) and anything else not [a-z0-9] as '_'.
inline std::string keyOfDouble(double v) {
  char e[64];
  std::snprintf(e, sizeof e, "%a", v);
  std::string k;
  for (char c : std::string(e))
    k += c == '-' ? 'm' : c == '+' ? 'p' : std::isalnum(static_cast<unsigned char>(c)) ? char(std::tolower(c)) : '_';
  return k;
}

// Conv windows (GemmSpec::windows) need channels in multiples of this (the emitter
// walks a tap's channels in whole unrolled k steps).
inline constexpr int64_t kWindowChannelMultiple = 4;
// A gated GEMM's columns (GemmSpec::gated) in multiples of this: every row's panels
// (and the two-panel blocks of kernelShapeFor) then split into whole gate/up halves.
inline constexpr int64_t kGatedColumnMultiple = 32;

// C[M,N] = actAfterResidual(act(A[M,K] · W^T + bias) + residual)
struct GemmSpec {
  int64_t M = 0, N = 0, K = 0; // A row-major M×K; W is [N][K] (PyTorch); C row-major M×N
  bool bias = false;           // bias[N]
  Activation act = Activation::None;
  bool residual = false;       // residual[M,N], added after the activation
  Activation actAfterResidual = Activation::None; // applied last (a relu after a residual add)
  nnc::DType weightType = nnc::DType::F32; // storage type of the packed weights
  // Cache blocks (GemmEmitter.h: gemmBlocking). 0 = chosen by the emitter from the host's
  // cache sizes (hostCacheSizes), which the key then names; tests force small blocks.
  int64_t kc = 0, mc = 0, nc = 0;
  // i4 weights: K steps per scale group (PackLayout.h); ignored (and not keyed) otherwise.
  int64_t quantGroup = 0;
  // The products' activations (docs/lowering.md, "Low-precision activations"): f32, or
  // A rounded to bf16 (bf16 weights, vdpbf16ps) or quantised per row to i8 (i8
  // weights, vpdpbusd) inside the kernel (DotGemmEmitter.h).
  nnc::DType activationType = nnc::DType::F32;
  // A read as convolution windows, an implicit GEMM (GemmEmitter.h), when windows.c > 0:
  // A is an NHWC map [batch, h, w, c], and row r = (b, oy, ox) of the batch·ho·wo output
  // pixels holds, at k = (ky·kw + kx)·c + ch, input pixel (oy·sh − ph + ky,
  // ox·sw − pw + kx) of image b, channel ch, or 0 outside the map: the rows an im2col in
  // (tap, channel) order would write (LayoutSpec::PixelsIm2col), never made.
  // rows: each window row (ky) is read as one run of kw·c floats — for few channels
  // (a first conv over an image's 3), over a map padded beforehand (ph = pw = 0).
  struct Windows {
    int64_t h = 0, w = 0, c = 0, kh = 1, kw = 1, sh = 1, sw = 1, ph = 0, pw = 0;
    bool rows = false;
    int64_t outH() const { return sh < 1 || h + 2 * ph < kh ? 0 : (h + 2 * ph - kh) / sh + 1; }
    int64_t outW() const { return sw < 1 || w + 2 * pw < kw ? 0 : (w + 2 * pw - kw) / sw + 1; }
    std::string key() const {
      auto n = [](int64_t v) { return std::to_string(v); };
      return "_win_h" + n(h) + "_w" + n(w) + "_c" + n(c) + "_k" + n(kh) + "x" + n(kw) + "_s" + n(sh) + "x" + n(sw) +
             "_p" + n(ph) + "x" + n(pw) + (rows ? "_rows" : "");
    }
  };
  Windows windows = {}; // none
  // A gated MLP's gate and up projections as one GEMM: W is [gate; up] (N = 2·hidden
  // rows), and C [M, N/2] = act(A·gateᵀ + b_gate) · (A·upᵀ + b_up), act the gate's
  // activation (`act`), the bias (if any) [b_gate; b_up]. The packing puts each panel's
  // gate channels in its first half and the matching up channels in its second
  // (PanelLayout::gated), so a register block holds both and the epilogue multiplies
  // them. N a multiple of kGatedColumnMultiple; no residual or K blocks. Low-precision
  // activations too (the dot kernel scales each factor's sums to f32 first).
  bool gated = false;
  // f32 weights read where they lie (docs/lowering.md, "Weights in place"): B is a
  // table of row pointers (PanelLayout::rowPointers), each row W's K floats as the
  // weights file holds them, so loading a model copies nothing. The kernel reads a
  // block of few rows (M <= MR) as dot products along each row; more rows, it first
  // transposes each panel's slice of rows into a copy in the panel layout (in its
  // scratch) and runs the usual register blocks on it (GemmEmitter.h). f32 weights and
  // activations, no conv windows.
  bool weightRows = false;

  std::string key() const {
    std::string k = "gemm_m" + std::to_string(M) + "_n" + std::to_string(N) + "_k" +
                    std::to_string(K) + "_w" + std::string(dtypeName(weightType));
    if (weightType == nnc::DType::I4) k += "_g" + std::to_string(quantGroup);
    if (activationType != nnc::DType::F32) k += "_a" + std::string(dtypeName(activationType));
    if (windows.c > 0) k += windows.key();
    if (bias) k += "_bias";
    if (act != Activation::None) k += "_" + std::string(activationName(act));
    if (gated) k += "_gated";
    if (weightRows) k += "_inplace";
    if (residual) k += "_res";
    if (actAfterResidual != Activation::None) k += "_then_" + std::string(activationName(actAfterResidual));
    if (kc || mc || nc)
      k += "_kc" + std::to_string(kc) + "_mc" + std::to_string(mc) + "_nc" + std::to_string(nc);
    else
      k += "_" + cacheSizesTag(hostCacheSizes());
    return k;
  }
};

// Row-wise kernels over a rows×cols row-major tensor.
// A table or parameter vector stored below f32 (rowTableLayout in PackLayout.h):
// "_<dtype>" (i4: "_i4_g<group>"), empty for f32.
inline std::string storedKey(DType type, int64_t group) {
  if (type == DType::F32) return "";
  return "_" + std::string(dtypeName(type)) + (type == DType::I4 ? "_g" + std::to_string(group) : "");
}

struct ElementwiseSpec {
  enum Kind : uint8_t {
    Activation, // out = act(x)
    Softmax,    // out[r,:] = softmax(x[r,:]) over the last axis, max-subtracted
    Add,        // out = x + y
    GatedProduct, // out = act(x) · y (gated_mlp's act(gate) · up)
    AddPositions, // out[r, :] = x[r, :] + y[past + r mod period, :] (pos_embedding: y is
                  // the table, period the sequence length, past the kernel's argument)
  };
  Kind kind = Activation;
  codegen::Activation act = codegen::Activation::None; // Kind::Activation and GatedProduct
  int64_t rows = 0, cols = 0;
  int64_t period = 0; // AddPositions only (in the code, so in the key)
  // AddPositions: y (the table) stored below f32 as rowTableLayout(period rows at
  // least, cols); `group`: i4's scale group.
  DType tableType = DType::F32;
  int64_t tableRows = 0, group = 0;

  std::string key() const {
    std::string k;
    switch (kind) {
    case Activation: k = "act_" + std::string(activationName(act)); break;
    case Softmax: k = "softmax"; break;
    case Add: k = "add"; break;
    case GatedProduct: k = "gated_" + std::string(activationName(act)); break;
    case AddPositions:
      k = "addpos_p" + std::to_string(period) + storedKey(tableType, group) +
          (tableType == DType::F32 ? "" : "_r" + std::to_string(tableRows));
      break;
    }
    // rows are not part of the code (the kernel takes a row range), so not of the key
    return "ew_" + k + "_c" + std::to_string(cols);
  }
};

// Normalisation over the last axis of a rows×cols row-major tensor, statistics in f32:
//   layernorm: out = (x - mean) / sqrt(var + eps) · gamma + beta   (biased variance)
//   rmsnorm:   out = x / sqrt(mean(x²) + eps) · gamma
// gamma (and beta, when `shift`) have cols floats. rmsnorm has no beta (HF
// LlamaRMSNorm, torch.nn.RMSNorm): it ignores `shift`, and so does its key.
struct NormSpec {
  enum Kind : uint8_t { LayerNorm, RmsNorm };
  Kind kind = LayerNorm;
  int64_t rows = 0, cols = 0;
  double eps = 1e-5;
  bool shift = true; // beta: layernorm(bias=true)
  // gamma and beta stored below f32, each as rowTableLayout(1, cols) (one row: i8 one
  // scale for the vector, i4 groups along it); `group`: i4's scale group.
  DType paramType = DType::F32;
  int64_t group = 0;

  std::string key() const {
    // rows are a runtime range, as for elementwise kernels; eps is in the code (%a: exact).
    // %a's sign characters are spelled out ('-' m, '+' p) so that e.g. eps 8 (0x1p+3)
    // and 0.125 (0x1p-3) keep distinct keys; '.' becomes '_'.
    std::string k = kind == LayerNorm ? "norm_layer" : "norm_rms";
    return k + "_c" + std::to_string(cols) + (kind == LayerNorm && shift ? "_shift" : "") + "_eps" + keyOfDouble(eps) +
           storedKey(paramType, group);
  }
};

// 2-D pooling over planes of an NCHW tensor (one plane per batch × channel):
// out[p, i, j] = max / mean over the window rows i·sh − ph + [0, kh) and columns
// j·sw − pw + [0, kw) of x[p]. Padding never wins a max (PyTorch pads with −inf); the
// mean divides by kh·kw, padding included (PyTorch's count_include_pad=True).
struct PoolSpec {
  enum Kind : uint8_t { Max, Avg };
  Kind kind = Max;
  int64_t planes = 0; // batch × channels (NHWC: batch): not in the key
  int64_t h = 0, w = 0, kh = 1, kw = 1, sh = 1, sw = 1, ph = 0, pw = 0;
  // > 0: the maps are NHWC ([batch·h·w, channels] in and out; lower::MapLayout), and
  // the runtime range is over output rows of images (units()); 0: NCHW planes.
  int64_t channels = 0;
  // Avg: summed in f64 and divided there, rounded to f32 once (within half an ulp of
  // the exact mean but for ties), not plain f32 adds in window order: a global pool's
  // mean, as PyTorch's AdaptiveAvgPool2d(1) (its mean sums in cascades).
  bool doubleSum = false;
  // NHWC: full pixels of a full row computed together, each its own fold (1 to 8). 8
  // hides the max's latency where the map is in the caches; a map streamed from memory
  // reads better 2 at a time (compiler/ops/PoolOps.cpp says when).
  int64_t pixelGroup = 8;
  int64_t units() const { return channels > 0 ? planes * outH() : planes; }
  // Floor mode (PyTorch's ceil_mode=False); 0 when the window does not fit the padded
  // input (C++ division truncates toward zero, so that case is tested first).
  int64_t outH() const { return h + 2 * ph < kh || sh < 1 ? 0 : (h + 2 * ph - kh) / sh + 1; }
  int64_t outW() const { return w + 2 * pw < kw || sw < 1 ? 0 : (w + 2 * pw - kw) / sw + 1; }

  std::string key() const {
    auto n = [](int64_t v) { return std::to_string(v); };
    return std::string(kind == Max ? "pool_max" : "pool_avg") + "_h" + n(h) + "_w" + n(w) + "_k" + n(kh) + "x" +
           n(kw) + "_s" + n(sh) + "x" + n(sw) + "_p" + n(ph) + "x" + n(pw) +
           (channels > 0 ? "_nhwc_c" + n(channels) : "") + (channels > 0 && pixelGroup != 8 ? "_g" + n(pixelGroup) : "") +
           (doubleSum ? "_f64" : "");
  }
};

// Data movement for convolutions lowered onto the GEMM (compiler/ops/ConvOps.cpp), between
// feature maps and the GEMM's row-major matrices. Maps are NCHW planes ([batch, c, h, w],
// PyTorch's layout) or NHWC pixels ([batch·h·w, c]: the GEMM's result of a conv, which
// stays that way between layers; docs/lowering.md, "Feature-map layouts"). For one group
// of cg channels starting at channel c0 of a C-channel map:
//   Im2col:       out[(b·ho + i)·wo + j, (ci·kh + r)·kw + s] = x[b, c0 + ci, i·sh − ph + r, j·sw − pw + s]
//                 (0 where that lies in the padding); x is NCHW. K = cg·kh·kw columns in
//                 PyTorch's flattening of a [out, in/groups, kh, kw] weight.
//   ToPlanes:     out[b, c0 + n, p] = x[b·P + p, n] (+ residual[b, c0 + n, p]) for n < cg,
//                 p < P = h·w; x is the GEMM's [batch·P, cg] result, out is NCHW.
//   PixelsIm2col: out[(b·ho + i)·wo + j, (r·kw + s)·cg + ci] = x[(b·h + i·sh − ph + r)·w + j·sw − pw + s, c0 + ci]
//                 (0 in the padding); x is NHWC. K in (tap, channel) order: the weight's
//                 columns are reordered at load (WeightRecipe::kernelTaps).
// The runtime range is over units (LayoutEmitter.h: layoutUnits); batch is not in the key,
// nor is c0: the pointers of the side that holds the whole map arrive moved to channel c0
// (LayoutEmitter.h), so the groups of a conv share one kernel.
struct LayoutSpec {
  enum Kind : uint8_t { Im2col, ToPlanes, PixelsIm2col };
  Kind kind = Im2col;
  int64_t batch = 1;
  int64_t c = 0, h = 0, w = 0; // the whole map (Im2col, PixelsIm2col: the input; ToPlanes: the output)
  int64_t c0 = 0, cg = 0;      // the group's channels [c0, c0 + cg)
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, ph = 0, pw = 0; // the im2col kinds only
  bool residual = false;                                  // ToPlanes only
  bool im2col() const { return kind != ToPlanes; }
  int64_t outH() const { return h + 2 * ph < kh || sh < 1 ? 0 : (h + 2 * ph - kh) / sh + 1; }
  int64_t outW() const { return w + 2 * pw < kw || sw < 1 ? 0 : (w + 2 * pw - kw) / sw + 1; }

  std::string key() const {
    auto n = [](int64_t v) { return std::to_string(v); };
    const char *name = kind == Im2col ? "im2col" : kind == ToPlanes ? "toplanes" : "pxim2col";
    std::string k = "layout_" + std::string(name) + "_c" + n(c) + "_h" + n(h) + "_w" + n(w) + "_g" + n(cg);
    if (im2col())
      k += "_k" + n(kh) + "x" + n(kw) + "_s" + n(sh) + "x" + n(sw) + "_p" + n(ph) + "x" + n(pw);
    else if (residual)
      k += "_res";
    return k;
  }
};

// A convolution of one group as one step (compiler/ops/ConvOps.cpp): the GEMM's A is
// made a chunk at a time — the im2col of the output rows that chunkRows rows of A need,
// into a scratch of scratchFloats() — and multiplied while it is still in cache
// (runtime/model/StepKernels.cpp, ConvGemmStep). It has no code of its own: its kernels
// are im2col's and gemm's (compiledParts below).
struct ConvGemmSpec {
  LayoutSpec im2col; // an im2col kind, over the whole batch
  GemmSpec gemm;     // M = batch·ho·wo rows of A, K = cg·kh·kw
  int64_t chunkRows = 0; // rows of A per chunk (the runtime rounds down to whole row blocks)
  // A chunk's rows start and end inside output rows of wo pixels: up to two partial ones.
  int64_t scratchFloats() const { return (chunkRows + 2 * im2col.outW()) * gemm.K; }
  std::string key() const { return "conv_r" + std::to_string(chunkRows) + "_" + im2col.key() + "__" + gemm.key(); }
};

// Per-channel kernels over a [batch, c, plane] tensor (plane = h·w, 1 for vectors):
//   ScaleShift: out[b, ch, p] = x[b, ch, p] · scale[ch] + shift[ch]   (a batchnorm that
//               could not fold into a preceding conv or dense)
//   Lrn:        out[b, ch, p] = x[b, ch, p] / (k + alpha/size · Σ x[b, ch', p]²)^beta over
//               ch' in [ch − size/2, ch + (size−1)/2] ∩ [0, c)  (PyTorch LocalResponseNorm:
//               zero padding, the sum divided by size whatever the clipping)
// The runtime range is over images (batch is not in the key).
struct ChannelSpec {
  enum Kind : uint8_t { ScaleShift, Lrn };
  Kind kind = ScaleShift;
  int64_t batch = 1, c = 0, plane = 1;
  int64_t size = 1;                          // Lrn only
  double alpha = 1e-4, beta = 0.75, k = 1.0; // Lrn only

  std::string key() const {
    auto n = [](int64_t v) { return std::to_string(v); };
    std::string key = std::string(kind == ScaleShift ? "chan_scaleshift" : "chan_lrn") + "_c" + n(c) + "_p" + n(plane);
    if (kind == Lrn) {
      key += "_n" + n(size);
      for (double v : {alpha, beta, k}) key += "_" + keyOfDouble(v);
    }
    return key;
  }
};

// Depthwise convolution over NCHW planes (PyTorch Conv2d(c, c·multiplier, groups=c)):
//   out[b, o, i, j] = act(bias[o] + Σ_{r,s} W[o, r·kw + s] · x[b, o / multiplier, i·sh − ph + r, j·sw − pw + s])
//                     (+ residual[b, o, i, j])
// taps in the padding count 0 (any padding); W is [c·multiplier, kh·kw] (PyTorch's
// [out, 1, kh, kw]). The runtime range is over output planes (b, o), batch·c·multiplier
// of them; batch is not in the key.
// `pixels`: x, residual and out are NHWC maps ([batch·h·w, c]; lower::MapLayout), W is
// stored transposed ([kh·kw, c], f32) and multiplier is 1; the runtime range is over
// output rows (b, i), batch·outH() of them (units()).
struct DepthwiseSpec {
  int64_t batch = 1, c = 0, multiplier = 1, h = 0, w = 0;
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, ph = 0, pw = 0;
  bool bias = false;
  Activation act = Activation::None;
  bool residual = false;
  // The weights ([c·multiplier][kh·kw]) stored below f32 as rowTableLayout (one row per
  // output plane; `group`: i4's scale group); f32: plain rows.
  DType weightType = DType::F32;
  int64_t group = 0;
  bool pixels = false;
  int64_t outH() const { return h + 2 * ph < kh || sh < 1 ? 0 : (h + 2 * ph - kh) / sh + 1; }
  int64_t outW() const { return w + 2 * pw < kw || sw < 1 ? 0 : (w + 2 * pw - kw) / sw + 1; }
  int64_t units() const { return pixels ? batch * outH() : batch * c * multiplier; }

  std::string key() const {
    auto n = [](int64_t v) { return std::to_string(v); };
    std::string k = "dw_c" + n(c) + "_m" + n(multiplier) + "_h" + n(h) + "_w" + n(w) + "_k" + n(kh) + "x" + n(kw) +
                    "_s" + n(sh) + "x" + n(sw) + "_p" + n(ph) + "x" + n(pw);
    if (bias) k += "_bias";
    if (act != Activation::None) k += "_" + std::string(activationName(act));
    if (residual) k += "_res";
    if (pixels) k += "_nhwc";
    return k + storedKey(weightType, group);
  }
};

// A row gather (embedding): out[r, :] = table[ids[r], :] for rows r of `rows` = batch ·
// seq token ids (i32), the table [vocab, cols] row-major f32. An id outside [0, vocab)
// is never read: the kernel writes zeros for it (the runtime refuses such ids before
// the step, naming the batch row and position). The runtime range is over rows; rows
// and seq (for the runtime's messages) are not in the key.
struct GatherSpec {
  int64_t rows = 0, seq = 1, vocab = 0, cols = 0;
  // The table stored below f32 as rowTableLayout(vocab, cols) (PackLayout.h): i8 one
  // scale per row (token), i4 groups of `group` along the row; f32: plain rows.
  DType tableType = DType::F32;
  int64_t group = 0;

  std::string key() const {
    return "gather_v" + std::to_string(vocab) + "_c" + std::to_string(cols) + storedKey(tableType, group);
  }
};

// Rotary position embedding in place (Hugging Face LLaMA's rotate_half): on the first
// `heads` head slices of each row of x[rows, ld], for the row r at position
// p = past + r mod seq, head h and i < half = headDim / 2, with
// x1 = x[r, h·headDim + i] and x2 = x[r, h·headDim + half + i]:
//   x1' = x1·cos − x2·sin,   x2' = x2·cos + x1·sin,   at the angle p·θ_i, θ_i = theta^(−2i/headDim)
// cos and sin come from table[p, i] and table[p, half + i] ([positions, headDim], made
// at load: WeightRecipe::Source::RopeTable). Rows and past are runtime values.
struct RopeSpec {
  int64_t rows = 0, seq = 1;
  int64_t ld = 0, heads = 0, headDim = 0;

  std::string key() const {
    auto n = [](int64_t v) { return std::to_string(v); };
    return "rope_s" + n(seq) + "_ld" + n(ld) + "_h" + n(heads) + "_d" + n(headDim);
  }
};

// A decoder's KV cache of one attention layer (KvAppendSpec writes it, AttentionSpec
// with kvCache reads it). Per batch entry, 2·kvHeads planes: plane t holds head vector t
// (k head g: t = g; v head g: t = kvHeads + g) at every position in order, so that one
// head's keys (or values) are contiguous and stream from memory in order:
//   i8:           context f32 scales, then per position headDim i8 values
//   f32/f16/bf16: per position headDim values
// each position's values padded to a multiple of 4 bytes. i8 values are q · s with q
// = round-to-even(x · 127 / m), s = m / 127, m = max |x| over the vector (0 when m = 0).
// (Positions as rows with the heads side by side read 256 of every 2 KiB in a decode
// step: docs/lowering.md, "The KV cache, head by head".)
struct KvCacheLayout {
  int64_t context = 1, kvHeads = 1, headDim = 1;
  DType type = DType::F32;

  // One position's values (padded to 4 bytes), in bytes and in elements of type.
  int64_t valueBytes() const {
    return (bytesFor(headDim, type) + 3) / 4 * 4;
  }
  int64_t valueStride() const {
    return valueBytes() * 8 / dtypeBits(type);
  }
  // One position's scale (i8), and where a plane's values start past the scales.
  int64_t scaleBytes() const {
    return type == DType::I8 ? 4 : 0;
  }
  int64_t valuesOffset() const {
    return context * scaleBytes();
  }
  int64_t planeBytes() const {
    return context * (scaleBytes() + valueBytes());
  }
  int64_t entryBytes() const { // one batch entry
    return 2 * kvHeads * planeBytes();
  }
  int64_t bytesPerPosition() const {
    return 2 * kvHeads * (scaleBytes() + valueBytes());
  }
};

// Scaled dot-product attention, K and V shared by groups of heads/kvHeads query heads
// (grouped-query attention: no copies of K and V). For batch b, head h (K/V head
// g = h / (heads / kvHeads)), query i < seq at position past + i and keys j < kvLen =
// past + seq (causal: j <= past + i):
//   s_j = scale · q[b·seq + i, qCol + h·hd + :] · K(b, g, j)
//   out[b·seq + i, h·hd + :] = Σ_j softmax(s)_j · V(b, g, j)
// with hd = headDim; rows of q are qLd floats apart, of out outLd. K and V are either
// rows (f32): K(b, g, j) = k[b·kvStride + j, kCol + g·hd + :], V likewise from vCol, rows
// kvLd floats apart; or, with kvCache, a KvCacheLayout{kvStride, kvHeads, hd, kvType}
// buffer (k and v both point at it; kvLd, kCol and vCol unused), widened on read.
// kvStride rows (positions) per batch entry bound kvLen.
// The runtime range is over units (b, g), batch·kvHeads of them; past is a runtime
// value; each unit uses its own scratchPerUnit() floats of the scratch operand.
struct AttentionSpec {
  int64_t batch = 1, seq = 1, kvStride = 1;
  int64_t heads = 1, kvHeads = 1, headDim = 1;
  bool causal = true;
  int64_t qLd = 0, qCol = 0, kvLd = 0, kCol = 0, vCol = 0, outLd = 0; // floats
  double scale = 1.0;
  // k and v are a KV cache (KvCacheLayout) stored as kvType: f32, or f16, bf16, i8
  // widened on read. Without kvCache they are f32 rows.
  bool kvCache = false;
  DType kvType = DType::F32;
  KvCacheLayout cacheLayout() const {
    return {kvStride, kvHeads, headDim, kvType};
  }

  static constexpr int64_t kRowBlock = 4;   // query rows per block (AttentionEmitter.h)
  static constexpr int64_t kOneQueryHeads = 8; // one query: query heads per block, at most
  static constexpr int64_t kKeyAlign = 16;  // key positions padded to the widest vector
  int64_t keySlots() const { return (kvStride + kKeyAlign - 1) / kKeyAlign * kKeyAlign; }
  // One query (seq 1): the query heads of a K/V group one block takes.
  int64_t oneQueryHeads() const { return std::min(heads / kvHeads, kOneQueryHeads); }
  // Kᵀ of the unit's K/V head [headDim, keySlots] and a block's scores [kRowBlock,
  // keySlots]; one query: no Kᵀ, a block's heads' scores [oneQueryHeads, keySlots].
  int64_t scratchPerUnit() const {
    return (seq == 1 ? oneQueryHeads() : headDim + kRowBlock) * keySlots();
  }
  int64_t units() const { return batch * kvHeads; }

  std::string key() const {
    auto n = [](int64_t v) { return std::to_string(v); };
    // batch is a runtime range, not part of the code
    return "attn_s" + n(seq) + "_kv" + n(kvStride) + "_h" + n(heads) + "_g" + n(kvHeads) + "_d" + n(headDim) +
           (causal ? "_causal" : "_full") + "_q" + n(qLd) + "x" + n(qCol) + "_kv" + n(kvLd) + "x" + n(kCol) + "x" +
           n(vCol) + "_o" + n(outLd) + "_sc" + keyOfDouble(scale) + (kvCache ? "_cache" : "") +
           (kvType == DType::F32 ? "" : "_" + std::string(dtypeName(kvType)));
  }
};

// A decoder's KV cache append: the k|v columns of each new row go to its batch entry's
// cache (KvCacheLayout{context, cols / (2·headDim), headDim, type}) at its position.
// For row r = b·seq + i (i < seq) of x, head vector t (columns [t·headDim, (t+1)·headDim)
// of x[r·ld + col + :]) goes to plane t of entry b at position past + i:
//   f32:      copied
//   f16/bf16: rounded to nearest, ties to even
//   i8:       with m = max |x| over the vector, scale s = m / 127 and values
//             q = round-to-even(x · (127 / m)) (0 when m = 0)
// The runtime range is over rows (batch·seq); past is a runtime value.
struct KvAppendSpec {
  int64_t rows = 0, seq = 1, context = 1;
  int64_t ld = 0, col = 0, cols = 0;
  DType type = DType::F32; // f32, f16, bf16 or i8 (--kv-dtype)
  int64_t headDim = 1;     // the columns of one head vector

  KvCacheLayout layout() const {
    return {context, cols / 2 / headDim, headDim, type};
  }

  std::string key() const {
    auto n = [](int64_t v) { return std::to_string(v); };
    return "kvappend_s" + n(seq) + "_ctx" + n(context) + "_ld" + n(ld) + "_c" + n(col) + "x" + n(cols) + "_h" +
           n(headDim) + (type == DType::F32 ? "" : "_" + std::string(dtypeName(type)));
  }
};

// The bytes one position of a KV cache takes in `type` for an attention layer with
// kvHeads heads of headDim (keys and values): what the lowering allocates per position
// and the report counts (KvCacheLayout).
inline int64_t kvCacheBytesPerPosition(DType type, int64_t kvHeads, int64_t headDim) {
  return KvCacheLayout{1, kvHeads, headDim, type}.bytesPerPosition();
}

// A decoder's prefill keeps only each sequence's last position for the layers after
// its last attention (lower/Lower.h): out[b·cols + c] = x[(b·seq + seq − 1)·cols + c].
// The runtime range is over sequences (rows = batch).
struct LastPositionSpec {
  int64_t rows = 0, seq = 1, cols = 0;

  std::string key() const { return "lastpos_s" + std::to_string(seq) + "_c" + std::to_string(cols); }
};

// Greedy decoding's next id (docs/lowering.md, "Greedy decoding"): for each row r of
// x[rows, cols], out[r] (i32) = the first index of the row's largest value. NaN never
// wins; a row of NaN only gives 0 (so does a row of -inf: its first index). The runtime
// range is over rows (not in the key).
struct ArgmaxSpec {
  int64_t rows = 0, cols = 0;

  std::string key() const { return "argmax_c" + std::to_string(cols); }
};

// Any kernel the generator builds: the JIT engine, the kernel cache and --emit take
// this one type, so a new kernel family is a new alternative here and an entry in
// KernelModules.cpp, not a new engine method.
using KernelSpec = std::variant<GemmSpec, ElementwiseSpec, NormSpec, PoolSpec, LayoutSpec, ChannelSpec,
                                DepthwiseSpec, GatherSpec, RopeSpec, AttentionSpec, KvAppendSpec,
                                LastPositionSpec, ArgmaxSpec, ConvGemmSpec>;

inline std::string kernelKey(const KernelSpec& spec) {
  return std::visit([](const auto& s) { return s.key(); }, spec);
}
// The kernels a step's spec compiles to: the spec itself, or a ConvGemmSpec's two.
inline std::vector<KernelSpec> compiledParts(const KernelSpec& spec) {
  if (const auto* conv = std::get_if<ConvGemmSpec>(&spec)) return {conv->im2col, conv->gemm};
  return {spec};
}
// The GEMM a step runs (a GemmSpec, or a ConvGemmSpec's), or null.
inline const GemmSpec* gemmOf(const KernelSpec& spec) {
  if (const auto* conv = std::get_if<ConvGemmSpec>(&spec)) return &conv->gemm;
  return std::get_if<GemmSpec>(&spec);
}

} // namespace nnc::codegen
