// 2-D max / average pooling, specialised on every size of the spec.
//
// Shape of the code, per plane (a runtime range):
//   output rows whose window lies inside the plane ("full" rows: i·sh − ph >= 0 and
//   i·sh − ph + kh <= h) are one runtime loop; the few rows above and below it
//   (at most ceil(ph / sh) on each side, pad <= kernel / 2) are emitted one by one
//   with their window rows clipped to the plane at compile time;
//   within a row, the output columns whose window lies inside the row ("full"
//   columns) are computed W at a time (W = the CPU row's vector width), kGroupVectors
//   vectors together (each its own chain of max or add, so that they do not wait on
//   each other's latency), the border columns one by one in scalar code with the
//   window columns clipped at compile time. NHWC maps (emitPixels) likewise group
//   PoolSpec::pixelGroup full pixels of a full row.
// A vector of W outputs j..j+W−1 takes, for each window tap (r, c), the W inputs at
// columns (j + l)·sw − pw + c: one unaligned load when sw = 1; for sw > 1 the
// ceil(((W−1)·sw + 1) / W) vectors that span them, deinterleaved with one shuffle
// (sw = 2: two loads and shufps). Whole groups of full vectors whose loads stay inside
// the input row are a runtime loop; the rest of a row's vectors are emitted one group
// after another, those that are partial or have a load that would run past the row
// with masked loads of only the in-row lanes, so
// no load ever touches memory outside the plane's row, and partial stores touch only
// their lanes (PartialVector.h). Window rows are unrolled (a loop when a window has
// more than 64 taps); window columns are always unrolled.
//
// Arithmetic follows PyTorch's CPU kernels (aten/src/ATen/native/cpu/MaxPoolKernel.cpp,
// AvgPoolKernel.cpp) tap by tap, row-major over the window:
//   max: m = first tap, then m = (v > m || isnan(v)) ? v : m  (NaN propagates);
//   avg: s = 0, s += v for every in-bounds tap, out = s / (kh·kw)  (count_include_pad).
// So each output is the same f32 value PyTorch computes. A global pool's mean
// (PoolSpec::doubleSum: PyTorch's AdaptiveAvgPool2d(1) is a mean, summed in cascades)
// adds in f64 instead and rounds once: within half an ulp of the exact mean (but for
// near-ties). NCHW planes whose window is whole rows (poolsWholeRows) are reduced as
// one contiguous run, kWholeRowVectors vectors at a time.
#include "compiler/codegen/PoolEmitter.h"

#include <llvm/IR/IRBuilder.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <stdexcept>
#include <tuple>
#include <utility>
#include <vector>

#include "compiler/codegen/KernelFunction.h"
#include "compiler/codegen/LoopBuilder.h"
#include "compiler/codegen/PartialVector.h"

namespace nnc::codegen {

using llvm::Value;

std::string poolFunctionName(const PoolSpec& spec) { return "nnc_" + spec.key(); }

void validatePoolSpec(const PoolSpec& s) {
  auto fail = [&](const std::string& why) {
    throw std::invalid_argument("pool: " + why + " (planes " + std::to_string(s.planes) + ", h " +
                                std::to_string(s.h) + ", w " + std::to_string(s.w) + ", kernel " +
                                std::to_string(s.kh) + "x" + std::to_string(s.kw) + ", stride " +
                                std::to_string(s.sh) + "x" + std::to_string(s.sw) + ", pad " +
                                std::to_string(s.ph) + "x" + std::to_string(s.pw) + ")");
  };
  if (s.planes < 0) fail("need planes >= 0");
  if (s.channels < 0) fail("need channels >= 0");
  if (s.h < 1 || s.w < 1 || s.kh < 1 || s.kw < 1 || s.sh < 1 || s.sw < 1)
    fail("sizes, kernel and stride must be positive");
  if (s.ph < 0 || s.pw < 0) fail("padding must be >= 0");
  if (s.ph > s.kh / 2 || s.pw > s.kw / 2) fail("padding must be at most half the kernel");
  if (s.doubleSum && s.kind != PoolSpec::Avg) fail("only an average's sum is taken in f64");
  if (s.pixelGroup < 1 || s.pixelGroup > 8) fail("pixelGroup must be 1 to 8");
  if (s.outH() < 1 || s.outW() < 1) fail("empty output (the window is larger than the padded input)");
}

namespace {

constexpr int64_t kMaxUnrolledTaps = 64;
constexpr int64_t kGroupVectors = 4; // full vectors of a row computed together
constexpr int64_t kWholeRowVectors = 4; // planes reduced whole: vectors of the run folded together
// NHWC maps reduced whole: channel vectors of a pixel folded in one pass over the image
// (1 KB of each pixel read together at W = 16; with 4 at a time, 256 B of every 1 KB
// pixel per pass, 256 × 56 × 56 at batch 8 took 1.57 ms instead of 0.64, 1 thread, Zen 4).
constexpr int64_t kWholeRowChannelVectors = 16;

// Full rows / columns (window inside the plane), as index ranges [lo, hi) of the output.
std::pair<int64_t, int64_t> fullRange(int64_t in, int64_t k, int64_t st, int64_t pad, int64_t outN) {
  int64_t lo = std::min((pad + st - 1) / st, outN);
  int64_t hi = in + pad - k >= 0 ? (in + pad - k) / st + 1 : 0;
  return {lo, std::clamp(hi, lo, outN)};
}

class PoolBuilder {
public:
  PoolBuilder(llvm::Function* fn, const PoolSpec& spec, const MicroKernelShape& shape)
      : s_(spec), W_(shape.vectorFloats), outH_(spec.outH()), outW_(spec.outW()),
        b_(llvm::BasicBlock::Create(fn->getContext(), "entry", fn)),
        vecTy_(llvm::FixedVectorType::get(b_.getFloatTy(), shape.vectorFloats)) {
    auto arg = fn->arg_begin();
    x_ = arg++; out_ = arg++; planeBegin_ = arg++; planeEnd_ = arg++;
    std::tie(iFull0_, iFull1_) = fullRange(s_.h, s_.kh, s_.sh, s_.ph, outH_);
    std::tie(jFull0_, jFull1_) = fullRange(s_.w, s_.kw, s_.sw, s_.pw, outW_);
  }

  void emit() {
    if (poolsWholeRows(s_)) return s_.channels > 0 ? emitWholeRowsOfPixels() : emitWholeRows();
    if (s_.channels > 0) return emitPixels();
    LoopBuilder(b_).forRange(planeBegin_, planeEnd_, 1, "plane", [&](Value* p) {
      inPlane_ = b_.CreateGEP(b_.getFloatTy(), x_, b_.CreateMul(p, b_.getInt64(s_.h * s_.w)), "inplane");
      outPlane_ = b_.CreateGEP(b_.getFloatTy(), out_, b_.CreateMul(p, b_.getInt64(outH_ * outW_)), "outplane");
      for (int64_t i = 0; i < iFull0_; ++i) emitRow(b_.getInt64(i), i);
      if (iFull1_ > iFull0_)
        LoopBuilder(b_).forRange(b_.getInt64(iFull0_), b_.getInt64(iFull1_), 1, "orow",
                                 [&](Value* i) { emitRow(i, -1); }, /*unroll=*/1);
      for (int64_t i = iFull1_; i < outH_; ++i) emitRow(b_.getInt64(i), i);
    }, /*unroll=*/1);
    b_.CreateRetVoid();
  }

private:
  // NHWC, per unit (image, output row i), per output column j, per vector of channels
  // (the tail's lanes masked): the window's taps in the same row-major order and with
  // the same arithmetic as the planes' code. Where a window may leave the map (border
  // rows, border columns) each tap's load is clamped into the map and its value not
  // used when outside; the full columns of a full row (window inside the map: all but a
  // ring of pixels) load their taps directly, with no index arithmetic per tap
  // (ResNet-18's 3×3 stride-2 maxpool at batch 8, 1 thread: 2.4 ms with every tap
  // clamped). Taps unrolled up to kMaxUnrolledTaps, else loops; the accumulators live
  // in stack slots that SROA turns into registers.
  void emitPixels() {
    const int64_t C = s_.channels, fullC = C / W_ * W_;
    llvm::Type* ty = b_.getFloatTy();
    llvm::Type* accTy = sumType(vecTy_);
    std::vector<llvm::AllocaInst*> slots; // a pixel's accumulator each
    for (int64_t g = 0; g < s_.pixelGroup; ++g) slots.push_back(b_.CreateAlloca(accTy, nullptr, "acc"));
    LoopBuilder(b_).forRange(planeBegin_, planeEnd_, 1, "unit", [&](Value* u) {
      Value* img = b_.CreateUDiv(u, b_.getInt64(outH_), "img");
      Value* i = b_.CreateURem(u, b_.getInt64(outH_), "orow");
      Value* xImg = b_.CreateGEP(ty, x_, b_.CreateMul(img, b_.getInt64(s_.h * s_.w * C)));
      Value* outRow = b_.CreateGEP(ty, out_, b_.CreateMul(u, b_.getInt64(outW_ * C)));
      Value* top = b_.CreateSub(b_.CreateMul(i, b_.getInt64(s_.sh)), b_.getInt64(s_.ph), "top");
      // Output columns j .. j + n − 1; `checked`: their windows may leave the map. Per
      // channel vector, each pixel its own fold of the window: full pixels of a full row
      // go pixelGroup at a time (one fold at a time waited on the max's latency: SPPF's
      // 5×5 stride-1 maxpools over 512 × 20 × 20, 1 thread, took 384 µs each, now 245).
      auto pixels = [&](Value* j, int64_t n, bool checked) {
        std::vector<Value*> left;
        for (int64_t g = 0; g < n; ++g)
          left.push_back(b_.CreateSub(b_.CreateMul(b_.CreateAdd(j, b_.getInt64(g)), b_.getInt64(s_.sw)), b_.getInt64(s_.pw)));
        auto channels = [&](Value* c0, int64_t lanes) {
          for (int64_t g = 0; g < n; ++g) b_.CreateStore(foldStart(), slots[size_t(g)]);
          auto tap = [&](Value* r, Value* c) {
            for (int64_t g = 0; g < n; ++g) {
              Value* ih = b_.CreateAdd(top, r), *iw = b_.CreateAdd(left[size_t(g)], c);
              Value* inside = nullptr;
              if (checked) {
                auto [ihc, inRow] = clamped(ih, s_.h);
                auto [iwc, inCol] = clamped(iw, s_.w);
                ih = ihc, iw = iwc, inside = b_.CreateAnd(inRow, inCol);
              }
              Value* at = b_.CreateAdd(b_.CreateMul(b_.CreateAdd(b_.CreateMul(ih, b_.getInt64(s_.w)), iw), b_.getInt64(C)), c0);
              Value* v = loadFirstLanes(b_, vecTy_, b_.CreateGEP(ty, xImg, at), lanes);
              Value* acc = b_.CreateLoad(accTy, slots[size_t(g)]);
              Value* next = combine(acc, v);
              b_.CreateStore(inside ? b_.CreateSelect(inside, next, acc) : next, slots[size_t(g)]);
            }
          };
          if (!checked)
            for (int64_t g = 0; g < n; ++g) prefetchAhead(xImg, top, left[size_t(g)], c0);
          if (s_.kh * s_.kw <= kMaxUnrolledTaps) {
            for (int64_t r = 0; r < s_.kh; ++r)
              for (int64_t c = 0; c < s_.kw; ++c) tap(b_.getInt64(r), b_.getInt64(c));
          } else {
            LoopBuilder(b_).forRange(b_.getInt64(0), b_.getInt64(s_.kh), 1, "wr", [&](Value* r) {
              LoopBuilder(b_).forRange(b_.getInt64(0), b_.getInt64(s_.kw), 1, "wc", [&](Value* c) { tap(r, c); });
            }, /*unroll=*/1);
          }
          for (int64_t g = 0; g < n; ++g) {
            Value* acc = finish(b_.CreateLoad(accTy, slots[size_t(g)]));
            Value* dst = b_.CreateGEP(ty, outRow, b_.CreateAdd(b_.CreateMul(b_.CreateAdd(j, b_.getInt64(g)), b_.getInt64(C)), c0));
            storeFirstLanes(b_, acc, dst, lanes);
          }
        };
        if (fullC > 0)
          LoopBuilder(b_).forRange(b_.getInt64(0), b_.getInt64(fullC), W_, "cvec",
                                   [&](Value* c0) { channels(c0, W_); }, /*unroll=*/1);
        if (C > fullC) channels(b_.getInt64(fullC), C - fullC);
      };
      auto columns = [&](int64_t j0, int64_t j1, bool checked) {
        if (j1 <= j0) return;
        const int64_t grouped = checked ? 0 : (j1 - j0) / s_.pixelGroup * s_.pixelGroup;
        if (grouped > 0)
          LoopBuilder(b_).forRange(b_.getInt64(j0), b_.getInt64(j0 + grouped), s_.pixelGroup, "ocols",
                                   [&](Value* j) { pixels(j, s_.pixelGroup, false); }, /*unroll=*/1);
        if (j1 > j0 + grouped)
          LoopBuilder(b_).forRange(b_.getInt64(j0 + grouped), b_.getInt64(j1), 1, "ocol",
                                   [&](Value* j) { pixels(j, 1, checked); }, /*unroll=*/1);
      };
      columns(0, jFull0_, true);
      Value* fullRow = b_.CreateAnd(b_.CreateICmpSGE(i, b_.getInt64(iFull0_)), b_.CreateICmpSLT(i, b_.getInt64(iFull1_)));
      LoopBuilder(b_).ifElse(fullRow, [&] { columns(jFull0_, jFull1_, false); },
                             [&] { columns(jFull0_, jFull1_, true); });
      columns(jFull1_, outW_, true);
    }, /*unroll=*/1);
    b_.CreateRetVoid();
  }
  // NHWC full columns: the channel vector c0 of each window row, kPoolPrefetchBytes
  // further along the row (whole pixels), asked for ahead of its loads. The hardware
  // prefetcher alone left a map streamed from L3 / DRAM well below the read probe:
  // ResNet-18's maxpool (64×112×112, 3×3 stride 2) at batch 8, 1 thread, 1.96-2.02 ms
  // -> 1.21-1.29 (4 KiB ahead; 1 KiB 1.87, 8 KiB 1.36-1.43, 12 KiB 1.44-1.63). A
  // prefetch past the map does not fault.
  static constexpr int64_t kPoolPrefetchBytes = 4096;
  void prefetchAhead(Value* xImg, Value* top, Value* left, Value* c0) {
    const int64_t C = s_.channels, aheadPixels = std::max<int64_t>(1, kPoolPrefetchBytes / (4 * C));
    for (int64_t r = 0; r < s_.kh; ++r) {
      Value* pixel = b_.CreateAdd(b_.CreateMul(b_.CreateAdd(top, b_.getInt64(r)), b_.getInt64(s_.w)),
                                  b_.CreateAdd(left, b_.getInt64(aheadPixels)));
      Value* at = b_.CreateAdd(b_.CreateMul(pixel, b_.getInt64(C)), c0);
      emitPrefetch(b_, b_.CreateGEP(b_.getFloatTy(), xImg, at));
    }
  }

  // v clamped into [0, n − 1], and whether it was inside.
  std::pair<Value*, Value*> clamped(Value* v, int64_t n) {
    Value* inside = b_.CreateAnd(b_.CreateICmpSGE(v, b_.getInt64(0)), b_.CreateICmpSLT(v, b_.getInt64(n)));
    Value* lo = b_.CreateSelect(b_.CreateICmpSLT(v, b_.getInt64(0)), b_.getInt64(0), v);
    return {b_.CreateSelect(b_.CreateICmpSGE(lo, b_.getInt64(n)), b_.getInt64(n - 1), lo), inside};
  }

  // Output row i (iConst = its value for a border row, -1 for the full-row loop).
  void emitRow(Value* i, int64_t iConst) {
    Value* top = b_.CreateSub(b_.CreateMul(i, b_.getInt64(s_.sh)), b_.getInt64(s_.ph), "top");
    int64_t rLo = 0, rHi = s_.kh;
    if (iConst >= 0) {
      int64_t t = iConst * s_.sh - s_.ph;
      rLo = std::max<int64_t>(0, -t);
      rHi = std::min<int64_t>(s_.kh, s_.h - t);
    }
    Value* outRow = b_.CreateGEP(b_.getFloatTy(), outPlane_, b_.CreateMul(i, b_.getInt64(outW_)), "outrow");
    // Pointer to input row top + r (r in [rLo, rHi): always inside the plane).
    auto rowPtr = [&](Value* r) {
      return b_.CreateGEP(b_.getFloatTy(), inPlane_, b_.CreateMul(b_.CreateAdd(top, r), b_.getInt64(s_.w)));
    };

    // Full columns: runtime loop over the vectors whose every load stays in the row.
    const int64_t full = jFull1_ - jFull0_;
    const int64_t vectors = (full + W_ - 1) / W_;
    int64_t loopVectors = 0;
    while (loopVectors < vectors && full - loopVectors * W_ >= W_ &&
           lastLoadEnd(jFull0_ + loopVectors * W_, W_) <= s_.w)
      ++loopVectors;
    // kGroupVectors at a time, each its own chain of max / add (one chain per vector
    // waited on the latency: 7×7 max over 64 × 56 × 56, 1 thread, ran 5.6 G taps/s),
    // then one at a time.
    const int64_t grouped = loopVectors / kGroupVectors * kGroupVectors;
    if (grouped > 0)
      LoopBuilder(b_).forRange(b_.getInt64(jFull0_), b_.getInt64(jFull0_ + grouped * W_), kGroupVectors * W_, "ocols",
                               [&](Value* j) {
                                 std::vector<Columns> cols;
                                 for (int64_t u = 0; u < kGroupVectors; ++u)
                                   cols.push_back({b_.CreateAdd(j, b_.getInt64(u * W_)), -1, W_});
                                 emitVectors(rowPtr, rLo, rHi, outRow, cols);
                               },
                               /*unroll=*/1);
    for (int64_t v = grouped; v < vectors; v += kGroupVectors) { // the rest, their columns known here
      std::vector<Columns> cols;
      for (int64_t u = v; u < std::min(vectors, v + kGroupVectors); ++u) {
        const int64_t j = jFull0_ + u * W_;
        cols.push_back({b_.getInt64(j), j, std::min<int64_t>(W_, full - u * W_)});
      }
      emitVectors(rowPtr, rLo, rHi, outRow, cols);
    }
    // Border columns, scalar.
    for (int64_t j = 0; j < outW_; ++j)
      if (j < jFull0_ || j >= jFull1_) emitScalar(rowPtr, rLo, rHi, outRow, j);
  }

  // Pieces (W-float loads) a vector of `lanes` outputs reads per tap, and one past the
  // last column the loads of a `lanes`-wide vector at output column j would touch
  // without masking (over all taps).
  int64_t pieces(int64_t lanes) const { return ((lanes - 1) * s_.sw + 1 + W_ - 1) / W_; }
  int64_t lastLoadEnd(int64_t j, int64_t lanes) const {
    return j * s_.sw - s_.pw + (s_.kw - 1) + pieces(lanes) * W_;
  }

  // The W inputs of tap c for outputs j..j+lanes−1 in the row at `row` (lanes past
  // `lanes` are 0). jConst >= 0: j is that constant and the loads are clipped to the
  // row; jConst < 0: every load is known to stay in the row.
  Value* tapVector(Value* row, Value* j, int64_t jConst, int64_t lanes, int64_t c) {
    Value* col = b_.CreateAdd(b_.CreateMul(j, b_.getInt64(s_.sw)), b_.getInt64(c - s_.pw));
    std::vector<Value*> piece;
    for (int64_t k = 0; k < pieces(lanes); ++k) {
      int64_t inRow = W_;
      if (jConst >= 0) inRow = std::min<int64_t>(W_, s_.w - (jConst * s_.sw - s_.pw + c + k * W_));
      Value* at = b_.CreateGEP(b_.getFloatTy(), row, b_.CreateAdd(col, b_.getInt64(k * W_)));
      piece.push_back(loadFirstLanes(b_, vecTy_, at, inRow));
    }
    if (s_.sw == 1) return piece[0];
    // Every sw-th lane of the pieces end to end.
    return stridedLanes(b_, piece, s_.sw, lanes);
  }

  // The accumulator's type for values of type `ty`: ty, or its f64 twin (doubleSum).
  llvm::Type* sumType(llvm::Type* ty) {
    if (!s_.doubleSum) return ty;
    if (auto* v = llvm::dyn_cast<llvm::FixedVectorType>(ty)) return llvm::FixedVectorType::get(b_.getDoubleTy(), v->getNumElements());
    return b_.getDoubleTy();
  }
  // The fold's next value (acc null: v is the first tap): max as PyTorch's, NaN
  // propagating; avg adds v (widened to f64 for doubleSum).
  Value* combine(Value* acc, Value* v) {
    if (s_.kind == PoolSpec::Avg) return b_.CreateFAdd(acc, s_.doubleSum ? b_.CreateFPExt(v, sumType(v->getType())) : v);
    if (!acc) return v;
    Value* take = b_.CreateOr(b_.CreateFCmpOGT(v, acc), b_.CreateFCmpUNO(v, v));
    return b_.CreateSelect(take, v, acc);
  }
  // A fold's output: avg divided by kh·kw (in f64, then rounded, for doubleSum).
  Value* finish(Value* acc) {
    if (s_.kind != PoolSpec::Avg) return acc;
    Value* mean = b_.CreateFDiv(acc, llvm::ConstantFP::get(acc->getType(), double(s_.kh * s_.kw)));
    if (!s_.doubleSum) return mean;
    llvm::Type* f32 = b_.getFloatTy();
    if (auto* v = llvm::dyn_cast<llvm::FixedVectorType>(acc->getType())) f32 = llvm::FixedVectorType::get(f32, v->getNumElements());
    return b_.CreateFPTrunc(mean, f32);
  }

  // `n` vector accumulators (sumType) in the entry block, which SROA makes registers.
  std::vector<llvm::AllocaInst*> accumulatorSlots(int64_t n) {
    llvm::Function* fn = b_.GetInsertBlock()->getParent();
    llvm::IRBuilder<> entry(&fn->getEntryBlock(), fn->getEntryBlock().begin());
    std::vector<llvm::AllocaInst*> slots;
    for (int64_t g = 0; g < n; ++g) slots.push_back(entry.CreateAlloca(sumType(vecTy_), nullptr, "acc"));
    return slots;
  }
  // A vector fold's start: max from -inf (which the first tap replaces, or equals),
  // avg from +0.
  Value* foldStart() {
    return s_.kind == PoolSpec::Max ? llvm::ConstantFP::getInfinity(vecTy_, true) : llvm::Constant::getNullValue(sumType(vecTy_));
  }

  // A plane's window of whole rows is its first kh·w values, one contiguous run: folded
  // kWholeRowVectors vectors at a time (each its own chain) in a loop, then the rest
  // of its full vectors and a masked tail, the vectors' lanes folded last.
  void emitWholeRows() {
    const int64_t n = s_.kh * s_.w, block = kWholeRowVectors * W_;
    llvm::Type* accTy = sumType(vecTy_);
    const std::vector<llvm::AllocaInst*> slots = accumulatorSlots(kWholeRowVectors);
    Value* start = foldStart();
    const float fill = s_.kind == PoolSpec::Max ? -std::numeric_limits<float>::infinity() : 0.0f; // masked-off lanes change nothing
    LoopBuilder(b_).forRange(planeBegin_, planeEnd_, 1, "plane", [&](Value* p) {
      Value* in = b_.CreateGEP(b_.getFloatTy(), x_, b_.CreateMul(p, b_.getInt64(s_.h * s_.w)), "inplane");
      auto at = [&](Value* i) { return b_.CreateGEP(b_.getFloatTy(), in, i); };
      for (llvm::AllocaInst* slot : slots) b_.CreateStore(start, slot);
      auto fold = [&](int64_t g, Value* v) { b_.CreateStore(combine(b_.CreateLoad(accTy, slots[size_t(g)]), v), slots[size_t(g)]); };
      if (n / block > 0)
        LoopBuilder(b_).forRange(b_.getInt64(0), b_.getInt64(n / block * block), block, "run", [&](Value* i) {
          for (int64_t g = 0; g < kWholeRowVectors; ++g)
            fold(g, loadFirstLanes(b_, vecTy_, at(b_.CreateAdd(i, b_.getInt64(g * W_))), W_));
        }, /*unroll=*/1);
      int64_t g = 0;
      for (int64_t i = n / block * block; i < n; i += W_, ++g)
        fold(g, loadFirstLanes(b_, vecTy_, at(b_.getInt64(i)), std::min<int64_t>(W_, n - i), fill));
      Value* acc = b_.CreateLoad(accTy, slots[0]);
      for (int64_t k = 1; k < kWholeRowVectors; ++k) acc = combineAccumulators(acc, b_.CreateLoad(accTy, slots[size_t(k)]));
      for (int64_t half = W_ / 2; half >= 1; half /= 2) { // lanes [0, half) with [half, 2·half)
        std::vector<int> upper(static_cast<size_t>(W_));
        for (int64_t l = 0; l < W_; ++l) upper[size_t(l)] = int(l < half ? l + half : l);
        acc = combineAccumulators(acc, b_.CreateShuffleVector(acc, upper));
      }
      Value* out = finish(b_.CreateExtractElement(acc, uint64_t(0)));
      b_.CreateAlignedStore(out, b_.CreateGEP(b_.getFloatTy(), out_, p), llvm::Align(4));
    }, /*unroll=*/1);
    b_.CreateRetVoid();
  }
  // NHWC, a window of whole rows: per image, its first kh·w pixels. Channel vectors go
  // kWholeRowChannelVectors at a time, each its own fold over the pixels in order (so
  // every lane is its channel's window-order fold, as in emitPixels), the pixels a
  // loop: a block's vectors of each pixel are read together. One vector at a time
  // over all pixels (emitPixels) read the image once per vector: 7 × 7 × 512 maps at
  // batch 8 took 36 µs instead of 18, 56 × 56 × 256 1.78 ms instead of 0.64.
  void emitWholeRowsOfPixels() {
    const int64_t G = kWholeRowChannelVectors;
    const int64_t C = s_.channels, P = s_.kh * s_.w, fullC = C / W_ * W_, block = G * W_;
    llvm::Type* ty = b_.getFloatTy();
    llvm::Type* accTy = sumType(vecTy_);
    const std::vector<llvm::AllocaInst*> slots = accumulatorSlots(G);
    Value* start = foldStart();
    LoopBuilder(b_).forRange(planeBegin_, planeEnd_, 1, "img", [&](Value* u) {
      Value* xImg = b_.CreateGEP(ty, x_, b_.CreateMul(u, b_.getInt64(s_.h * s_.w * C)), "ximg");
      Value* outPixel = b_.CreateGEP(ty, out_, b_.CreateMul(u, b_.getInt64(C)), "opix");
      // Channel vectors c0, c0 + W, … (n of them; `lanes` in the last) folded over the pixels.
      auto vectors = [&](Value* c0, int64_t n, int64_t lanes) {
        for (int64_t g = 0; g < n; ++g) b_.CreateStore(start, slots[size_t(g)]);
        LoopBuilder(b_).forRange(b_.getInt64(0), b_.getInt64(P), 1, "pix", [&](Value* p) {
          Value* row = b_.CreateGEP(ty, xImg, b_.CreateAdd(b_.CreateMul(p, b_.getInt64(C)), c0));
          for (int64_t g = 0; g < n; ++g) {
            Value* v = loadFirstLanes(b_, vecTy_, b_.CreateGEP(ty, row, b_.getInt64(g * W_)), g + 1 < n ? W_ : lanes);
            b_.CreateStore(combine(b_.CreateLoad(accTy, slots[size_t(g)]), v), slots[size_t(g)]);
          }
        });
        for (int64_t g = 0; g < n; ++g)
          storeFirstLanes(b_, finish(b_.CreateLoad(accTy, slots[size_t(g)])),
                          b_.CreateGEP(ty, outPixel, b_.CreateAdd(c0, b_.getInt64(g * W_))), g + 1 < n ? W_ : lanes);
      };
      if (C / block > 0)
        LoopBuilder(b_).forRange(b_.getInt64(0), b_.getInt64(C / block * block), block, "cblock",
                                 [&](Value* c0) { vectors(c0, G, W_); }, /*unroll=*/1);
      const int64_t rest = C - C / block * block; // fewer than a block's channels: full vectors, then a partial one
      if (rest > 0) vectors(b_.getInt64(C / block * block), (rest + W_ - 1) / W_, C > fullC ? C - fullC : W_);
    }, /*unroll=*/1);
    b_.CreateRetVoid();
  }

  // Two folds' accumulators into one: sums add, maxima as combine (a NaN in either wins).
  Value* combineAccumulators(Value* a, Value* v) {
    return s_.kind == PoolSpec::Avg ? b_.CreateFAdd(a, v) : combine(a, v);
  }

  // Folds taps(rowPtr(r)) over the window rows r in [rLo, rHi) in order: max from the
  // first tap, avg from +0 then divided by kh·kw. Unrolled up to kMaxUnrolledTaps taps,
  // else the rows after the first are a loop.
  Value* reduceWindow(llvm::Type* ty, const std::function<Value*(Value*)>& rowPtr, int64_t rLo, int64_t rHi,
                      int64_t tapsPerRow, const std::function<std::vector<Value*>(Value*)>& taps) {
    return reduceWindows(ty, rowPtr, rLo, rHi, tapsPerRow, 1, [&](Value* row, int64_t) { return taps(row); })[0];
  }
  // The same for `n` windows at once (taps(row, g): window g's), each its own fold.
  std::vector<Value*> reduceWindows(llvm::Type* ty, const std::function<Value*(Value*)>& rowPtr, int64_t rLo,
                                    int64_t rHi, int64_t tapsPerRow, int64_t n,
                                    const std::function<std::vector<Value*>(Value*, int64_t)>& taps) {
    // sums[g]: window g's fold (max: null until the first tap)
    std::vector<Value*> sums(size_t(n), s_.kind == PoolSpec::Avg ? llvm::ConstantFP::get(sumType(ty), 0.0) : nullptr);
    auto doRow = [&](Value* r) {
      Value* row = rowPtr(r);
      for (int64_t g = 0; g < n; ++g)
        for (Value* v : taps(row, g)) sums[size_t(g)] = combine(sums[size_t(g)], v);
    };
    if ((rHi - rLo) * tapsPerRow <= kMaxUnrolledTaps) {
      for (int64_t r = rLo; r < rHi; ++r) doRow(b_.getInt64(r));
    } else {
      llvm::Function* fn = b_.GetInsertBlock()->getParent();
      llvm::IRBuilder<> entry(&fn->getEntryBlock(), fn->getEntryBlock().begin());
      std::vector<llvm::AllocaInst*> slots;
      for (size_t k = 0; k < sums.size(); ++k) slots.push_back(entry.CreateAlloca(sumType(ty)));
      auto store = [&] {
        for (size_t k = 0; k < sums.size(); ++k) b_.CreateStore(sums[k], slots[k]);
      };
      auto load = [&] {
        for (size_t k = 0; k < sums.size(); ++k) sums[k] = b_.CreateLoad(slots[k]->getAllocatedType(), slots[k]);
      };
      doRow(b_.getInt64(rLo));
      store();
      LoopBuilder(b_).forRange(b_.getInt64(rLo + 1), b_.getInt64(rHi), 1, "wrow", [&](Value* r) {
        load();
        doRow(r);
        store();
      }, /*unroll=*/1);
      load();
    }
    for (Value*& a : sums) a = finish(a);
    return sums;
  }

  // `lanes` outputs of a row from column j (jConst: j when known here, its loads clipped
  // to the row; −1: every load stays in the row).
  struct Columns {
    Value* j;
    int64_t jConst, lanes;
  };
  // Those of `cols`, each its own fold.
  void emitVectors(const std::function<Value*(Value*)>& rowPtr, int64_t rLo, int64_t rHi, Value* outRow,
                   const std::vector<Columns>& cols) {
    const int64_t n = int64_t(cols.size());
    const std::vector<Value*> v = reduceWindows(vecTy_, rowPtr, rLo, rHi, n * s_.kw, n, [&](Value* row, int64_t g) {
      const Columns& col = cols[size_t(g)];
      std::vector<Value*> taps;
      for (int64_t c = 0; c < s_.kw; ++c) taps.push_back(tapVector(row, col.j, col.jConst, col.lanes, c));
      return taps;
    });
    for (int64_t g = 0; g < n; ++g)
      storeFirstLanes(b_, v[size_t(g)], b_.CreateGEP(b_.getFloatTy(), outRow, cols[size_t(g)].j), cols[size_t(g)].lanes);
  }

  void emitScalar(const std::function<Value*(Value*)>& rowPtr, int64_t rLo, int64_t rHi, Value* outRow,
                  int64_t j) {
    const int64_t left = j * s_.sw - s_.pw;
    const int64_t cLo = std::max<int64_t>(0, -left), cHi = std::min<int64_t>(s_.kw, s_.w - left);
    Value* v = reduceWindow(b_.getFloatTy(), rowPtr, rLo, rHi, cHi - cLo, [&](Value* row) {
      std::vector<Value*> taps;
      for (int64_t c = cLo; c < cHi; ++c)
        taps.push_back(b_.CreateAlignedLoad(b_.getFloatTy(),
                                            b_.CreateGEP(b_.getFloatTy(), row, b_.getInt64(left + c)),
                                            llvm::Align(4)));
      return taps;
    });
    b_.CreateAlignedStore(v, b_.CreateGEP(b_.getFloatTy(), outRow, b_.getInt64(j)), llvm::Align(4));
  }

  const PoolSpec& s_;
  int W_;
  int64_t outH_, outW_;
  int64_t iFull0_ = 0, iFull1_ = 0, jFull0_ = 0, jFull1_ = 0;
  llvm::IRBuilder<> b_;
  llvm::FixedVectorType* vecTy_;
  Value *x_, *out_, *planeBegin_, *planeEnd_;
  Value *inPlane_ = nullptr, *outPlane_ = nullptr;
};

} // namespace

bool poolsWholeRows(const PoolSpec& s) {
  return s.outH() == 1 && s.outW() == 1 && s.ph == 0 && s.pw == 0 && s.kw == s.w &&
         (s.channels > 0 || s.kind == PoolSpec::Max || s.doubleSum);
}

int64_t planesUnrolledTaps(const PoolSpec& s) {
  if (poolsWholeRows(s)) return 1;
  const auto [i0, i1] = fullRange(s.h, s.kh, s.sh, s.ph, s.outH());
  const auto [j0, j1] = fullRange(s.w, s.kw, s.sw, s.pw, s.outW());
  const int64_t rows = i0 + (s.outH() - i1) + 1;         // border rows, then the loop's body
  const int64_t columns = j0 + (s.outW() - j1) + 2;      // border columns, the loop's body and a tail
  const int64_t taps = s.kh * s.kw <= kMaxUnrolledTaps ? s.kh * s.kw : s.kw; // rows past 64 taps loop
  const auto times = [](int64_t a, int64_t b) { // saturating: the sizes may be up to 2^62
    int64_t r;
    return __builtin_mul_overflow(a, b, &r) ? INT64_MAX : r;
  };
  return times(times(rows, columns), taps);
}

std::unique_ptr<llvm::Module> emitPoolModule(llvm::LLVMContext& ctx, const PoolSpec& spec,
                                             const MicroKernelShape& shape) {
  validatePoolSpec(spec);
  auto module = std::make_unique<llvm::Module>(poolFunctionName(spec), ctx);
  llvm::Function* fn = createKernelFunction(*module, poolFunctionName(spec),
                                            {"x", "out"}, {"planeBegin", "planeEnd"});
  PoolBuilder(fn, spec, shape).emit();
  return module;
}

} // namespace nnc::codegen
