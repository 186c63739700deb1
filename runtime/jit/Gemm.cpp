// Packing and the thread split for Gemm; the row split for Elementwise.
#include "runtime/jit/Gemm.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <stdexcept>
#include <utility>
#include <vector>

#include "compiler/support/CheckedMath.h"
#include "runtime/LargeAllocation.h"

namespace nnc::runtime {

namespace {
// A kernel's scratch (GemmPlan::scratchBytes; GemmKernelFn's aPack): packed rows of A,
// a panel widened to f32, a dot kernel's converted rows. One per thread, kept and grown
// to the largest a kernel has asked for on it (a few MiB; digit products over a very
// long K, 48 bytes a k step), 64-byte aligned. Allocated here, so a failure is
// std::bad_alloc for the caller, not a fault inside a kernel.
float* scratchBuffer(int64_t bytes) {
  if (bytes <= 0) return nullptr;
  struct Buffer {
    std::unique_ptr<float, decltype(&std::free)> data{nullptr, &std::free};
    int64_t bytes = 0;
  };
  thread_local Buffer buffer;
  if (buffer.bytes < bytes) {
    buffer.data.reset(static_cast<float*>(std::aligned_alloc(64, size_t(bytes + 63) / 64 * 64)));
    buffer.bytes = buffer.data ? bytes : 0;
    if (!buffer.data) throw std::bad_alloc();
  }
  return buffer.data.get();
}

// Splits [0, total) into `parts` contiguous ranges differing in size by at most one.
std::pair<int64_t, int64_t> chunk(int64_t total, int64_t parts, int64_t index) {
  int64_t base = total / parts, extra = total % parts;
  int64_t begin = index * base + std::min(index, extra);
  return {begin, begin + base + (index < extra ? 1 : 0)};
}
} // namespace

namespace {
// Converting one element of A (bf16 rounding, or i8's max pass and quantisation) costs
// about this many of the dot kernel's MACs (one vpdpbusd is 64 MACs; a 16-element
// vector of A takes ~6 instructions over two passes); AMX tiles multiply 4-8× faster
// than that, the conversion does not.
constexpr int64_t kConversionMacs = 32, kTileConversionMacs = 128;
// Each weight a task streams costs about this many of the dot kernels' MACs: they
// multiply 4-16× faster than f32 FMAs (vpdpbusd, AMX tiles) while B arrives at the same
// bytes per second, so a split that makes several tasks read the same panels (row
// parts) is no longer cheap. 64×4096×4096 bf16 on AMX, 2 threads: rows split 4 ways
// read B 4 times (2,093 us); panels split 8 ways, 1,048 us (i8: 1,131 -> 730 us).
constexpr int64_t kDotWeightMacs = 64;
// Weights in place at many rows: each task transposes its panels' rows into the panel
// layout first (GemmEmitter.h), ~0.25-0.5 cycles a weight against 1/32 of one for a
// MAC on the avx512 row, so rows split across tasks repeat that.
constexpr int64_t kTransposeWeightMacs = 8;

// The factorisation of `tasks` into row parts × panel parts whose largest task does the
// least work (see chooseGemmSplit); its work in `work`, -1 when none fits.
GemmSplit bestFactorisation(const codegen::GemmSpec& spec, const codegen::GemmPlan& plan, int64_t tasks,
                            int64_t& work) {
  GemmSplit best;
  work = -1;
  const bool dot = plan.dot;
  const int64_t conversion = dot ? (plan.tiles ? kTileConversionMacs : kConversionMacs) : 0;
  for (int64_t rowParts = 1; rowParts <= tasks; ++rowParts) {
    if (tasks % rowParts) continue;
    int64_t panelParts = tasks / rowParts;
    if (rowParts > plan.rowBlocks || panelParts > plan.panels) continue;
    int64_t rows = std::min(spec.M, (plan.rowBlocks + rowParts - 1) / rowParts * plan.rowBlockRows);
    int64_t cols = (plan.panels + panelParts - 1) / panelParts * plan.NR;
    // Low-precision activations: each task converts its rows of A first (DotGemmEmitter.h),
    // so panel splits repeat that work, and each streams its panels.
    const bool transposes = spec.weightRows && spec.M > plan.rowBlockRows;
    int64_t w = rows * (cols + conversion) + (dot ? cols * kDotWeightMacs : 0) +
                (transposes ? cols * kTransposeWeightMacs : 0);
    bool preferThis = w < work || (w == work && (spec.M > spec.N) == (rowParts > best.rowParts));
    if (work < 0 || preferThis) best = {rowParts, panelParts}, work = w;
  }
  return best;
}
} // namespace

GemmSplit chooseGemmSplit(const codegen::GemmSpec& spec, const codegen::GemmPlan& plan,
                          int threads) {
  int64_t macs = spec.M * spec.N * spec.K;
  int64_t tasks = std::min<int64_t>(int64_t(threads) * kTasksPerThread, macs / kMinMacsPerTask);
  if (tasks > threads) tasks = tasks / threads * threads; // equal shares when all threads run
  // A K-blocked kernel copies its task's rows of A into micro-panels for every K block
  // (GemmEmitter.h: packA), so every task that shares rows with another repeats that
  // copy: one task per thread. ResNet-18's last convs (49×512×4608, weights cold, 2
  // threads): 776-837 -> 645-692 us each (8 tasks packed the 49 rows 8 times).
  // A whole-K kernel that packs its chunk of A (packsWholeK) likewise: 1024³ at 2
  // threads, Zen 5 guest, 8 tasks 351-355 -> 2 tasks 383-387 GFLOP/s (best of 5 rounds).
  if (plan.kBlocks > 1 || plan.packedAFloats > 0) tasks = std::min<int64_t>(tasks, threads);
  if (threads <= 1 || tasks <= 1) return {};
  int64_t work = 0;
  GemmSplit best = bestFactorisation(spec, plan, tasks, work);
  if (!plan.dot || tasks <= threads) return best;
  // Dot kernels: fewer tasks repeat less conversion; judged by a thread's share (tasks
  // per thread × the largest task), more tasks kept on a tie. 64×4096×4096 i8 on AMX,
  // 2 threads: 8 tasks 730-781 us, 2 tasks 566 (bf16: 1,048 -> 999).
  int64_t bestShare = work * (tasks / threads);
  for (int64_t fewer = tasks / 2; fewer >= threads && fewer % threads == 0; fewer /= 2) {
    int64_t w = 0;
    GemmSplit s = bestFactorisation(spec, plan, fewer, w);
    if (w >= 0 && w * (fewer / threads) < bestShare) best = s, bestShare = w * (fewer / threads);
  }
  return best;
}

Gemm::Gemm(JitEngine& engine, const codegen::GemmSpec& spec)
    : spec_(spec), layout_(codegen::gemmPanelLayout(spec, engine.microKernel())),
      plan_(codegen::planGemm(spec, engine.microKernel(), engine.features())),
      kernel_(reinterpret_cast<codegen::GemmKernelFn>(engine.kernel(spec))) {
  if (spec.residual && spec.act != codegen::Activation::None && plan_.kBlocks > 1) {
    codegen::GemmSpec whole = spec;
    whole.kc = spec.K; // one K block: the residual is read before C is written
    aliasSafeKernel_ = reinterpret_cast<codegen::GemmKernelFn>(engine.kernel(whole));
  }
}

codegen::GemmKernelFn Gemm::kernelFor(const float* residual, const float* C) const {
  if (!aliasSafeKernel_) return kernel_;
  auto r = reinterpret_cast<uintptr_t>(residual), c = reinterpret_cast<uintptr_t>(C);
  uintptr_t bytes = uintptr_t(spec_.M * spec_.N) * sizeof(float);
  return r < c + bytes && c < r + bytes ? aliasSafeKernel_ : kernel_;
}

PackedWeights Gemm::pack(const float* W, const codegen::PackOptions& quant) const {
  if (layout_.rowPointers) {
    std::vector<const float*> rows(size_t(layout_.N));
    for (int64_t n = 0; n < layout_.N; ++n) rows[size_t(n)] = W + n * layout_.K;
    return packRows(rows.data(), quant);
  }
  PackedWeights packed;
  packed.layout_ = layout_;
  packed.data_ = PackedWeights::allocate(layout_.totalBytesChecked());
  codegen::packWeightsPanel(layout_, W, packed.data_.get(), quant);
  return packed;
}

namespace {
// W's rows copied into one owned block (weights in place, from rows the caller keeps).
std::pair<std::shared_ptr<float>, std::vector<const float*>> copyRows(const codegen::PanelLayout& L,
                                                                      const float* const* rows) {
  std::shared_ptr<void> raw = allocatePacked(size_t(mulChecked(L.N, L.K, int64_t(sizeof(float)))),
                                             codegen::kPackedAlignmentBytes);
  if (!raw) throw std::bad_alloc();
  auto block = std::static_pointer_cast<float>(raw);
  std::vector<const float*> copies(size_t(L.N));
  for (int64_t n = 0; n < L.N; ++n) {
    float* to = block.get() + n * L.K;
    std::memcpy(to, rows[n], size_t(L.K) * sizeof(float));
    copies[size_t(n)] = to;
  }
  return {block, copies};
}
} // namespace

PackedWeights Gemm::referRows(const float* const* rows, std::shared_ptr<const void> owner) const {
  if (!layout_.rowPointers) throw std::logic_error("gemm " + spec_.key() + ": weights are packed, not in place");
  PackedWeights packed;
  packed.layout_ = layout_;
  packed.data_ = PackedWeights::allocate(layout_.totalBytesChecked());
  codegen::packWeightRows(layout_, rows, packed.data_.get());
  packed.rows_ = std::move(owner);
  return packed;
}

PackedWeights Gemm::packRows(const float* const* rows, const codegen::PackOptions& quant) const {
  if (layout_.rowPointers) {
    auto [block, copies] = copyRows(layout_, rows);
    return referRows(copies.data(), block);
  }
  PackedWeights packed;
  packed.layout_ = layout_;
  packed.data_ = PackedWeights::allocate(layout_.totalBytesChecked());
  codegen::packWeightRows(layout_, rows, packed.data_.get(), quant);
  return packed;
}

std::shared_ptr<float> PackedWeights::allocate(int64_t bytes) {
  std::shared_ptr<void> raw = allocatePacked(size_t(bytes), codegen::kPackedAlignmentBytes);
  if (!raw) throw std::bad_alloc();
  return std::static_pointer_cast<float>(raw);
}

PackedWeights PackedWeights::copy() const {
  if (layout_.rowPointers) { // the rows themselves, in table order
    codegen::PanelLayout inOrder = layout_;
    inOrder.gated = false;
    auto [block, copies] = copyRows(inOrder, reinterpret_cast<const float* const*>(data_.get()));
    PackedWeights out;
    out.layout_ = layout_;
    out.data_ = allocate(bytes());
    std::memcpy(out.data_.get(), copies.data(), size_t(bytes()));
    out.rows_ = block;
    return out;
  }
  PackedWeights out;
  out.layout_ = layout_;
  out.data_ = allocate(bytes());
  std::memcpy(out.data_.get(), data_.get(), size_t(bytes()));
  return out;
}

PackedWeights PackedWeights::view(const codegen::PanelLayout& layout, const void* bytes,
                                  std::shared_ptr<const void> owner) {
  PackedWeights out;
  out.layout_ = layout;
  // Aliasing: shares owner's lifetime; the kernels only read through it.
  out.data_ = std::shared_ptr<float>(std::const_pointer_cast<void>(owner), static_cast<float*>(const_cast<void*>(bytes)));
  return out;
}

void Gemm::check(const PackedWeights& B, const float* bias, const float* residual) const {
  if (accepts(B, bias, residual)) return;
  const auto& got = B.layout();
  if (!B.data() || !(got == layout_))
    throw std::invalid_argument("gemm " + spec_.key() + ": weights packed for another shape");
  if (spec_.bias && !bias) throw std::invalid_argument("gemm " + spec_.key() + ": bias is null");
  if (spec_.residual && !residual)
    throw std::invalid_argument("gemm " + spec_.key() + ": residual is null");
}

void Gemm::runChecked(const float* A, const PackedWeights& B, const float* bias,
                      const float* residual, float* C, ThreadPool* pool) const {
  check(B, bias, residual);
  GemmSplit split = pool ? chooseGemmSplit(spec_, plan_, pool->size()) : GemmSplit{};
  if (split.tasks() <= 1)
    return kernelFor(residual, C)(A, B.data(), bias, residual, C, scratchBuffer(plan_.scratchBytes), 0, plan_.panels,
                                  0, plan_.rowBlocks);
  runSplit(A, B, bias, residual, C, pool, split);
}

void Gemm::runSplit(const float* A, const PackedWeights& B, const float* bias,
                    const float* residual, float* C, ThreadPool* pool, GemmSplit split) const {
  check(B, bias, residual);
  runTasks(A, B, bias, residual, C, pool, split, 0, plan_.rowBlocks);
}

void Gemm::runTasks(const float* A, const PackedWeights& B, const float* bias, const float* residual, float* C,
                    ThreadPool* pool, GemmSplit split, int64_t rowBlockBegin, int64_t rowBlockEnd) const {
  const int64_t blocks = rowBlockEnd - rowBlockBegin;
  split.rowParts = std::clamp<int64_t>(split.rowParts, 1, blocks);
  split.panelParts = std::clamp<int64_t>(split.panelParts, 1, plan_.panels);
  codegen::GemmKernelFn kernel = kernelFor(residual, C);
  auto task = [&](int64_t i) {
    auto [p0, p1] = chunk(plan_.panels, split.panelParts, i % split.panelParts);
    auto [r0, r1] = chunk(blocks, split.rowParts, i / split.panelParts);
    kernel(A, B.data(), bias, residual, C, scratchBuffer(plan_.scratchBytes), p0, p1, rowBlockBegin + r0,
           rowBlockBegin + r1);
  };
  if (pool && split.tasks() > 1) return pool->parallelFor(split.tasks(), task);
  for (int64_t i = 0; i < split.tasks(); ++i) task(i);
}

void Gemm::runRowBlocks(const float* A, const PackedWeights& B, const float* bias, const float* residual, float* C,
                        int64_t rowBlockBegin, int64_t rowBlockEnd, ThreadPool* pool) const {
  check(B, bias, residual);
  if (rowBlockBegin < 0 || rowBlockEnd > plan_.rowBlocks || rowBlockBegin >= rowBlockEnd)
    throw std::invalid_argument("gemm " + spec_.key() + ": row blocks outside the plan");
  // Rows enough for 4 row blocks per thread: by rows, so that each thread multiplies
  // the rows it just laid out (ResNet-18 at 2 threads, batch 1 / 8: 13.5-14.7 ->
  // 12.8-13.3 ms, 109 -> 95-98 ms, against the split run() chooses). Fewer: the split
  // run() would choose for a GEMM of just these rows (by panels, so that the threads
  // do not each stream all of W: ResNet-18's last convs at batch 1).
  codegen::GemmSpec rows = spec_;
  rows.M = std::min(spec_.M, rowBlockEnd * plan_.rowBlockRows) - rowBlockBegin * plan_.rowBlockRows;
  codegen::GemmPlan plan = plan_;
  plan.rowBlocks = rowBlockEnd - rowBlockBegin;
  GemmSplit split = pool ? chooseGemmSplit(rows, plan, pool->size()) : GemmSplit{};
  if (pool && plan.rowBlocks >= 4 * int64_t(pool->size())) split = {pool->size(), 1};
  runTasks(A, B, bias, residual, C, pool, split, rowBlockBegin, rowBlockEnd);
}

Elementwise::Elementwise(JitEngine& engine, const codegen::ElementwiseSpec& spec)
    : spec_(spec),
      kernel_(reinterpret_cast<codegen::ElementwiseKernelFn>(engine.kernel(spec))) {}

void Elementwise::run(const float* x, const float* y, float* out, ThreadPool* pool, int64_t past) const {
  if (!y && (spec_.kind == codegen::ElementwiseSpec::Add || spec_.kind == codegen::ElementwiseSpec::GatedProduct ||
             spec_.kind == codegen::ElementwiseSpec::AddPositions))
    throw std::invalid_argument("elementwise " + spec_.key() + ": second input is null");
  int64_t parts = pool ? std::min<int64_t>(pool->size(), spec_.rows) : 1;
  if (parts <= 1) return kernel_(x, y, out, 0, spec_.rows, past);
  pool->parallelFor(parts, [&](int64_t i) {
    auto [begin, end] = chunk(spec_.rows, parts, i);
    kernel_(x, y, out, begin, end, past);
  });
}

} // namespace nnc::runtime
