// Depthwise convolution over NCHW planes, vectorised along the output row (W = the CPU
// row's vector width); over NHWC maps (spec.pixels), vectorised along the channels
// (emitPixels below).
//
// Planes. Per output plane (a runtime loop): the bias, and the plane's kh·kw weights
// (f32: read in place; stored below f32: widened once into a buffer on the stack,
// StoredTable.h). Per output row (a runtime loop), the row's vectors of W outputs go
// kGroupColumns at a time, each with its own accumulator: one FMA chain per output
// vector stalls on the FMA latency (a 7×7 window ran 6.6 GMAC/s that way, 1 thread on
// Zen 4, and 29 GMAC/s grouped). The interior vectors — every tap of every lane inside
// the row — go in a runtime loop of whole groups; the border vectors and the rest are
// unrolled, their taps' lanes outside the row masked off at compile time (masked loads
// read nothing there, the lanes are 0). A tap vector is one load when sw = 1, else the
// pieces spanning its strided lanes deinterleaved by a shuffle (stridedLanes). The
// window rows are a runtime loop over those inside the plane (forWindowRows). Each
// output is bias + Σ taps · weights in window order (row-major), by FMA where the CPU
// has it, then the activation (VectorMath, as the GEMM epilogue), then the residual add.
// A padding tap adds nothing (a row outside is skipped, a column outside is a 0 times
// its weight): an Inf or NaN of the map never reaches an output whose window misses it.
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
    wide_ = s_.kw > kMaxUnrolledWindowColumns;
  }

  void emit() {
    if (s_.pixels) return emitPixels();
    const int64_t outs = s_.c * s_.multiplier, taps = s_.kh * s_.kw;
    if (s_.weightType != DType::F32) // entry block: one buffer for every plane's weights
      wideRow_ = b_.CreateAlloca(llvm::ArrayType::get(b_.getFloatTy(), uint64_t((taps + W_ - 1) / W_ * W_)));
    LoopBuilder(b_).forRange(begin_, end_, 1, "plane", [&](Value* p) {
      Value* o = b_.CreateURem(p, i64(outs), "o");
      Value* inPlane = gep(x_, b_.CreateMul(b_.CreateUDiv(p, i64(s_.multiplier)), i64(s_.h * s_.w)));
      Value* outPlane = b_.CreateMul(p, i64(ho_ * wo_), "outplane");
      Value* wRow;
      if (s_.weightType == DType::F32) {
        wRow = gep(w_, b_.CreateMul(o, i64(taps)));
      } else { // row o of the stored table, W taps at a time (a loop: a 1×50,000 window's unrolled took 70 s to compile)
        const PanelLayout table = rowTableLayout(outs, taps, s_.weightType, s_.group);
        wRow = gep(wideRow_, i64(0));
        auto widen = [&](Value* t0, int64_t lanes) {
          b_.CreateAlignedStore(loadStoredRow(b_, table, w_, o, t0, lanes, W_), gep(wRow, t0), llvm::Align(4));
        };
        const int64_t full = taps / W_ * W_;
        if (full > 0) LoopBuilder(b_).forRange(i64(0), i64(full), W_, "widen", [&](Value* t0) { widen(t0, W_); });
        if (taps > full) widen(i64(full), taps - full);
      }
      Value* bias = b_.CreateVectorSplat(W_, s_.bias ? load(gep(bias_, o)) : llvm::ConstantFP::get(b_.getFloatTy(), 0.0));
      LoopBuilder(b_).forRange(i64(0), i64(ho_), 1, "orow", [&](Value* i) {
        Value* outRow = b_.CreateAdd(outPlane, b_.CreateMul(i, i64(wo_)));
        // the row's vectors of W outputs: window row `row` adds taps × the weights (r, c)
        forColumnGroups(i, W_, [&](const std::vector<Columns>& cols) {
          std::vector<Value*> acc(cols.size(), bias);
          forWindowRows(acc, [&](Value* row, Value* r) {
            Value* inRow = gep(inPlane, b_.CreateMul(row, i64(s_.w)));
            forWindowColumns(acc, [&](Value* c, int64_t known) {
              Value* weight = b_.CreateVectorSplat(W_, load(gep(wRow, b_.CreateAdd(b_.CreateMul(r, i64(s_.kw)), c))));
              for (size_t g = 0; g < cols.size(); ++g) acc[g] = math_.mulAdd(tapVector(inRow, cols[g], c, known), weight, acc[g]);
            });
          });
          for (size_t g = 0; g < cols.size(); ++g) finish(acc[g], b_.CreateAdd(outRow, cols[g].j), cols[g].lanes);
        });
      }, /*unroll=*/1);
    }, /*unroll=*/1);
    b_.CreateRetVoid();
  }

private:
  // Output columns go kGroupColumns vectors (planes) or pixels (NHWC) at a time, each
  // its own accumulator. Border columns are unrolled with their masks known here while
  // that emits at most kMaxUnrolledBorderTaps taps per row; beyond (wide padding and a
  // wide window: a 1×1001 window with 500 columns of padding took 10.8 s to compile),
  // they go one at a time in runtime loops that test each tap's column.
  static constexpr int64_t kGroupColumns = 8, kMaxUnrolledBorderTaps = 1024;
  // Windows wider than this many columns loop over them too (wide_), the border columns
  // then always in the runtime loops: a 1×1001 window took 3.5 s to compile unrolled.
  static constexpr int64_t kMaxUnrolledWindowColumns = 32;

  // `lanes` outputs of a row from column j: `at` = j when it is known here; kInterior in
  // a runtime loop over interior columns (every tap of every lane inside the row);
  // kAnywhere in a runtime loop over border columns.
  static constexpr int64_t kInterior = -1, kAnywhere = -2;
  struct Columns {
    Value* j;
    int64_t at, lanes;
  };

  // Output row i's columns, `step` a Columns (W: planes; 1: NHWC pixels), given to
  // `group`: kGroupColumns at a time, whole groups of interior ones in a runtime loop,
  // the others (borders, the rest) unrolled; or, for wide borders, those one at a time
  // in runtime loops.
  void forColumnGroups(Value* i, int64_t step, const std::function<void(const std::vector<Columns>&)>& group) {
    top_ = b_.CreateSub(b_.CreateMul(i, i64(s_.sh)), i64(s_.ph));
    const int64_t U = kGroupColumns;
    auto loop = [&](int64_t from, int64_t to, int64_t per, int64_t at) {
      LoopBuilder(b_).forRange(i64(from), i64(to), per * step, at == kInterior ? "ocols" : "bcols", [&](Value* jv) {
        std::vector<Columns> cols;
        for (int64_t u = 0; u < per; ++u) cols.push_back({b_.CreateAdd(jv, i64(u * step)), at, step});
        group(cols);
      }, /*unroll=*/1);
    };
    const int64_t interiorFrom = (j0_ + step - 1) / step * step, interiorRun = std::max<int64_t>(0, (j1_ - interiorFrom) / step);
    const int64_t borderColumns = (wo_ + step - 1) / step - (interiorRun >= U ? interiorRun / U * U : 0);
    const bool borderLoops = wide_ || borderColumns * s_.kw > kMaxUnrolledBorderTaps;
    std::vector<Columns> pending;
    auto flush = [&] {
      if (wide_) // the window's columns a loop: no masks known here, but no need for one inside
        for (Columns& col : pending) col.at = col.at >= j0_ && col.at + col.lanes <= j1_ ? kInterior : kAnywhere;
      if (!pending.empty()) group(pending);
      pending.clear();
    };
    for (int64_t j = 0; j < wo_;) {
      const int64_t run = j >= j0_ ? std::max<int64_t>(0, (j1_ - j) / step) : 0; // whole interior Columns
      if (run >= U) {
        flush();
        loop(j, j + run / U * U * step, U, kInterior);
        j += run / U * U * step;
        continue;
      }
      if (borderLoops && run == 0) { // whole Columns up to the interior's or the row's end
        const int64_t until = j < j0_ ? std::min(interiorFrom, wo_) : wo_, whole = (until - j) / step;
        if (whole > 1) {
          flush();
          loop(j, j + whole * step, 1, kAnywhere);
          j += whole * step;
          continue;
        }
      }
      pending.push_back({i64(j), j, std::min<int64_t>(step, wo_ - j)});
      if (int64_t(pending.size()) == U) flush();
      j += step;
    }
    flush();
  }

  // addRow(row, r) for the window rows r whose input row (top_ + r) lies in the map, in
  // order: a runtime loop, so that code and compile time grow with kw, not kh·kw (a
  // 31×31 window unrolled took 106 s to compile; unrolled 3×3 windows ran no faster).
  // (Rows outside the map selected to 0 instead made LLVM branch around each load:
  // 3×3, 224 × 224 planes ran 3.7× slower.)
  void forWindowRows(std::vector<Value*>& acc, const std::function<void(Value* row, Value* r)>& addRow) {
    LoopBuilder loops(b_);
    auto clamp = [&](Value* v) { return loops.minimum(b_.CreateSelect(b_.CreateICmpSLT(v, i64(0)), i64(0), v), i64(s_.kh), "r"); };
    loopWithSums(clamp(b_.CreateNeg(top_)), clamp(b_.CreateSub(i64(s_.h), top_)), "wrow", acc,
                 [&](Value* r) { addRow(b_.CreateAdd(top_, r), r); });
  }

  // addTap(c, known) for the window columns c in order: unrolled (known = c), or for wide
  // windows a runtime loop (known = −1).
  void forWindowColumns(std::vector<Value*>& acc, const std::function<void(Value* c, int64_t known)>& addTap) {
    if (!wide_) {
      for (int64_t c = 0; c < s_.kw; ++c) addTap(i64(c), c);
      return;
    }
    // ×4: 1×301 and 1×101 windows on NHWC maps ran 25-30 % faster than with no unrolling
    loopWithSums(i64(0), i64(s_.kw), "wcol", acc, [&](Value* c) { addTap(c, -1); }, /*unroll=*/4);
  }

  // body(v) for v in [begin, end), a runtime loop (LoopBuilder's `unroll`); `sums`
  // (values body updates) go through stack slots, which LLVM promotes to registers.
  void loopWithSums(Value* begin, Value* end, const char* name, std::vector<Value*>& sums,
                    const std::function<void(Value*)>& body, int unroll = 1) {
    std::vector<Value*> slots;
    {
      llvm::IRBuilder<>::InsertPointGuard guard(b_);
      llvm::BasicBlock& entry = b_.GetInsertBlock()->getParent()->getEntryBlock();
      b_.SetInsertPoint(&entry, entry.getFirstInsertionPt());
      for (Value* v : sums) slots.push_back(b_.CreateAlloca(v->getType()));
    }
    for (size_t g = 0; g < sums.size(); ++g) b_.CreateStore(sums[g], slots[g]);
    LoopBuilder(b_).forRange(begin, end, 1, name, [&](Value* v) {
      for (size_t g = 0; g < sums.size(); ++g) sums[g] = b_.CreateLoad(sums[g]->getType(), slots[g]);
      body(v);
      for (size_t g = 0; g < sums.size(); ++g) b_.CreateStore(sums[g], slots[g]);
    }, unroll);
    for (size_t g = 0; g < sums.size(); ++g) sums[g] = b_.CreateLoad(sums[g]->getType(), slots[g]);
  }

  // Window column c's taps of the lanes of `col` in the input row `inRow`: x[row, j·sw −
  // pw + c + l·sw] for lanes l; the span (lanes − 1)·sw + 1 floats read W at a time,
  // the lanes past the span and those outside the row masked off (known here, or
  // tested at run time for kAnywhere).
  Value* tapVector(Value* inRow, const Columns& col, Value* c, int64_t known) {
    const int64_t span = (col.lanes - 1) * s_.sw + 1, first = col.at * s_.sw - s_.pw + known;
    Value* at = b_.CreateAdd(b_.CreateMul(col.j, i64(s_.sw)), b_.CreateSub(c, i64(s_.pw)));
    std::vector<Value*> pieces;
    for (int64_t k = 0; k * W_ < span; ++k) {
      Value* ptr = gep(inRow, b_.CreateAdd(at, i64(k * W_)));
      std::vector<bool> lanes;
      for (int64_t l = 0; l < W_; ++l) {
        const int64_t q = k * W_ + l;
        lanes.push_back(q < span && (col.at < 0 || (first + q >= 0 && first + q < s_.w)));
      }
      if (col.at != kAnywhere) {
        pieces.push_back(loadLanes(ptr, lanes));
        continue;
      }
      std::vector<llvm::Constant*> offsets;
      for (int64_t l = 0; l < W_; ++l) offsets.push_back(b_.getInt64(k * W_ + l));
      llvm::VectorType* indexTy = llvm::FixedVectorType::get(b_.getInt64Ty(), unsigned(W_));
      Value* column = b_.CreateAdd(b_.CreateVectorSplat(W_, at), llvm::ConstantVector::get(offsets));
      Value* inside = b_.CreateAnd(b_.CreateICmpSGE(column, llvm::Constant::getNullValue(indexTy)),
                                   b_.CreateICmpSLT(column, b_.CreateVectorSplat(W_, i64(s_.w))));
      pieces.push_back(b_.CreateMaskedLoad(vecTy_, ptr, llvm::Align(4), b_.CreateAnd(inside, laneMask(lanes)),
                                           llvm::Constant::getNullValue(vecTy_)));
    }
    return s_.sw == 1 ? pieces[0] : stridedLanes(b_, pieces, s_.sw, col.lanes);
  }

  // A vector with lane l loaded where lanes[l], 0 elsewhere; nothing read when none is.
  Value* loadLanes(Value* ptr, const std::vector<bool>& lanes) {
    const auto n = std::count(lanes.begin(), lanes.end(), true);
    if (n == 0) return llvm::Constant::getNullValue(vecTy_);
    if (n == W_) return b_.CreateAlignedLoad(vecTy_, ptr, llvm::Align(4));
    return b_.CreateMaskedLoad(vecTy_, ptr, llvm::Align(4), laneMask(lanes), llvm::Constant::getNullValue(vecTy_));
  }
  llvm::Constant* laneMask(const std::vector<bool>& lanes) {
    std::vector<llvm::Constant*> bits;
    for (bool l : lanes) bits.push_back(b_.getInt1(l));
    return llvm::ConstantVector::get(bits);
  }

  // NHWC: per unit (image, output row i), per vector of channels (the tail's lanes
  // masked), the output pixels grouped as the planes' vectors are (forColumnGroups):
  // bias + Σ taps · weights (rows of the transposed W) in the same row-major order as
  // the planes' code, so the same bits; a tap outside the map's columns is 0, as the
  // planes' masked lanes are.
  void emitPixels() {
    const int64_t C = s_.c, fullC = C / W_ * W_;
    Value* zero = llvm::Constant::getNullValue(vecTy_);
    LoopBuilder(b_).forRange(begin_, end_, 1, "unit", [&](Value* u) {
      Value* img = b_.CreateUDiv(u, i64(ho_), "img");
      Value* i = b_.CreateURem(u, i64(ho_), "orow");
      Value* xImg = gep(x_, b_.CreateMul(img, i64(s_.h * s_.w * C)));
      Value* outRow = b_.CreateMul(u, i64(wo_ * C), "outrow");
      auto channels = [&](Value* c0, int64_t lanes) {
        Value* bias = s_.bias ? loadFirstLanes(b_, vecTy_, gep(bias_, c0), lanes) : zero;
        forColumnGroups(i, 1, [&](const std::vector<Columns>& cols) {
          std::vector<Value*> acc(cols.size(), bias);
          forWindowRows(acc, [&](Value* row, Value* r) {
            Value* rowPixel = b_.CreateMul(row, i64(s_.w));
            for (size_t g = 0; g < cols.size(); ++g)
              if (cols[g].at == kInterior) prefetchAhead(xImg, rowPixel, cols[g].j, c0);
            forWindowColumns(acc, [&](Value* c, int64_t known) {
              Value* tap = b_.CreateAdd(b_.CreateMul(r, i64(s_.kw)), c);
              Value* weight = loadFirstLanes(b_, vecTy_, gep(w_, b_.CreateAdd(b_.CreateMul(tap, i64(C)), c0)), lanes);
              for (size_t g = 0; g < cols.size(); ++g) {
                Value* col = b_.CreateAdd(b_.CreateMul(cols[g].j, i64(s_.sw)), b_.CreateSub(c, i64(s_.pw)));
                const int64_t at = cols[g].at * s_.sw - s_.pw + known; // when both are known here
                Value* x = zero;
                if (cols[g].at == kAnywhere) { // the column clamped into the row, its tap selected to 0 outside
                  Value* inside = b_.CreateAnd(b_.CreateICmpSGE(col, i64(0)), b_.CreateICmpSLT(col, i64(s_.w)));
                  Value* pixel = b_.CreateAdd(rowPixel, b_.CreateSelect(inside, col, i64(0)));
                  x = b_.CreateSelect(inside, loadFirstLanes(b_, vecTy_, gep(xImg, b_.CreateAdd(b_.CreateMul(pixel, i64(C)), c0)), lanes), zero);
                } else if (cols[g].at == kInterior || (at >= 0 && at < s_.w)) {
                  Value* pixel = b_.CreateAdd(rowPixel, col);
                  x = loadFirstLanes(b_, vecTy_, gep(xImg, b_.CreateAdd(b_.CreateMul(pixel, i64(C)), c0)), lanes);
                }
                acc[g] = math_.mulAdd(x, weight, acc[g]);
              }
            });
          });
          for (size_t g = 0; g < cols.size(); ++g)
            finish(acc[g], b_.CreateAdd(outRow, b_.CreateAdd(b_.CreateMul(cols[g].j, i64(C)), c0)), lanes);
        });
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
  void prefetchAhead(Value* xImg, Value* rowPixel, Value* j, Value* c0) {
    Value* left = b_.CreateSub(b_.CreateMul(j, i64(s_.sw)), i64(s_.pw));
    Value* pixel = b_.CreateAdd(rowPixel, b_.CreateAdd(left, i64(kPrefetchPixels)));
    emitPrefetch(b_, gep(xImg, b_.CreateAdd(b_.CreateMul(pixel, i64(s_.c)), c0)));
  }

  Value* i64(int64_t v) { return b_.getInt64(v); }
  Value* gep(Value* base, Value* index) { return b_.CreateGEP(b_.getFloatTy(), base, index); }
  Value* load(Value* ptr) { return b_.CreateAlignedLoad(b_.getFloatTy(), ptr, llvm::Align(4)); }

  // act(acc) (+ residual), stored to the `lanes` outputs at element offset `at` of out.
  void finish(Value* acc, Value* at, int64_t lanes) {
    acc = math_.activation(s_.act, acc);
    if (s_.residual) acc = b_.CreateFAdd(acc, loadFirstLanes(b_, vecTy_, gep(res_, at), lanes));
    storeFirstLanes(b_, acc, gep(out_, at), lanes);
  }

  const DepthwiseSpec& s_;
  int W_;
  int64_t ho_, wo_, j0_ = 0, j1_ = 0;
  llvm::IRBuilder<> b_;
  llvm::FixedVectorType* vecTy_;
  VectorMath math_;
  Value *x_, *w_, *bias_, *res_, *out_, *begin_, *end_;
  Value *top_ = nullptr, *wideRow_ = nullptr;
  bool wide_ = false;
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
