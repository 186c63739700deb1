// The packed-weights layout the GEMM micro-kernel reads. Pinned here, in one place.
//
// W arrives as PyTorch's [N][K] (out, in), row-major. It is cut into column panels
// of NR output channels; panel p holds channels n = p*NR .. p*NR+NR-1, stored k-major:
//
//   element (n, k)  ->  (n / NR) * (K * NR)  +  k * NR  +  (n % NR)
//
// so one k step of a panel is NR consecutive elements (whole vectors for the micro-
// kernel) and a KC slice of a panel is contiguous. Channels past N in the last panel
// are zero. The buffer starts 64-byte aligned; with NR a multiple of the vector
// width, every vector load of the kernel is vector-aligned.
//
// With rowTail (chosen by the emitter, GemmEmitter.h: gemmPanelLayout), the last
// N % NR channels, when there are any, are not a panel but rows in W's own [n][k]
// order, each tailStride() = K rounded up to 16 elements long (64 bytes for f32,
// zero-padded), after the full panels:
//
//   element (n, k), n >= fullPanels()*NR  ->  fullPanels()*K*NR + (n % NR)*tailStride() + k
//
// so the narrow-tail kernel vectorises along K (a dot product per channel).
// Sizes are in elements of the storage dtype (`type`), whose bytes follow from its
// bits (DType.h). Low-precision storage (docs/lowering.md, "Storage dtypes"):
//
//   f16, bf16  2 bytes an element, the index formula above (IEEE binary16 / the top
//              16 bits of an f32, rounded to nearest even).
//   i8         1 byte an element, the formula above; q = round(w / s) in [-127, 127],
//              s = max|w| / 127 of the output channel (or of the whole tensor with
//              per-tensor quantisation: every channel then holds the same s). The
//              kernel computes s · Σ a·q in its epilogue.
//   i4         two elements a byte. One k step of a panel is NR / 2 bytes: byte b
//              holds channel b of the panel in its low nibble and channel b + NR / 2
//              in its high nibble (4-bit two's complement, q in [-7, 7]), so a k step
//              is one load and two nibble extractions. One scale per channel per
//              group of `group` steps along K (s = max|w| / 7 over the group rounded
//              to bf16, and q = round(w / s) with that s; the last group may be
//              shorter); the kernel multiplies the widened weights by their group's
//              scale before the FMA.
//
// The scales follow the weights at scalesOffsetBytes() (64-byte aligned), scaleBytes()
// each: i8 one f32 per channel, panels()·NR of them (channel n at n; padding channels
// 0); i4 one bf16 (the top half of the f32, as the bf16 storage dtype) per channel and
// K group, panel-major: channel n, group g at scaleIndex(n, g). 2 bytes, not 4: at the
// default group of 32 an f32 scale is a fifth of an i4 weight's bytes (0.625 a weight,
// not 0.5625), and decode streams every byte; bf16 keeps f32's range, and its 8
// significant bits add at most 7 · s · 2^-9 to a weight's rounding error of s / 2.
// Low-precision layouts have no row tail (the narrow tail is a zero-padded panel).
//
// Dot-product layouts (kPack > 1), for kernels whose products take low-precision
// activations (docs/lowering.md, "Low-precision activations"): an instruction that
// multiplies kPack consecutive k steps of one channel and sums them into one f32/i32
// lane (vdpbf16ps: kPack 2 bf16; vpdpbusd: kPack 4 i8) wants those kPack weights
// adjacent. K is padded with zeros to Kp = a multiple of kPack, and
//
//   element (n, k)  ->  (n / NR) * (Kp * NR)  +  (k / kPack) * (NR * kPack)  +  (n % NR) * kPack  +  k % kPack
//
// so one kPack-step of a panel is NR·kPack consecutive elements (i4 with kPack 4, for
// i8 activations: its NR·4 elements are NR·2 bytes, element e in byte e % (NR·2), the
// low nibble for e < NR·2, each nibble q + 8 in [1, 15], unsigned; scales as i4's
// above). i8 with kPack 4 also
// stores, after the scales, one i32 per channel (panels()·NR, at sumsOffsetBytes()):
// 128 · Σ_k q[n][k], the term that the kernel's unsigned activations (a + 128) add.
#pragma once
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "compiler/support/CheckedMath.h"
#include "compiler/support/DType.h"

namespace nnc::codegen {

inline constexpr int64_t kPackedAlignmentBytes = 64;

struct PanelLayout {
  int64_t N, K, NR;
  bool rowTail = false; // the N % NR tail channels as [n][k] rows (see above)
  DType type = DType::F32; // storage dtype: f32, f16, bf16, i8, i4
  int64_t group = 0;       // i4: K steps per scale group (> 0); unused otherwise
  int64_t kPack = 1;       // k steps of a channel stored together: 1, or 2 (bf16) / 4 (i8) for dot products
  // GemmSpec::gated: W is [gate; up] (N/2 rows each), and panel p holds gate rows
  // p·NR/2 .. + NR/2 in its first half and the same up rows in its second: column n of
  // the panels is row sourceRow(n) of W. Everything else (scales, sums) follows the columns.
  bool gated = false;
  // GemmSpec::weightRows (f32 weights read where they lie, docs/lowering.md "Weights in
  // place"): not a copy of W but a table of N row pointers, entry n pointing at the K
  // floats of W's row sourceRow(n) (any 4-byte alignment, never written). The table is
  // all the layout's bytes; the rows belong to whoever made the table.
  bool rowPointers = false;

  constexpr int64_t sourceRow(int64_t n) const {
    if (!gated) return n;
    const int64_t half = NR / 2, local = n % NR, base = n / NR * half;
    return local < half ? base + local : N / 2 + base + local - half;
  }

  constexpr int64_t paddedK() const { return (K + kPack - 1) / kPack * kPack; }
  constexpr int64_t panels() const { return (N + NR - 1) / NR; }
  constexpr int64_t fullPanels() const { return N / NR; }
  constexpr int64_t tailColumns() const { return N % NR; } // columns in the last, partial panel
  constexpr bool hasRowTail() const { return rowTail && tailColumns() != 0; }
  constexpr int64_t panelElements() const { return paddedK() * NR; }
  constexpr int64_t tailStride() const { return (K + 15) / 16 * 16; }
  constexpr int64_t tailOffset() const { return fullPanels() * panelElements(); }
  constexpr int64_t totalElements() const {
    return hasRowTail() ? tailOffset() + tailColumns() * tailStride() : panels() * panelElements();
  }
  constexpr int64_t offset(int64_t n, int64_t k) const {
    if (hasRowTail() && n >= fullPanels() * NR) return tailOffset() + (n % NR) * tailStride() + k;
    return (n / NR) * panelElements() + k / kPack * (NR * kPack) + (n % NR) * kPack + k % kPack;
  }
  // Same, refusing sizes that overflow (for buffers sized from user input).
  int64_t totalElementsChecked() const {
    if (hasRowTail())
      return addChecked(mulChecked(N / NR, K, NR), mulChecked(N % NR, addChecked(K, 15) / 16 * 16));
    return mulChecked(addChecked(N, NR - 1) / NR, addChecked(K, kPack - 1) / kPack * kPack, NR);
  }
  // Low-precision storage: bytes of the weights, scale groups along K, scales.
  constexpr int64_t weightBytes() const {
    return rowPointers ? N * int64_t(sizeof(void*)) : totalElements() * dtypeBits(type) / 8;
  }
  constexpr int64_t groups() const {
    return type == DType::I4 ? (K + group - 1) / group : type == DType::I8 ? 1 : 0;
  }
  constexpr int64_t scaleCount() const { return panels() * groups() * NR; }
  constexpr int64_t scaleBytes() const { return type == DType::I4 ? 2 : 4; } // bf16 for i4, f32 for i8
  constexpr int64_t scalesOffsetBytes() const {
    return (weightBytes() + kPackedAlignmentBytes - 1) / kPackedAlignmentBytes * kPackedAlignmentBytes;
  }
  constexpr int64_t scaleIndex(int64_t n, int64_t g) const {
    return ((n / NR) * groups() + g) * NR + n % NR;
  }
  // i8 dot products (kPack 4): the channels' 128 · Σq, one i32 each, after the scales.
  constexpr bool hasSums() const { return type == DType::I8 && kPack == 4; }
  constexpr int64_t sumsOffsetBytes() const { return scalesOffsetBytes() + scaleCount() * scaleBytes(); }
  constexpr int64_t totalBytes() const {
    return scaleCount() ? sumsOffsetBytes() + (hasSums() ? panels() * NR * 4 : 0) : weightBytes();
  }
  // totalBytes(), refusing sizes that overflow.
  int64_t totalBytesChecked() const {
    if (rowPointers) return mulChecked(N, int64_t(sizeof(void*)));
    const int64_t weights = bytesFor(totalElementsChecked(), type);
    if (!scaleCount()) return weights;
    const int64_t groupsChecked = type == DType::I4 ? addChecked(K, group - 1) / group : 1;
    return addChecked(addChecked(weights, kPackedAlignmentBytes - 1) / kPackedAlignmentBytes * kPackedAlignmentBytes,
                      mulChecked(addChecked(N, NR - 1) / NR, NR,
                                 addChecked(mulChecked(groupsChecked, scaleBytes()), hasSums() ? 4 : 0)));
  }
  constexpr bool operator==(const PanelLayout& o) const {
    return N == o.N && K == o.K && NR == o.NR && hasRowTail() == o.hasRowTail() && type == o.type &&
           (type != DType::I4 || group == o.group) && kPack == o.kPack && gated == o.gated &&
           rowPointers == o.rowPointers;
  }
};

// The formula, pinned: a change to the layout must change these.
static_assert(PanelLayout{20, 3, 16}.panels() == 2);
static_assert(PanelLayout{20, 3, 16}.offset(0, 0) == 0);
static_assert(PanelLayout{20, 3, 16}.offset(1, 0) == 1);
static_assert(PanelLayout{20, 3, 16}.offset(0, 1) == 16);
static_assert(PanelLayout{20, 3, 16}.offset(17, 2) == 48 + 32 + 1);
static_assert(PanelLayout{20, 3, 16}.totalElements() == 96);
static_assert(PanelLayout{16, 5, 16}.tailColumns() == 0);
static_assert(PanelLayout{20, 3, 16, true}.offset(17, 2) == 48 + 16 + 2);
static_assert(PanelLayout{20, 3, 16, true}.offset(15, 2) == 32 + 15);
static_assert(PanelLayout{20, 3, 16, true}.totalElements() == 48 + 4 * 16);
static_assert(PanelLayout{16, 5, 16, true}.totalElements() == 80);
// Gated: 64 columns of [gate (32 rows); up (32 rows)] in panels of 16: panel 1 holds
// gate rows 8..15, then up rows 8..15 (W rows 40..47).
static_assert(PanelLayout{64, 3, 16, false, DType::F32, 0, 1, true}.sourceRow(16 + 3) == 11);
static_assert(PanelLayout{64, 3, 16, false, DType::F32, 0, 1, true}.sourceRow(16 + 8 + 3) == 32 + 11);

static_assert(PanelLayout{20, 8, 16, false, DType::F32, 0, 1, false, true}.totalBytes() == 20 * 8); // a row table
static_assert(PanelLayout{20, 8, 16, false, DType::I4, 4}.weightBytes() == 2 * 8 * 8);
static_assert(PanelLayout{20, 8, 16, false, DType::I4, 4}.scaleIndex(17, 1) == 2 * 16 + 16 + 1);
static_assert(PanelLayout{20, 8, 16, false, DType::I8}.totalBytes() == 256 + 32 * 4);
// Dot-product layouts: K = 5 padded to 8 (kPack 4) / 6 (kPack 2).
static_assert(PanelLayout{20, 5, 16, false, DType::I8, 0, 4}.offset(17, 6) == 128 + 64 + 4 + 2);
static_assert(PanelLayout{20, 5, 16, false, DType::I8, 0, 4}.totalBytes() == 256 + 32 * 4 + 32 * 4);
static_assert(PanelLayout{20, 5, 16, false, DType::BF16, 0, 2}.offset(3, 3) == 32 + 6 + 1);
static_assert(PanelLayout{20, 5, 16, false, DType::I4, 16, 4}.totalBytes() == 128 + 2 * 16 * 2); // bf16 scales
static_assert(PanelLayout{20, 8, 16, false, DType::I4, 4}.totalBytes() == 128 + 2 * 2 * 16 * 2);
static_assert(PanelLayout{20, 5, 16, false, DType::BF16, 0, 2}.totalElements() == 2 * 6 * 16);

// A table read by rows (an embedding, pos_embedding, a norm's scale as one row) stored
// below f32: the same packing with panels of one row, so row n's elements are
// contiguous, one i8 scale per row (per tensor with --quant per-tensor) and i4 groups
// along the row. i4 panels hold two rows (NR = 2): byte k of panel p holds row 2p's
// element k in its low nibble and row 2p + 1's in its high nibble. The gather, norm
// and AddPositions kernels read it (StoredTable.h).
constexpr PanelLayout rowTableLayout(int64_t rows, int64_t cols, DType type, int64_t group) {
  return PanelLayout{rows, cols, type == DType::I4 ? 2 : 1, false, type, type == DType::I4 ? group : 0};
}
static_assert(rowTableLayout(3, 5, DType::I8, 0).offset(2, 4) == 14);
static_assert(rowTableLayout(3, 5, DType::I4, 2).offset(1, 4) == 9); // byte 4, high nibble
static_assert(rowTableLayout(3, 5, DType::I4, 2).scaleIndex(2, 1) == 2 * 3 + 2);

// Packs f32 W[N][K] into `out` (totalElements() floats; padding written as zero).
void packWeightsPanelF32(const PanelLayout& layout, const float* W, float* out);

// max |p[i]| over n floats (the scale search of i8 and i4); NaNs are not seen
// (the packers' storable checks find them).
float maxAbs(const float* p, int64_t n);

// Copies `count` rows of K floats (rows[i]) into `to` (count · K floats) and returns
// true, or returns false to have them read where they lie.
using RowReader = std::function<bool(const float* const* rows, int64_t count, int64_t K, float* to)>;

// How weights are packed: how low-precision ones are quantised (i8, i4), and how the
// rows are read.
struct PackOptions {
  bool perTensor = false; // i8: one scale for the whole tensor instead of one per channel
  // Per tensor, when W is not one whole tensor (attention's q, k, v or gated_mlp's gate
  // and up as one GEMM; a grouped conv's group): row n's tensor's max |w|, N entries.
  // Empty: the tensor is W.
  std::vector<float> tensorMaxOfRow;
  // packWeightRows: each panel's rows copied by this first, when set (the loader reads a
  // mapped weights file's rows with pread: MappedFile::read); else read through the pointers.
  RowReader readRows;
};

// A weight that a layout's dtype cannot store: what() is "weight [row, col] PROBLEM",
// the element of W[N][K] as packed; a caller that knows what W was made from names the
// file's tensor and element instead (runtime::elementOrigin).
struct UnstorableWeight : std::domain_error {
  UnstorableWeight(int64_t row, int64_t col, const std::string& problem)
      : std::domain_error("weight [" + std::to_string(row) + ", " + std::to_string(col) + "] " + problem), row(row),
        col(col), problem(problem) {}
  int64_t row, col;
  std::string problem; // "= 70000 is beyond f16's range (±65504)", "is nan, which i4 cannot store"
};

// Packs f32 W[N][K] into `out` (totalBytes() bytes, 64-byte aligned) in layout.type,
// rounding or quantising as described above. Throws UnstorableWeight when a weight
// cannot be stored: f16 beyond ±65504, bf16 beyond ±3.39e38, or NaN/inf.
void packWeightsPanel(const PanelLayout& layout, const float* W, void* out, const PackOptions& quant = {});
// The same for W given as its N rows of K floats each, wherever they lie (a
// concatenation of tensors packed straight from the mapped file, without first copying
// GBs into fresh memory): rows[n] is row n of W.
// With layout.rowPointers, both write the table of row pointers (into W's own rows:
// the caller keeps them alive as long as the table).
void packWeightRows(const PanelLayout& layout, const float* const* rows, void* out, const PackOptions& quant = {});

// The values the kernel multiplies by for W[N][K] stored as layout.type: each weight
// rounded to f16/bf16, or q · s for i8/i4 (row-major [N][K], f32). Same errors.
std::vector<float> storedWeightValues(const PanelLayout& layout, const float* W, const PackOptions& quant = {});

} // namespace nnc::codegen
