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
// Sizes are in elements of the storage dtype (f32 now; f16/bf16/i8 use the same
// index formula with their element size).
#pragma once
#include <cstdint>

#include "compiler/support/CheckedMath.h"

namespace nnc::codegen {

inline constexpr int64_t kPackedAlignmentBytes = 64;

struct PanelLayout {
  int64_t N, K, NR;

  constexpr int64_t panels() const { return (N + NR - 1) / NR; }
  constexpr int64_t fullPanels() const { return N / NR; }
  constexpr int64_t tailColumns() const { return N % NR; } // columns in the last, partial panel
  constexpr int64_t panelElements() const { return K * NR; }
  constexpr int64_t totalElements() const { return panels() * panelElements(); }
  constexpr int64_t offset(int64_t n, int64_t k) const {
    return (n / NR) * panelElements() + k * NR + (n % NR);
  }
  // Same, refusing sizes that overflow (for buffers sized from user input).
  int64_t totalElementsChecked() const {
    return mulChecked(addChecked(N, NR - 1) / NR, K, NR);
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

// Packs f32 W[N][K] into `out` (totalElements() floats; padding written as zero).
void packWeightsPanelF32(const PanelLayout& layout, const float* W, float* out);

} // namespace nnc::codegen
