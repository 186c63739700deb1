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
// Sizes are in elements of the storage dtype (f32 now; f16/bf16/i8 use the same
// index formula with their element size).
#pragma once
#include <cstdint>

#include "compiler/support/CheckedMath.h"

namespace nnc::codegen {

inline constexpr int64_t kPackedAlignmentBytes = 64;

struct PanelLayout {
  int64_t N, K, NR;
  bool rowTail = false; // the N % NR tail channels as [n][k] rows (see above)

  constexpr int64_t panels() const { return (N + NR - 1) / NR; }
  constexpr int64_t fullPanels() const { return N / NR; }
  constexpr int64_t tailColumns() const { return N % NR; } // columns in the last, partial panel
  constexpr bool hasRowTail() const { return rowTail && tailColumns() != 0; }
  constexpr int64_t panelElements() const { return K * NR; }
  constexpr int64_t tailStride() const { return (K + 15) / 16 * 16; }
  constexpr int64_t tailOffset() const { return fullPanels() * panelElements(); }
  constexpr int64_t totalElements() const {
    return hasRowTail() ? tailOffset() + tailColumns() * tailStride() : panels() * panelElements();
  }
  constexpr int64_t offset(int64_t n, int64_t k) const {
    if (hasRowTail() && n >= fullPanels() * NR) return tailOffset() + (n % NR) * tailStride() + k;
    return (n / NR) * panelElements() + k * NR + (n % NR);
  }
  // Same, refusing sizes that overflow (for buffers sized from user input).
  int64_t totalElementsChecked() const {
    if (hasRowTail())
      return addChecked(mulChecked(N / NR, K, NR), mulChecked(N % NR, addChecked(K, 15) / 16 * 16));
    return mulChecked(addChecked(N, NR - 1) / NR, K, NR);
  }
  constexpr bool operator==(const PanelLayout& o) const {
    return N == o.N && K == o.K && NR == o.NR && hasRowTail() == o.hasRowTail();
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

// Packs f32 W[N][K] into `out` (totalElements() floats; padding written as zero).
void packWeightsPanelF32(const PanelLayout& layout, const float* W, float* out);

} // namespace nnc::codegen
