// Per-channel kernels, vectorised along the plane (W floats at a time, the plane's tail
// one masked vector), specialised on channels, plane and the lrn constants.
//
// ScaleShift: per channel (a runtime loop) scale and shift are broadcast once, then
//   out = x · scale + shift (one FMA where the CPU has it).
// Lrn, following PyTorch's F.local_response_norm operation by operation: for each
//   vector of plane positions and each channel ch (a runtime loop), the window's
//   squares are summed in channel order from +0 over the window's channels inside
//   [0, c) (a runtime loop: those outside are PyTorch's zero padding, whose +0 terms
//   change no sum; unrolling every term made lrn(20000) compile for minutes), then
//     d = (sum / size) · alpha + k,   out = x / pow(d, beta)
//   (avg_pool3d, mul, add, pow, div). pow is llvm.pow: the C library's powf per lane.
#include "compiler/codegen/ChannelEmitter.h"

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "compiler/codegen/KernelFunction.h"
#include "compiler/codegen/LoopBuilder.h"
#include "compiler/codegen/PartialVector.h"
#include "compiler/codegen/VectorMath.h"

namespace nnc::codegen {

using llvm::Value;

std::string channelFunctionName(const ChannelSpec& spec) { return "nnc_" + spec.key(); }

void validateChannelSpec(const ChannelSpec& s) {
  auto fail = [&](const std::string& why) { throw std::invalid_argument("channel " + s.key() + ": " + why); };
  if (s.batch < 0) fail("need batch >= 0");
  if (s.c < 1 || s.plane < 1) fail("channels and plane must be positive");
  if (s.kind == ChannelSpec::Lrn) {
    if (s.size < 1) fail("lrn size must be >= 1");
    if (!std::isfinite(s.alpha) || !std::isfinite(s.beta) || !std::isfinite(s.k)) fail("lrn constants must be finite");
  }
}

namespace {

class ChannelBuilder {
public:
  ChannelBuilder(llvm::Function* fn, const ChannelSpec& spec, const MicroKernelShape& shape)
      : s_(spec), W_(shape.vectorFloats), b_(llvm::BasicBlock::Create(fn->getContext(), "entry", fn)),
        vecTy_(llvm::FixedVectorType::get(b_.getFloatTy(), shape.vectorFloats)),
        math_(b_, *fn->getParent(), shape.fma) {
    auto arg = fn->arg_begin();
    x_ = arg++; scale_ = arg++; shift_ = arg++; out_ = arg++; begin_ = arg++; end_ = arg++;
    sumSlot_ = b_.CreateAlloca(vecTy_, nullptr, "lrn.sum"); // in the entry block: promoted to a register
  }

  void emit() {
    const int64_t P = s_.plane, full = P / W_ * W_;
    LoopBuilder(b_).forRange(begin_, end_, 1, "img", [&](Value* img) {
      Value* base = b_.CreateMul(img, i64(s_.c * P), "imgbase");
      auto vectors = [&](const std::function<void(Value*, int64_t)>& body) {
        if (full > 0)
          LoopBuilder(b_).forRange(i64(0), i64(full), W_, "p", [&](Value* p) { body(p, W_); }, /*unroll=*/1);
        if (P > full) body(i64(full), P - full);
      };
      if (s_.kind == ChannelSpec::ScaleShift) {
        LoopBuilder(b_).forRange(i64(0), i64(s_.c), 1, "ch", [&](Value* ch) {
          Value* sc = b_.CreateVectorSplat(W_, load(b_.getFloatTy(), gep(scale_, ch)));
          Value* sh = b_.CreateVectorSplat(W_, load(b_.getFloatTy(), gep(shift_, ch)));
          Value* planeOff = b_.CreateAdd(base, b_.CreateMul(ch, i64(P)));
          vectors([&](Value* p, int64_t lanes) {
            Value* at = b_.CreateAdd(planeOff, p);
            Value* v = loadFirstLanes(b_, vecTy_, gep(x_, at), lanes);
            storeFirstLanes(b_, math_.mulAdd(v, sc, sh), gep(out_, at), lanes);
          });
        }, /*unroll=*/1);
      } else {
        vectors([&](Value* p, int64_t lanes) { emitLrn(b_.CreateAdd(base, p), lanes); });
      }
    }, /*unroll=*/1);
    b_.CreateRetVoid();
  }

private:
  Value* i64(int64_t v) { return b_.getInt64(v); }
  Value* gep(Value* base, Value* index) { return b_.CreateGEP(b_.getFloatTy(), base, index); }
  Value* load(llvm::Type* ty, Value* ptr) { return b_.CreateAlignedLoad(ty, ptr, llvm::Align(4)); }
  Value* splat(double v) { return llvm::ConstantFP::get(vecTy_, float(v)); }

  // The lanes at element offset `at` (channel 0 of the image, plane position p) for every channel.
  void emitLrn(Value* at, int64_t lanes) {
    const int64_t P = s_.plane, before = s_.size / 2;
    llvm::Function* pow = llvm::Intrinsic::getDeclaration(b_.GetInsertBlock()->getModule(), llvm::Intrinsic::pow, {vecTy_});
    LoopBuilder loops(b_);
    loops.forRange(i64(0), i64(s_.c), 1, "ch", [&](Value* ch) {
      // The window [ch − before, ch − before + size) within [0, c), for any size < 2^63:
      // first ≥ −2^62, and the window's end is taken as ch + c once it is past c.
      Value* first = b_.CreateSub(ch, i64(before));
      Value* lo = b_.CreateSelect(b_.CreateICmpSLT(first, i64(0)), i64(0), first, "win.lo");
      Value* hi = loops.minimum(b_.CreateAdd(first, i64(std::min(s_.size, s_.c + before))), i64(s_.c), "win.hi");
      b_.CreateStore(splat(0.0), sumSlot_);
      loops.forRange(lo, hi, 1, "win", [&](Value* cc) {
        Value* v = loadFirstLanes(b_, vecTy_, gep(x_, b_.CreateAdd(at, b_.CreateMul(cc, i64(P)))), lanes);
        b_.CreateStore(b_.CreateFAdd(b_.CreateLoad(vecTy_, sumSlot_), b_.CreateFMul(v, v)), sumSlot_);
      });
      Value* sum = b_.CreateLoad(vecTy_, sumSlot_);
      Value* d = b_.CreateFAdd(b_.CreateFMul(b_.CreateFDiv(sum, splat(double(s_.size))), splat(s_.alpha)), splat(s_.k));
      Value* here = b_.CreateAdd(at, b_.CreateMul(ch, i64(P)));
      Value* x = loadFirstLanes(b_, vecTy_, gep(x_, here), lanes);
      Value* y = b_.CreateFDiv(x, b_.CreateCall(pow, {d, splat(s_.beta)}));
      storeFirstLanes(b_, y, gep(out_, here), lanes);
    }, /*unroll=*/1);
  }

  const ChannelSpec& s_;
  int W_;
  llvm::AllocaInst* sumSlot_ = nullptr;
  llvm::IRBuilder<> b_;
  llvm::FixedVectorType* vecTy_;
  VectorMath math_;
  Value *x_, *scale_, *shift_, *out_, *begin_, *end_;
};

} // namespace

std::unique_ptr<llvm::Module> emitChannelModule(llvm::LLVMContext& ctx, const ChannelSpec& spec,
                                                const MicroKernelShape& shape) {
  validateChannelSpec(spec);
  auto module = std::make_unique<llvm::Module>(channelFunctionName(spec), ctx);
  llvm::Function* fn = createKernelFunction(*module, channelFunctionName(spec),
                                            {"x", "scale", "shift", "out"}, {"imageBegin", "imageEnd"});
  ChannelBuilder(fn, spec, shape).emit();
  return module;
}

} // namespace nnc::codegen
