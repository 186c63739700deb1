// Depthwise convolution over NCHW planes, vectorised along the output row (W = the CPU
// row's vector width); over NHWC maps (spec.pixels), vectorised along the channels
// (emitPixels below).
//
// Per output plane (a runtime loop): the plane's kh·kw weights are loaded once (widened
// from their storage dtype, StoredTable.h) and broadcast, the bias too. Per output row (a runtime loop): each window row's input row
// is clamped into the plane and a flag says whether it was inside (outside rows are
// padding: their taps are selected to 0). The output columns whose window lies inside
// the row ("interior", computed at compile time) go W at a time — a runtime loop of
// full vectors, then one partial vector of the remaining lanes (masked loads and
// stores of just those lanes) — and the border columns one by one in scalar code with
// the column clamped and the padding taps selected to 0. A tap vector is one unaligned
// load when sw = 1, else the pieces spanning its strided lanes deinterleaved by a
// shuffle (stridedTap). Each output is
// bias + Σ taps · weights in window order (row-major), by FMA where the CPU has it, then
// the activation (VectorMath, as the GEMM epilogue), then the residual add.
// Selecting the tap (not the weight) to 0 keeps an Inf or NaN of a clamped in-plane
// element out of padding outputs.
#include "compiler/codegen/DepthwiseEmitter.h"

#include <llvm/IR/IRBuilder.h>

#include <algorithm>
#include <functional>
#include <stdexcept>
#include <vector>

#include "compiler/codegen/KernelFunction.h"
#include "compiler/codegen/LoopBuilder.h"
#include "compiler/codegen/PartialVector.h"
#include "compiler/codegen/StoredTable.h"
#include "compiler/codegen/VectorMath.h"

namespace nnc::codegen {

using llvm::Value;

std::string depthwiseFunctionName(const DepthwiseSpec& spec) { return "nnc_" + spec.key(); }

void validateDepthwiseSpec(const DepthwiseSpec& s) {
  auto fail = [&](const std::string& why) { throw std::invalid_argument("depthwise " + s.key() + ": " + why); };
  if (s.batch < 0) fail("need batch >= 0");
  if (s.c < 1 || s.multiplier < 1 || s.h < 1 || s.w < 1 || s.kh < 1 || s.kw < 1 || s.sh < 1 || s.sw < 1)
    fail("sizes, kernel and stride must be positive");
  if (s.ph < 0 || s.pw < 0) fail("padding must be >= 0");
  if (s.outH() < 1 || s.outW() < 1) fail("empty output");
  if (s.weightType == DType::I32) fail("weights cannot be stored as i32");
  if (s.weightType == DType::I4 && s.group < 1) fail("i4 weights need a scale group of >= 1");
  if (s.pixels && (s.multiplier != 1 || s.weightType != DType::F32)) fail("NHWC maps need multiplier 1 and f32 weights");
}

namespace {

class DepthwiseBuilder {
public:
  DepthwiseBuilder(llvm::Function* fn, const DepthwiseSpec& spec, const MicroKernelShape& shape)
      : s_(spec), W_(shape.vectorFloats), ho_(spec.outH()), wo_(spec.outW()),
        b_(llvm::BasicBlock::Create(fn->getContext(), "entry", fn)),
        vecTy_(llvm::FixedVectorType::get(b_.getFloatTy(), shape.vectorFloats)),
        math_(b_, *fn->getParent(), shape.fma) {
    auto arg = fn->arg_begin();
    x_ = arg++; w_ = arg++; bias_ = arg++; res_ = arg++; out_ = arg++; begin_ = arg++; end_ = arg++;
    j0_ = std::min((s_.pw + s_.sw - 1) / s_.sw, wo_);
    j1_ = std::clamp(s_.w + s_.pw - s_.kw >= 0 ? (s_.w + s_.pw - s_.kw) / s_.sw + 1 : 0, j0_, wo_);
  }

  void emit() {
    if (s_.pixels) return emitPixels();
    const int64_t outs = s_.c * s_.multiplier, taps = s_.kh * s_.kw;
    LoopBuilder(b_).forRange(begin_, end_, 1, "plane", [&](Value* p) {
      Value* o = b_.CreateURem(p, i64(outs), "o");
      inPlane_ = gep(x_, b_.CreateMul(b_.CreateUDiv(p, i64(s_.multiplier)), i64(s_.h * s_.w)));
      outPlane_ = b_.CreateMul(p, i64(ho_ * wo_), "outplane");
      weights_.clear();
      if (s_.weightType == DType::F32) {
        for (int64_t t = 0; t < taps; ++t)
          weights_.push_back(load(gep(w_, b_.CreateAdd(b_.CreateMul(o, i64(taps)), i64(t)))));
      } else { // row o of the stored table, W taps at a time
        const PanelLayout table = rowTableLayout(outs, taps, s_.weightType, s_.group);
        for (int64_t t0 = 0; t0 < taps; t0 += W_) {
          Value* v = loadStoredRow(b_, table, w_, o, i64(t0), std::min<int64_t>(W_, taps - t0), W_);
          for (int64_t t = t0; t < std::min<int64_t>(taps, t0 + W_); ++t) weights_.push_back(b_.CreateExtractElement(v, t - t0));
        }
      }
      bias_v_ = s_.bias ? load(gep(bias_, o)) : llvm::ConstantFP::get(b_.getFloatTy(), 0.0);
      LoopBuilder(b_).forRange(i64(0), i64(ho_), 1, "orow", [&](Value* i) { emitRow(i); }, /*unroll=*/1);
    }, /*unroll=*/1);
    b_.CreateRetVoid();
  }

private:
  // NHWC: per unit (image, output row i), per vector of channels (the tail's lanes
  // masked): the taps' weight vectors (rows of the transposed W) and the bias loaded
  // once, then per output column bias + Σ taps · weights in the same row-major order as
  // the planes' code (so the same bits), a tap outside the map loaded from a clamped
  // address and selected to 0; the interior columns skip the column checks.
  void emitPixels() {
    const int64_t C = s_.c, taps = s_.kh * s_.kw, fullC = C / W_ * W_;
    Value* zero = llvm::Constant::getNullValue(vecTy_);
    LoopBuilder(b_).forRange(begin_, end_, 1, "unit", [&](Value* u) {
      Value* img = b_.CreateUDiv(u, i64(ho_), "img");
      Value* i = b_.CreateURem(u, i64(ho_), "orow");
      Value* xImg = gep(x_, b_.CreateMul(img, i64(s_.h * s_.w * C)));
      Value* outRow = b_.CreateMul(u, i64(wo_ * C), "outrow");
      Value* top = b_.CreateSub(b_.CreateMul(i, i64(s_.sh)), i64(s_.ph));
      rows_.clear();
      for (int64_t r = 0; r < s_.kh; ++r) {
        auto [row, inside] = clampInto(b_.CreateAdd(top, i64(r)), s_.h);
        rows_.push_back({b_.CreateMul(row, i64(s_.w)), inside});
      }
      auto channels = [&](Value* c0, int64_t lanes) {
        std::vector<Value*> wv;
        for (int64_t t = 0; t < taps; ++t) wv.push_back(loadFirstLanes(b_, vecTy_, gep(w_, b_.CreateAdd(i64(t * C), c0)), lanes));
        Value* bias = s_.bias ? loadFirstLanes(b_, vecTy_, gep(bias_, c0), lanes) : zero;
        auto columns = [&](int64_t from, int64_t to, bool interior) {
          if (from >= to) return;
          LoopBuilder(b_).forRange(i64(from), i64(to), 1, interior ? "col" : "bcol", [&](Value* j) {
            Value* left = b_.CreateSub(b_.CreateMul(j, i64(s_.sw)), i64(s_.pw));
            std::vector<std::pair<Value*, Value*>> cols;
            for (int64_t c = 0; c < s_.kw; ++c)
              cols.push_back(interior ? std::pair<Value*, Value*>{b_.CreateAdd(left, i64(c)), b_.getTrue()}
                                      : clampInto(b_.CreateAdd(left, i64(c)), s_.w));
            Value* acc = bias;
            if (interior) prefetchAhead(xImg, left, c0);
            for (int64_t r = 0; r < s_.kh; ++r)
              for (int64_t c = 0; c < s_.kw; ++c) {
                Value* pixel = b_.CreateAdd(rows_[size_t(r)].first, cols[size_t(c)].first);
                Value* tap = loadFirstLanes(b_, vecTy_, gep(xImg, b_.CreateAdd(b_.CreateMul(pixel, i64(C)), c0)), lanes);
                Value* inside = interior ? rows_[size_t(r)].second : b_.CreateAnd(rows_[size_t(r)].second, cols[size_t(c)].second);
                tap = b_.CreateSelect(inside, tap, zero);
                acc = math_.mulAdd(tap, wv[size_t(r * s_.kw + c)], acc);
              }
            finish(acc, b_.CreateAdd(outRow, b_.CreateAdd(b_.CreateMul(j, i64(C)), c0)), lanes);
          }, /*unroll=*/1);
        };
        columns(0, j0_, false);
        columns(j0_, j1_, true);
        columns(j1_, wo_, false);
      };
      if (fullC > 0)
        LoopBuilder(b_).forRange(i64(0), i64(fullC), W_, "cvec", [&](Value* c0) { channels(c0, W_); }, /*unroll=*/1);
      if (C > fullC) channels(i64(fullC), C - fullC);
    }, /*unroll=*/1);
    b_.CreateRetVoid();
  }

  // NHWC interior columns: the channel vector c0 of each window row kPrefetchPixels
  // further along the row, asked for ahead of its loads. Each channel vector sweeps the
  // output row on its own, reading one line per pixel, which the hardware prefetcher
  // alone streamed from DRAM slowly: MobileNet V2's depthwise convs at batch 8 (maps of
  // up to 38 MB), 1 thread, 8.1-9.0 -> 6.5-6.9 ms (16 pixels: 7.5-8.4; 32: 6.8-7.3; 96
  // like 64); batch 1 unchanged. A prefetch past the map does not fault.
  static constexpr int64_t kPrefetchPixels = 64;
  void prefetchAhead(Value* xImg, Value* left, Value* c0) {
    for (int64_t r = 0; r < s_.kh; ++r) {
      Value* pixel = b_.CreateAdd(rows_[size_t(r)].first, b_.CreateAdd(left, i64(kPrefetchPixels)));
      emitPrefetch(b_, gep(xImg, b_.CreateAdd(b_.CreateMul(pixel, i64(s_.c)), c0)));
    }
  }

  Value* i64(int64_t v) { return b_.getInt64(v); }
  Value* gep(Value* base, Value* index) { return b_.CreateGEP(b_.getFloatTy(), base, index); }
  Value* load(Value* ptr) { return b_.CreateAlignedLoad(b_.getFloatTy(), ptr, llvm::Align(4)); }
  std::pair<Value*, Value*> clampInto(Value* v, int64_t n) {
    Value* inside = b_.CreateAnd(b_.CreateICmpSGE(v, i64(0)), b_.CreateICmpSLT(v, i64(n)));
    Value* lo = b_.CreateSelect(b_.CreateICmpSLT(v, i64(0)), i64(0), v);
    return {b_.CreateSelect(b_.CreateICmpSGE(lo, i64(n)), i64(n - 1), lo), inside};
  }

  void emitRow(Value* i) {
    Value* top = b_.CreateSub(b_.CreateMul(i, i64(s_.sh)), i64(s_.ph));
    rows_.clear();
    for (int64_t r = 0; r < s_.kh; ++r) {
      auto [row, inside] = clampInto(b_.CreateAdd(top, i64(r)), s_.h);
      rows_.push_back({gep(inPlane_, b_.CreateMul(row, i64(s_.w))), inside});
    }
    Value* outRow = b_.CreateAdd(outPlane_, b_.CreateMul(i, i64(wo_)));
    const int64_t full = (j1_ - j0_) / W_;
    if (full > 0)
      LoopBuilder(b_).forRange(i64(j0_), i64(j0_ + full * W_), W_, "ocol",
                               [&](Value* j) { emitVector(outRow, j, W_); }, /*unroll=*/1);
    if (j0_ + full * W_ < j1_) emitVector(outRow, i64(j0_ + full * W_), j1_ - j0_ - full * W_);
    auto scalars = [&](int64_t from, int64_t to) {
      if (from < to)
        LoopBuilder(b_).forRange(i64(from), i64(to), 1, "bcol", [&](Value* j) { emitScalar(outRow, j); }, /*unroll=*/1);
    };
    scalars(0, j0_);
    scalars(j1_, wo_);
  }

  // Outputs j .. j + lanes − 1 of the row (interior columns: every tap is in the row).
  void emitVector(Value* outRow, Value* j, int64_t lanes) {
    Value* left = b_.CreateSub(b_.CreateMul(j, i64(s_.sw)), i64(s_.pw));
    Value* acc = b_.CreateVectorSplat(W_, bias_v_);
    Value* zero = llvm::Constant::getNullValue(vecTy_);
    for (int64_t r = 0; r < s_.kh; ++r)
      for (int64_t c = 0; c < s_.kw; ++c) {
        Value* at = gep(rows_[size_t(r)].first, b_.CreateAdd(left, i64(c)));
        Value* tap;
        if (s_.sw == 1) {
          tap = loadFirstLanes(b_, vecTy_, at, lanes);
        } else {
          tap = stridedTap(at, lanes);
        }
        tap = b_.CreateSelect(rows_[size_t(r)].second, tap, zero);
        acc = math_.mulAdd(tap, b_.CreateVectorSplat(W_, weights_[size_t(r * s_.kw + c)]), acc);
      }
    finish(acc, b_.CreateAdd(outRow, j), lanes);
  }

  // Lanes l < lanes of x[at + l·sw]: the span (lanes − 1)·sw + 1 floats from `at` (all
  // taps of interior columns, so inside the row) in W-float pieces, the last one a masked
  // load of just the span's lanes, concatenated and deinterleaved with one shuffle.
  // (Lane-by-lane loads made stride-2 layers ~4× slower per output than stride 1.)
  Value* stridedTap(Value* at, int64_t lanes) {
    const int64_t span = (lanes - 1) * s_.sw + 1;
    std::vector<Value*> piece;
    for (int64_t k = 0; k * W_ < span; ++k)
      piece.push_back(loadFirstLanes(b_, vecTy_, gep(at, i64(k * W_)), std::min<int64_t>(W_, span - k * W_)));
    return stridedLanes(b_, piece, s_.sw, lanes);
  }

  void emitScalar(Value* outRow, Value* j) {
    Value* left = b_.CreateSub(b_.CreateMul(j, i64(s_.sw)), i64(s_.pw));
    Value* acc = bias_v_;
    Value* zero = llvm::ConstantFP::get(b_.getFloatTy(), 0.0);
    for (int64_t c = 0; c < s_.kw; ++c) {
      auto [col, colInside] = clampInto(b_.CreateAdd(left, i64(c)), s_.w);
      cols_.push_back({col, colInside});
    }
    for (int64_t r = 0; r < s_.kh; ++r)
      for (int64_t c = 0; c < s_.kw; ++c) {
        const auto& [col, colInside] = cols_[size_t(c)];
        Value* tap = load(gep(rows_[size_t(r)].first, col));
        tap = b_.CreateSelect(b_.CreateAnd(rows_[size_t(r)].second, colInside), tap, zero);
        acc = math_.mulAdd(tap, weights_[size_t(r * s_.kw + c)], acc);
      }
    cols_.clear();
    finish(acc, b_.CreateAdd(outRow, j), 1);
  }

  // act(acc) (+ residual), stored to the `lanes` outputs at element offset `at` of out.
  void finish(Value* acc, Value* at, int64_t lanes) {
    acc = math_.activation(s_.act, acc);
    const bool vector = acc->getType()->isVectorTy();
    if (s_.residual)
      acc = b_.CreateFAdd(acc, vector ? loadFirstLanes(b_, vecTy_, gep(res_, at), lanes) : load(gep(res_, at)));
    if (vector) storeFirstLanes(b_, acc, gep(out_, at), lanes);
    else b_.CreateAlignedStore(acc, gep(out_, at), llvm::Align(4));
  }

  const DepthwiseSpec& s_;
  int W_;
  int64_t ho_, wo_, j0_ = 0, j1_ = 0;
  llvm::IRBuilder<> b_;
  llvm::FixedVectorType* vecTy_;
  VectorMath math_;
  Value *x_, *w_, *bias_, *res_, *out_, *begin_, *end_;
  Value *inPlane_ = nullptr, *outPlane_ = nullptr, *bias_v_ = nullptr;
  std::vector<Value*> weights_;
  std::vector<std::pair<Value*, Value*>> rows_, cols_;
};

} // namespace

std::unique_ptr<llvm::Module> emitDepthwiseModule(llvm::LLVMContext& ctx, const DepthwiseSpec& spec,
                                                  const MicroKernelShape& shape) {
  validateDepthwiseSpec(spec);
  auto module = std::make_unique<llvm::Module>(depthwiseFunctionName(spec), ctx);
  llvm::Function* fn = createKernelFunction(*module, depthwiseFunctionName(spec),
                                            {"x", "W", "bias", "residual", "out"}, {"planeBegin", "planeEnd"});
  DepthwiseBuilder(fn, spec, shape).emit();
  return module;
}

} // namespace nnc::codegen
