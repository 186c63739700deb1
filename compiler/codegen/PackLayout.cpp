// Packing W[N][K] into NR-wide k-major panels (layout in PackLayout.h).
#include "compiler/codegen/PackLayout.h"

#include <algorithm>

namespace nnc::codegen {

void packWeightsPanelF32(const PanelLayout& L, const float* W, float* out) {
  const int64_t panels = L.hasRowTail() ? L.fullPanels() : L.panels();
  for (int64_t p = 0; p < panels; ++p) {
    float* panel = out + p * L.panelElements();
    int64_t n0 = p * L.NR;
    int64_t width = std::min<int64_t>(L.NR, L.N - n0);
    for (int64_t k = 0; k < L.K; ++k) {
      float* row = panel + k * L.NR;
      for (int64_t j = 0; j < width; ++j) row[j] = W[(n0 + j) * L.K + k];
      std::fill(row + width, row + L.NR, 0.0f);
    }
  }
  if (!L.hasRowTail()) return;
  for (int64_t j = 0; j < L.tailColumns(); ++j) {
    float* row = out + L.tailOffset() + j * L.tailStride();
    std::copy_n(W + (L.fullPanels() * L.NR + j) * L.K, L.K, row);
    std::fill(row + L.K, row + L.tailStride(), 0.0f);
  }
}

} // namespace nnc::codegen
