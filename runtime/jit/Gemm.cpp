// Packing and the thread split for Gemm; the row split for Elementwise.
#include "runtime/jit/Gemm.h"

#include <algorithm>
#include <new>
#include <stdexcept>

namespace nnc::runtime {

namespace {
// Splits [0, total) into `parts` contiguous ranges differing in size by at most one.
std::pair<int64_t, int64_t> chunk(int64_t total, int64_t parts, int64_t index) {
  int64_t base = total / parts, extra = total % parts;
  int64_t begin = index * base + std::min(index, extra);
  return {begin, begin + base + (index < extra ? 1 : 0)};
}
} // namespace

Gemm::Gemm(JitEngine& engine, const codegen::GemmSpec& spec)
    : spec_(spec), layout_{spec.N, spec.K, engine.microKernel().NR},
      kernel_(reinterpret_cast<codegen::GemmKernelFn>(engine.gemm(spec))) {}

PackedWeights Gemm::pack(const float* W) const {
  PackedWeights packed;
  packed.layout_ = layout_;
  int64_t bytes = mulChecked(layout_.totalElementsChecked(), int64_t(sizeof(float)));
  int64_t rounded = (bytes + codegen::kPackedAlignmentBytes - 1) /
                    codegen::kPackedAlignmentBytes * codegen::kPackedAlignmentBytes;
  void* raw = std::aligned_alloc(codegen::kPackedAlignmentBytes, size_t(rounded));
  if (!raw) throw std::bad_alloc();
  packed.data_.reset(static_cast<float*>(raw));
  codegen::packWeightsPanelF32(layout_, W, packed.data_.get());
  return packed;
}

void Gemm::run(const float* A, const PackedWeights& B, const float* bias,
               const float* residual, float* C, ThreadPool* pool) const {
  const auto& got = B.layout();
  if (!B.data() || got.N != layout_.N || got.K != layout_.K || got.NR != layout_.NR)
    throw std::invalid_argument("gemm " + spec_.key() + ": weights packed for another shape");
  if (spec_.bias && !bias) throw std::invalid_argument("gemm " + spec_.key() + ": bias is null");
  if (spec_.residual && !residual)
    throw std::invalid_argument("gemm " + spec_.key() + ": residual is null");
  int64_t panels = layout_.panels();
  int64_t parts = pool ? std::min<int64_t>(pool->size(), panels) : 1;
  if (parts <= 1) return kernel_(A, B.data(), bias, residual, C, 0, panels);
  pool->parallelFor(parts, [&](int64_t i) {
    auto [begin, end] = chunk(panels, parts, i);
    kernel_(A, B.data(), bias, residual, C, begin, end);
  });
}

Elementwise::Elementwise(JitEngine& engine, const codegen::ElementwiseSpec& spec)
    : spec_(spec),
      kernel_(reinterpret_cast<codegen::ElementwiseKernelFn>(engine.elementwise(spec))) {}

void Elementwise::run(const float* x, const float* y, float* out, ThreadPool* pool) const {
  if (spec_.kind == codegen::ElementwiseSpec::Add && !y)
    throw std::invalid_argument("elementwise add: second input is null");
  int64_t parts = pool ? std::min<int64_t>(pool->size(), spec_.rows) : 1;
  if (parts <= 1) return kernel_(x, y, out, 0, spec_.rows);
  pool->parallelFor(parts, [&](int64_t i) {
    auto [begin, end] = chunk(spec_.rows, parts, i);
    kernel_(x, y, out, begin, end);
  });
}

} // namespace nnc::runtime
