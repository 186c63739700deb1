#include "runtime/model/StepKernels.h"

#include <algorithm>

#include <fmt/format.h>

#include "compiler/codegen/ArgmaxEmitter.h"
#include "compiler/codegen/AttentionEmitter.h"
#include "compiler/codegen/ChannelEmitter.h"
#include "compiler/codegen/DepthwiseEmitter.h"
#include "compiler/codegen/GatherEmitter.h"
#include "compiler/codegen/KvAppendEmitter.h"
#include "compiler/codegen/LastPositionEmitter.h"
#include "compiler/codegen/LayoutEmitter.h"
#include "compiler/codegen/NormEmitter.h"
#include "compiler/codegen/PoolEmitter.h"
#include "compiler/codegen/RopeEmitter.h"
#include "compiler/support/Error.h"

namespace nnc::runtime {

namespace {
const float *f(const void *p) { return static_cast<const float *>(p); }
float *out(const void *p) { return const_cast<float *>(static_cast<const float *>(p)); }

// Calls fn(begin, end) over [0, total) cut into one contiguous range per thread.
template <typename Fn> void splitRange(int64_t total, ThreadPool *pool, Fn fn) {
  int64_t parts = pool ? std::min<int64_t>(pool->size(), total) : 1;
  if (parts <= 1) return fn(int64_t(0), total);
  pool->parallelFor(parts, [&](int64_t i) {
    int64_t base = total / parts, extra = total % parts;
    int64_t begin = i * base + std::min(i, extra);
    fn(begin, begin + base + (i < extra ? 1 : 0));
  });
}

class GemmStep : public StepKernel {
public:
  GemmStep(JitEngine &jit, const codegen::GemmSpec &s) : gemm_(jit, s) {}
  void run(const OperandPointers &o, ThreadPool *pool, int64_t past) const override {
    gemm_.run(f(o[0]), *static_cast<const PackedWeights *>(o[1]), f(o[2]), f(o[3]), out(o[4]), pool);
  }
  const Gemm *gemm() const override { return &gemm_; }

private:
  Gemm gemm_;
};

// AddPositions reads the table from row `past` on (a decoder's later positions).
class ElementwiseStep : public StepKernel {
public:
  ElementwiseStep(JitEngine &jit, const codegen::ElementwiseSpec &s) : kernel_(jit, s) {}
  void run(const OperandPointers &o, ThreadPool *pool, int64_t past) const override {
    kernel_.run(f(o[0]), o[1] ? f(o[1]) : nullptr, out(o[2]), pool, past);
  }

private:
  Elementwise kernel_;
};

class NormStep : public StepKernel {
public:
  NormStep(JitEngine &jit, const codegen::NormSpec &s)
      : spec_(s), kernel_(reinterpret_cast<codegen::NormKernelFn>(jit.kernel(s))) {}
  void run(const OperandPointers &o, ThreadPool *pool, int64_t past) const override {
    splitRange(spec_.rows, pool, [&](int64_t b, int64_t e) { kernel_(f(o[0]), f(o[1]), f(o[2]), out(o[3]), b, e); });
  }

private:
  codegen::NormSpec spec_;
  codegen::NormKernelFn kernel_;
};

class PoolStep : public StepKernel {
public:
  PoolStep(JitEngine &jit, const codegen::PoolSpec &s)
      : spec_(s), kernel_(reinterpret_cast<codegen::PoolKernelFn>(jit.kernel(s))) {}
  void run(const OperandPointers &o, ThreadPool *pool, int64_t past) const override {
    splitRange(spec_.units(), pool, [&](int64_t b, int64_t e) { kernel_(f(o[0]), out(o[1]), b, e); });
  }

private:
  codegen::PoolSpec spec_;
  codegen::PoolKernelFn kernel_;
};

class LayoutStep : public StepKernel {
public:
  LayoutStep(JitEngine &jit, const codegen::LayoutSpec &s)
      : units_(codegen::layoutUnits(s)), offset_(codegen::layoutChannelOffset(s)), im2col_(s.im2col()),
        kernel_(reinterpret_cast<codegen::LayoutKernelFn>(jit.kernel(s))) {}
  void run(const OperandPointers &o, ThreadPool *pool, int64_t past) const override {
    // The NCHW side starts at the group's first channel (LayoutEmitter.h).
    const float *x = f(o[0]) + (im2col_ ? offset_ : 0);
    const float *res = o[1] ? f(o[1]) + offset_ : nullptr;
    float *dst = out(o[2]) + (im2col_ ? 0 : offset_);
    splitRange(units_, pool, [&](int64_t b, int64_t e) { kernel_(x, res, dst, b, e); });
  }

private:
  int64_t units_, offset_;
  bool im2col_;
  codegen::LayoutKernelFn kernel_;
};

// A conv's im2col and GEMM a chunk of row blocks at a time (ConvGemmSpec): the chunk's
// output rows (b, i) are laid out into the scratch, whose start stands for row u0·wo of
// the whole A, so the GEMM kernel reads rows [row0, row1) where it expects them; both
// split over the pool's threads, one chunk after another.
class ConvGemmStep : public StepKernel {
public:
  ConvGemmStep(JitEngine &jit, const codegen::ConvGemmSpec &s)
      : spec_(s), gemm_(jit, s.gemm), im2col_(reinterpret_cast<codegen::LayoutKernelFn>(jit.kernel(s.im2col))),
        offset_(codegen::layoutChannelOffset(s.im2col)), wo_(s.im2col.outW()) {
    const int64_t mr = gemm_.plan().rowBlockRows;
    blocksPerChunk_ = s.chunkRows >= s.gemm.M ? gemm_.plan().rowBlocks : s.chunkRows / mr;
    if (blocksPerChunk_ < 1) throw std::logic_error("conv step " + s.key() + ": a chunk is shorter than a row block");
  }
  void run(const OperandPointers &o, ThreadPool *pool, int64_t past) const override {
    const float *x = f(o[0]) + offset_;
    const auto &B = *static_cast<const PackedWeights *>(o[1]);
    float *scratch = out(o[4]);
    const int64_t M = spec_.gemm.M, K = spec_.gemm.K, mr = gemm_.plan().rowBlockRows, blocks = gemm_.plan().rowBlocks;
    for (int64_t rb0 = 0; rb0 < blocks; rb0 += blocksPerChunk_) {
      const int64_t rb1 = std::min(blocks, rb0 + blocksPerChunk_);
      const int64_t u0 = rb0 * mr / wo_, u1 = (std::min(M, rb1 * mr) + wo_ - 1) / wo_;
      // Row r of A is at scratch + (r − u0·wo)·K: a base before the scratch, never read there.
      float *a = reinterpret_cast<float *>(reinterpret_cast<uintptr_t>(scratch) - uintptr_t(u0 * wo_ * K) * sizeof(float));
      splitRange(u1 - u0, pool, [&](int64_t b, int64_t e) { im2col_(x, nullptr, a, u0 + b, u0 + e); });
      gemm_.runRowBlocks(a, B, f(o[2]), f(o[3]), out(o[5]), rb0, rb1, pool);
    }
  }
  const Gemm *gemm() const override { return &gemm_; }

private:
  codegen::ConvGemmSpec spec_;
  Gemm gemm_;
  codegen::LayoutKernelFn im2col_;
  int64_t offset_, wo_, blocksPerChunk_ = 1;
};

class ChannelStep : public StepKernel {
public:
  ChannelStep(JitEngine &jit, const codegen::ChannelSpec &s)
      : spec_(s), kernel_(reinterpret_cast<codegen::ChannelKernelFn>(jit.kernel(s))) {}
  void run(const OperandPointers &o, ThreadPool *pool, int64_t past) const override {
    splitRange(spec_.batch, pool, [&](int64_t b, int64_t e) { kernel_(f(o[0]), f(o[1]), f(o[2]), out(o[3]), b, e); });
  }

private:
  codegen::ChannelSpec spec_;
  codegen::ChannelKernelFn kernel_;
};

class DepthwiseStep : public StepKernel {
public:
  DepthwiseStep(JitEngine &jit, const codegen::DepthwiseSpec &s)
      : planes_(s.units()), kernel_(reinterpret_cast<codegen::DepthwiseKernelFn>(jit.kernel(s))) {}
  void run(const OperandPointers &o, ThreadPool *pool, int64_t past) const override {
    splitRange(planes_, pool, [&](int64_t b, int64_t e) { kernel_(f(o[0]), f(o[1]), f(o[2]), f(o[3]), out(o[4]), b, e); });
  }

private:
  int64_t planes_;
  codegen::DepthwiseKernelFn kernel_;
};

// An embedding's lookup. The ids are checked before the kernel runs (the kernel itself
// never reads outside the table: it writes zeros for a bad id).
class GatherStep : public StepKernel {
public:
  GatherStep(JitEngine &jit, const codegen::GatherSpec &s)
      : spec_(s), kernel_(reinterpret_cast<codegen::GatherKernelFn>(jit.kernel(s))) {}
  void run(const OperandPointers &o, ThreadPool *pool, int64_t past) const override {
    const auto *ids = static_cast<const int32_t *>(o[0]);
    for (int64_t r = 0; r < spec_.rows; ++r)
      if (ids[r] < 0 || ids[r] >= spec_.vocab)
        throw UserError(fmt::format("token id {} at batch row {}, position {} is outside the vocabulary [0, {})",
                                    ids[r], r / spec_.seq, past + r % spec_.seq, spec_.vocab)); // a decoder's: after its cache
    splitRange(spec_.rows, pool, [&](int64_t b, int64_t e) { kernel_(ids, f(o[1]), out(o[2]), b, e); });
  }

private:
  codegen::GatherSpec spec_;
  codegen::GatherKernelFn kernel_;
};

// Rotary embedding in place (the x and out operands are one buffer), at positions
// past + r mod seq.
class RopeStep : public StepKernel {
public:
  RopeStep(JitEngine &jit, const codegen::RopeSpec &s)
      : spec_(s), kernel_(reinterpret_cast<codegen::RopeKernelFn>(jit.kernel(s))) {}
  void run(const OperandPointers &o, ThreadPool *pool, int64_t past) const override {
    splitRange(spec_.rows, pool, [&](int64_t b, int64_t e) { kernel_(out(o[2]), f(o[1]), b, e, past); });
  }

private:
  codegen::RopeSpec spec_;
  codegen::RopeKernelFn kernel_;
};

// Attention over units (batch entry, K/V head); each unit has its own scratch.
class AttentionStep : public StepKernel {
public:
  AttentionStep(JitEngine &jit, const codegen::AttentionSpec &s)
      : units_(s.units()), kernel_(reinterpret_cast<codegen::AttentionKernelFn>(jit.kernel(s))) {}
  void run(const OperandPointers &o, ThreadPool *pool, int64_t past) const override {
    splitRange(units_, pool,
               [&](int64_t b, int64_t e) { kernel_(f(o[0]), f(o[1]), f(o[2]), out(o[3]), out(o[4]), b, e, past); });
  }

private:
  int64_t units_;
  codegen::AttentionKernelFn kernel_;
};

// A decoder's KV cache append, at positions past + r mod seq.
class KvAppendStep : public StepKernel {
public:
  KvAppendStep(JitEngine &jit, const codegen::KvAppendSpec &s)
      : spec_(s), kernel_(reinterpret_cast<codegen::KvAppendKernelFn>(jit.kernel(s))) {}
  void run(const OperandPointers &o, ThreadPool *pool, int64_t past) const override {
    splitRange(spec_.rows, pool, [&](int64_t b, int64_t e) { kernel_(f(o[0]), out(o[1]), b, e, past); });
  }

private:
  codegen::KvAppendSpec spec_;
  codegen::KvAppendKernelFn kernel_;
};

// Each sequence's last position, a sequence per task.
class LastPositionStep : public StepKernel {
public:
  LastPositionStep(JitEngine &jit, const codegen::LastPositionSpec &s)
      : spec_(s), kernel_(reinterpret_cast<codegen::LastPositionKernelFn>(jit.kernel(s))) {}
  void run(const OperandPointers &o, ThreadPool *pool, int64_t) const override {
    splitRange(spec_.rows, pool, [&](int64_t b, int64_t e) { kernel_(f(o[0]), out(o[1]), b, e); });
  }

private:
  codegen::LastPositionSpec spec_;
  codegen::LastPositionKernelFn kernel_;
};

// Greedy decoding's next ids, rows split over the threads.
class ArgmaxStep : public StepKernel {
public:
  ArgmaxStep(JitEngine &jit, const codegen::ArgmaxSpec &s)
      : spec_(s), kernel_(reinterpret_cast<codegen::ArgmaxKernelFn>(jit.kernel(s))) {}
  void run(const OperandPointers &o, ThreadPool *pool, int64_t) const override {
    auto *ids = reinterpret_cast<int32_t *>(out(o[1]));
    splitRange(spec_.rows, pool, [&](int64_t b, int64_t e) { kernel_(f(o[0]), ids, b, e); });
  }

private:
  codegen::ArgmaxSpec spec_;
  codegen::ArgmaxKernelFn kernel_;
};

struct Make {
  JitEngine &jit;
  std::unique_ptr<StepKernel> operator()(const codegen::GemmSpec &s) const { return std::make_unique<GemmStep>(jit, s); }
  std::unique_ptr<StepKernel> operator()(const codegen::ElementwiseSpec &s) const {
    return std::make_unique<ElementwiseStep>(jit, s);
  }
  std::unique_ptr<StepKernel> operator()(const codegen::NormSpec &s) const { return std::make_unique<NormStep>(jit, s); }
  std::unique_ptr<StepKernel> operator()(const codegen::PoolSpec &s) const { return std::make_unique<PoolStep>(jit, s); }
  std::unique_ptr<StepKernel> operator()(const codegen::LayoutSpec &s) const {
    return std::make_unique<LayoutStep>(jit, s);
  }
  std::unique_ptr<StepKernel> operator()(const codegen::DepthwiseSpec &s) const {
    return std::make_unique<DepthwiseStep>(jit, s);
  }
  std::unique_ptr<StepKernel> operator()(const codegen::ChannelSpec &s) const {
    return std::make_unique<ChannelStep>(jit, s);
  }
  std::unique_ptr<StepKernel> operator()(const codegen::GatherSpec &s) const {
    return std::make_unique<GatherStep>(jit, s);
  }
  std::unique_ptr<StepKernel> operator()(const codegen::RopeSpec &s) const { return std::make_unique<RopeStep>(jit, s); }
  std::unique_ptr<StepKernel> operator()(const codegen::KvAppendSpec &s) const {
    return std::make_unique<KvAppendStep>(jit, s);
  }
  std::unique_ptr<StepKernel> operator()(const codegen::LastPositionSpec &s) const {
    return std::make_unique<LastPositionStep>(jit, s);
  }
  std::unique_ptr<StepKernel> operator()(const codegen::ArgmaxSpec &s) const {
    return std::make_unique<ArgmaxStep>(jit, s);
  }
  std::unique_ptr<StepKernel> operator()(const codegen::AttentionSpec &s) const {
    return std::make_unique<AttentionStep>(jit, s);
  }
  std::unique_ptr<StepKernel> operator()(const codegen::ConvGemmSpec &s) const {
    return std::make_unique<ConvGemmStep>(jit, s);
  }
};
} // namespace

std::unique_ptr<StepKernel> makeStepKernel(JitEngine &jit, const codegen::KernelSpec &spec) {
  return std::visit(Make{jit}, spec);
}

} // namespace nnc::runtime
