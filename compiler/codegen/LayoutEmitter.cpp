// im2col and back-to-planes, specialised on every size of the spec (LayoutEmitter.h).
//
// Im2col, per output row (b, i) (a runtime unit): the output columns j split at compile
// time into those whose window lies inside the row ("full" columns, no column checks)
// and the few at each border (columns clamped into the row and the padding taps
// replaced by 0 with a select). Within a column: channels are a runtime loop, window
// rows and columns are unrolled; a window row outside the plane loads a clamped row and
// selects 0. In the full columns the kw taps of one window row are contiguous in x and
// in out, so they move as one vector of kw lanes (a masked load, then stores of just
// those lanes; W at a time when kw > W). (3×3 im2col of 64×56×56, 7 MB written: only
// ~7 % faster than scalar copies; at that size it is bound by the writes.)
// ToPlanes, per tile of kToPlanesTile pixels of one image: for each channel n, the
// tile's kToPlanesTile values x[p, n] (stride cg) are stored contiguously into plane n
// (of the pointers the caller moved to channel c0), plus the residual's; the tile of
// x (≤ 16·cg floats) stays in L1 across n.
#include "compiler/codegen/LayoutEmitter.h"

#include <llvm/IR/IRBuilder.h>

#include <algorithm>
#include <stdexcept>

#include "compiler/codegen/KernelFunction.h"
#include "compiler/codegen/LoopBuilder.h"
#include "compiler/codegen/PartialVector.h"

namespace nnc::codegen {

using llvm::Value;

int64_t layoutUnits(const LayoutSpec& s) {
  if (s.im2col()) return s.batch * s.outH();
  return s.batch * ((s.h * s.w + kToPlanesTile - 1) / kToPlanesTile);
}

std::string layoutFunctionName(const LayoutSpec& spec) { return "nnc_" + spec.key(); }

void validateLayoutSpec(const LayoutSpec& s) {
  auto fail = [&](const std::string& why) { throw std::invalid_argument("layout " + s.key() + ": " + why); };
  if (s.batch < 0) fail("need batch >= 0");
  if (s.c < 1 || s.h < 1 || s.w < 1 || s.cg < 1) fail("sizes must be positive");
  if (s.c0 < 0 || s.c0 + s.cg > s.c) fail("the group's channels must lie inside the map's");
  if (s.im2col()) {
    if (s.kh < 1 || s.kw < 1 || s.sh < 1 || s.sw < 1) fail("kernel and stride must be positive");
    if (s.ph < 0 || s.pw < 0) fail("padding must be >= 0");
    if (s.outH() < 1 || s.outW() < 1) fail("empty output");
  }
}

// Taps an im2col row unrolls (each a clamped copy, or a vector of a full row's); wider
// windows loop (wideWindowColumns, and its NHWC form in emitPixelsIm2col).
constexpr int64_t kMaxUnrolledIm2colTaps = 256;

namespace {

class LayoutBuilder {
public:
  LayoutBuilder(llvm::Function* fn, const LayoutSpec& spec, const MicroKernelShape& shape)
      : s_(spec), W_(shape.vectorFloats), masked_(shape.maskedStores), b_(llvm::BasicBlock::Create(fn->getContext(), "entry", fn)),
        vecTy_(llvm::FixedVectorType::get(b_.getFloatTy(), shape.vectorFloats)) {
    auto arg = fn->arg_begin();
    x_ = arg++; res_ = arg++; out_ = arg++; begin_ = arg++; end_ = arg++;
  }

  void emit() {
    if (s_.kind == LayoutSpec::Im2col) emitIm2col();
    else if (s_.kind == LayoutSpec::PixelsIm2col) emitPixelsIm2col();
    else emitToPlanes();
    b_.CreateRetVoid();
  }

private:
  Value* i64(int64_t v) { return b_.getInt64(v); }
  Value* gep(Value* base, Value* index) { return b_.CreateGEP(b_.getFloatTy(), base, index); }
  Value* load(Value* ptr) { return b_.CreateAlignedLoad(b_.getFloatTy(), ptr, llvm::Align(4)); }
  void store(Value* v, Value* ptr) { b_.CreateAlignedStore(v, ptr, llvm::Align(4)); }
  // v clamped into [0, n − 1], and whether it was inside.
  std::pair<Value*, Value*> clampInto(Value* v, int64_t n) {
    Value* inside = b_.CreateAnd(b_.CreateICmpSGE(v, i64(0)), b_.CreateICmpSLT(v, i64(n)));
    Value* lo = b_.CreateSelect(b_.CreateICmpSLT(v, i64(0)), i64(0), v);
    return {b_.CreateSelect(b_.CreateICmpSGE(lo, i64(n)), i64(n - 1), lo), inside};
  }

  // A 1×1 stride-1 unpadded im2col is a transpose of each image's [cg, P] into [P, cg]:
  // W×W blocks (W channels × W pixels of one output row) go through registers — W
  // vector loads, log2(W) rounds of interleaves (the perfect shuffle, W/2 low and W/2
  // high per round, transposes), W vector stores; the channel and pixel tails are
  // scalar. Scalar copies ran at ~0.4 ns per float (64×56×56: ~80 µs).
  bool isTranspose() const {
    return s_.kh == 1 && s_.kw == 1 && s_.sh == 1 && s_.sw == 1 && s_.ph == 0 && s_.pw == 0;
  }
  std::vector<Value*> transpose(std::vector<Value*> v) {
    std::vector<int> lo, hi;
    for (int i = 0; i < W_ / 2; ++i) lo.push_back(i), lo.push_back(i + W_), hi.push_back(i + W_ / 2), hi.push_back(i + W_ / 2 + W_);
    for (int round = 1; round < W_; round *= 2) {
      std::vector<Value*> next;
      for (int j = 0; j < W_; ++j)
        next.push_back(b_.CreateShuffleVector(v[size_t(j / 2)], v[size_t(j / 2 + W_ / 2)], j % 2 ? hi : lo));
      v = next;
    }
    return v;
  }
  void emitTranspose() {
    const int64_t P = s_.h * s_.w, K = s_.cg, jFull = s_.w / W_ * W_, cFull = s_.cg / W_ * W_;
    auto loadF = [&](Value* ptr) { return load(ptr); };
    LoopBuilder(b_).forRange(begin_, end_, 1, "unit", [&](Value* u) {
      Value* img = b_.CreateUDiv(u, i64(s_.h), "img");
      Value* i = b_.CreateURem(u, i64(s_.h), "orow");
      Value* xRow = gep(x_, b_.CreateAdd(b_.CreateMul(img, i64(s_.c * P)), b_.CreateMul(i, i64(s_.w))));
      Value* outRow = gep(out_, b_.CreateMul(u, i64(s_.w * K)));
      auto scalarColumn = [&](Value* j, Value* ciBegin) { // pixel j, channels [ciBegin, cg)
        LoopBuilder(b_).forRange(ciBegin, i64(s_.cg), 1, "tci", [&](Value* ci) {
          store(loadF(gep(xRow, b_.CreateAdd(b_.CreateMul(ci, i64(P)), j))),
                gep(outRow, b_.CreateAdd(b_.CreateMul(j, i64(K)), ci)));
        }, /*unroll=*/1);
      };
      if (jFull > 0)
        LoopBuilder(b_).forRange(i64(0), i64(jFull), W_, "tj", [&](Value* j) {
          if (cFull > 0)
            LoopBuilder(b_).forRange(i64(0), i64(cFull), W_, "tc", [&](Value* ci) {
              std::vector<Value*> v;
              for (int k = 0; k < W_; ++k)
                v.push_back(b_.CreateAlignedLoad(
                    vecTy_, gep(xRow, b_.CreateAdd(b_.CreateMul(b_.CreateAdd(ci, i64(k)), i64(P)), j)), llvm::Align(4)));
              v = transpose(v);
              for (int l = 0; l < W_; ++l)
                b_.CreateAlignedStore(v[size_t(l)],
                                      gep(outRow, b_.CreateAdd(b_.CreateMul(b_.CreateAdd(j, i64(l)), i64(K)), ci)),
                                      llvm::Align(4));
            }, /*unroll=*/1);
          if (cFull < s_.cg)
            for (int l = 0; l < W_; ++l) scalarColumn(b_.CreateAdd(j, i64(l)), i64(cFull));
        }, /*unroll=*/1);
      if (jFull < s_.w)
        LoopBuilder(b_).forRange(i64(jFull), i64(s_.w), 1, "tjt", [&](Value* j) { scalarColumn(j, i64(0)); },
                                 /*unroll=*/1);
    }, /*unroll=*/1);
  }

  void emitIm2col() {
    if (isTranspose()) return emitTranspose();
    const int64_t ho = s_.outH(), wo = s_.outW(), K = s_.cg * s_.kh * s_.kw, plane = s_.h * s_.w;
    const int64_t j0 = std::min((s_.pw + s_.sw - 1) / s_.sw, wo);
    const int64_t j1 = std::clamp(s_.w + s_.pw - s_.kw >= 0 ? (s_.w + s_.pw - s_.kw) / s_.sw + 1 : 0, j0, wo);
    LoopBuilder(b_).forRange(begin_, end_, 1, "unit", [&](Value* u) {
      Value* img = b_.CreateUDiv(u, i64(ho), "img");
      Value* i = b_.CreateURem(u, i64(ho), "orow");
      Value* xImg = gep(x_, b_.CreateAdd(b_.CreateMul(img, i64(s_.c * plane)), i64(0)));
      Value* outRow = gep(out_, b_.CreateMul(u, i64(wo * K)));
      Value* top = b_.CreateSub(b_.CreateMul(i, i64(s_.sh)), i64(s_.ph), "top");
      if (s_.kh * s_.kw > kMaxUnrolledIm2colTaps) return wideWindowColumns(xImg, outRow, top);
      // Per window row: the clamped row offset and whether it is inside (computed once per unit).
      std::vector<std::pair<Value*, Value*>> rows;
      for (int64_t r = 0; r < s_.kh; ++r) {
        auto [row, inside] = clampInto(b_.CreateAdd(top, i64(r)), s_.h);
        rows.push_back({b_.CreateMul(row, i64(s_.w)), inside});
      }
      auto columns = [&](int64_t from, int64_t to, bool full) {
        if (from >= to) return;
        LoopBuilder(b_).forRange(i64(from), i64(to), 1, full ? "col" : "bcol", [&](Value* j) {
          Value* left = b_.CreateSub(b_.CreateMul(j, i64(s_.sw)), i64(s_.pw));
          Value* dst = gep(outRow, b_.CreateMul(j, i64(K)));
          std::vector<std::pair<Value*, Value*>> cols;
          for (int64_t c = 0; c < s_.kw; ++c)
            cols.push_back(full ? std::pair<Value*, Value*>{b_.CreateAdd(left, i64(c)), b_.getTrue()}
                                : clampInto(b_.CreateAdd(left, i64(c)), s_.w));
          LoopBuilder(b_).forRange(i64(0), i64(s_.cg), 1, "ci", [&](Value* ci) {
            Value* src = gep(xImg, b_.CreateMul(ci, i64(plane)));
            Value* d = gep(dst, b_.CreateMul(ci, i64(s_.kh * s_.kw)));
            for (int64_t r = 0; r < s_.kh; ++r) {
              if (full && s_.kw > 1) { // the window row's kw taps: contiguous in x and in out
                for (int64_t c = 0; c < s_.kw; c += W_) {
                  const int64_t lanes = std::min<int64_t>(W_, s_.kw - c);
                  Value* v = loadFirstLanes(b_, vecTy_, gep(src, b_.CreateAdd(rows[size_t(r)].first, cols[size_t(c)].first)),
                                            lanes);
                  v = b_.CreateSelect(rows[size_t(r)].second, v, llvm::Constant::getNullValue(vecTy_));
                  storeFirstLanes(b_, v, gep(d, i64(r * s_.kw + c)), lanes);
                }
                continue;
              }
              for (int64_t c = 0; c < s_.kw; ++c) {
                Value* v = load(gep(src, b_.CreateAdd(rows[size_t(r)].first, cols[size_t(c)].first)));
                Value* inside = b_.CreateAnd(rows[size_t(r)].second, cols[size_t(c)].second);
                v = b_.CreateSelect(inside, v, llvm::ConstantFP::get(b_.getFloatTy(), 0.0));
                store(v, gep(d, i64(r * s_.kw + c)));
              }
            }
          }, /*unroll=*/1);
        }, /*unroll=*/1);
      };
      columns(0, j0, false);
      columns(interleavedColumns(xImg, outRow, rows[0], j0, j1), j1, true);
      columns(j1, wo, false);
    }, /*unroll=*/1);
  }

  // A window of more than kMaxUnrolledIm2colTaps taps: every column of the output row,
  // channel and tap in runtime loops, each tap's load clamped into the map and 0 where
  // it is outside. The unrolled code grows with the window (a 1 × 3000 one with 1000 of
  // padding compiled for a minute); these copies are the same values.
  void wideWindowColumns(Value* xImg, Value* outRow, Value* top) {
    const int64_t K = s_.cg * s_.kh * s_.kw, plane = s_.h * s_.w;
    LoopBuilder loops(b_);
    loops.forRange(i64(0), i64(s_.outW()), 1, "col", [&](Value* j) {
      Value* left = b_.CreateSub(b_.CreateMul(j, i64(s_.sw)), i64(s_.pw));
      Value* dst = gep(outRow, b_.CreateMul(j, i64(K)));
      loops.forRange(i64(0), i64(s_.cg), 1, "ci", [&](Value* ci) {
        Value* src = gep(xImg, b_.CreateMul(ci, i64(plane)));
        Value* d = gep(dst, b_.CreateMul(ci, i64(s_.kh * s_.kw)));
        loops.forRange(i64(0), i64(s_.kh), 1, "wr", [&](Value* r) {
          auto [row, rowInside] = clampInto(b_.CreateAdd(top, r), s_.h);
          Value* rowAt = b_.CreateMul(row, i64(s_.w));
          Value* dRow = gep(d, b_.CreateMul(r, i64(s_.kw)));
          loops.forRange(i64(0), i64(s_.kw), 1, "wc", [&](Value* c) {
            auto [col, colInside] = clampInto(b_.CreateAdd(left, c), s_.w);
            Value* v = load(gep(src, b_.CreateAdd(rowAt, col)));
            v = b_.CreateSelect(b_.CreateAnd(rowInside, colInside), v, llvm::ConstantFP::get(b_.getFloatTy(), 0.0));
            store(v, gep(dRow, c));
          });
        }, /*unroll=*/1);
      }, /*unroll=*/1);
    }, /*unroll=*/1);
  }

  // A 1×1 stride-1 padded im2col of few channels (cg <= 4: the NCHW image a first conv
  // reads, copied to NHWC with its padding made): in the columns [j0, j1) whose pixel
  // lies inside the row, W pixels at a time — one vector load per channel, the cg
  // vectors interleaved into cg·W floats of [pixel][channel] and stored as one. Returns
  // the first column left to the scalar copies. (ResNet-18's 3×224×224 input, padded by
  // 3: the scalar copies took 0.6 ms of a 60 ms batch of 8 at 2 threads.)
  int64_t interleavedColumns(Value* xImg, Value* outRow, std::pair<Value*, Value*> row, int64_t j0, int64_t j1) {
    const int64_t cg = s_.cg, runs = s_.kh == 1 && s_.kw == 1 && s_.sw == 1 && cg <= 4 ? (j1 - j0) / W_ : 0;
    if (runs == 0) return j0;
    const int64_t plane = s_.h * s_.w, jv = j0 + runs * W_;
    LoopBuilder(b_).forRange(i64(j0), i64(jv), W_, "pcol", [&](Value* j) {
      Value* src = b_.CreateAdd(row.first, b_.CreateSub(j, i64(s_.pw)));
      std::vector<Value*> v;
      for (int64_t ci = 0; ci < cg; ++ci) {
        Value* x = b_.CreateAlignedLoad(vecTy_, gep(xImg, b_.CreateAdd(src, i64(ci * plane))), llvm::Align(4));
        v.push_back(b_.CreateSelect(row.second, x, llvm::Constant::getNullValue(vecTy_)));
      }
      // concatenate (pairs, a zero vector making the count even), then element
      // e = pixel · cg + channel takes lane pixel of vector channel
      while (v.size() > 1) {
        if (v.size() % 2) v.push_back(llvm::Constant::getNullValue(v.back()->getType()));
        std::vector<Value*> next;
        const int width = int(llvm::cast<llvm::FixedVectorType>(v[0]->getType())->getNumElements());
        std::vector<int> both(size_t(2 * width));
        for (int e = 0; e < 2 * width; ++e) both[size_t(e)] = e;
        for (size_t q = 0; q < v.size(); q += 2) next.push_back(b_.CreateShuffleVector(v[q], v[q + 1], both));
        v = next;
      }
      std::vector<int> order(size_t(cg * W_));
      for (int64_t e = 0; e < cg * W_; ++e) order[size_t(e)] = int((e % cg) * W_ + e / cg);
      Value* pixels = cg == 1 ? v[0] : b_.CreateShuffleVector(v[0], order);
      b_.CreateAlignedStore(pixels, gep(outRow, b_.CreateMul(j, i64(cg))), llvm::Align(4));
    }, /*unroll=*/1);
    return jv;
  }

  // n floats from src to dst (zeros when src is null): vectors, then the tail's lanes.
  void copyRun(Value* src, Value* dst, int64_t n) {
    Value* zero = llvm::Constant::getNullValue(vecTy_);
    const int64_t full = n / W_ * W_;
    if (full > 0)
      LoopBuilder(b_).forRange(i64(0), i64(full), W_, src ? "cp" : "zero", [&](Value* k) {
        Value* v = src ? b_.CreateAlignedLoad(vecTy_, gep(src, k), llvm::Align(4)) : zero;
        b_.CreateAlignedStore(v, gep(dst, k), llvm::Align(4));
      }, full / W_ <= 4 ? 0 : 2);
    if (n > full) {
      Value* v = src ? loadFirstLanes(b_, vecTy_, gep(src, i64(full)), n - full) : zero;
      storeFirstLanes(b_, v, gep(dst, i64(full)), n - full, masked_);
    }
  }

  // PixelsIm2col, per output row (b, i) (a runtime unit): every tap is a run of cg
  // channels, contiguous in x and in out, copied as vectors (or zeros in the padding).
  // In the columns whose window lies inside the row (split at compile time as for
  // Im2col), a window row's kw taps are one run of kw·cg floats when the group is the
  // whole map; a window row outside the map is one run of zeros.
  void emitPixelsIm2col() {
    const int64_t ho = s_.outH(), wo = s_.outW(), K = s_.cg * s_.kh * s_.kw;
    const int64_t j0 = std::min((s_.pw + s_.sw - 1) / s_.sw, wo);
    const int64_t j1 = std::clamp(s_.w + s_.pw - s_.kw >= 0 ? (s_.w + s_.pw - s_.kw) / s_.sw + 1 : 0, j0, wo);
    LoopBuilder(b_).forRange(begin_, end_, 1, "unit", [&](Value* u) {
      Value* img = b_.CreateUDiv(u, i64(ho), "img");
      Value* i = b_.CreateURem(u, i64(ho), "orow");
      Value* xImg = gep(x_, b_.CreateMul(img, i64(s_.h * s_.w * s_.c)));
      Value* outRow = gep(out_, b_.CreateMul(u, i64(wo * K)));
      Value* top = b_.CreateSub(b_.CreateMul(i, i64(s_.sh)), i64(s_.ph), "top");
      auto columns = [&](int64_t from, int64_t to, bool full) {
        if (from >= to) return;
        LoopBuilder(b_).forRange(i64(from), i64(to), 1, full ? "col" : "bcol", [&](Value* j) {
          Value* left = b_.CreateSub(b_.CreateMul(j, i64(s_.sw)), i64(s_.pw));
          Value* dst = gep(outRow, b_.CreateMul(j, i64(K)));
          for (int64_t r = 0; r < s_.kh; ++r) {
            Value* ih = b_.CreateAdd(top, i64(r));
            Value* rowInside = b_.CreateAnd(b_.CreateICmpSGE(ih, i64(0)), b_.CreateICmpSLT(ih, i64(s_.h)));
            auto pixel = [&](Value* iw) { return gep(xImg, b_.CreateMul(b_.CreateAdd(b_.CreateMul(ih, i64(s_.w)), iw), i64(s_.c))); };
            if (full && s_.cg == s_.c) { // the window row's taps: one run in x and in out
              Value* d = gep(dst, i64(r * s_.kw * s_.cg));
              LoopBuilder(b_).ifElse(rowInside, [&] { copyRun(pixel(left), d, s_.kw * s_.cg); },
                                     [&] { copyRun(nullptr, d, s_.kw * s_.cg); });
              continue;
            }
            for (int64_t c = 0; c < s_.kw; ++c) {
              Value* iw = b_.CreateAdd(left, i64(c));
              Value* inside = full ? rowInside
                                   : b_.CreateAnd(rowInside, b_.CreateAnd(b_.CreateICmpSGE(iw, i64(0)),
                                                                          b_.CreateICmpSLT(iw, i64(s_.w))));
              Value* d = gep(dst, i64((r * s_.kw + c) * s_.cg));
              LoopBuilder(b_).ifElse(inside, [&] { copyRun(pixel(iw), d, s_.cg); }, [&] { copyRun(nullptr, d, s_.cg); });
            }
          }
        }, /*unroll=*/1);
      };
      if (s_.kh * s_.kw > kMaxUnrolledIm2colTaps) { // wide windows loop, as wideWindowColumns
        LoopBuilder loops(b_);
        loops.forRange(i64(0), i64(wo), 1, "col", [&](Value* j) {
          Value* left = b_.CreateSub(b_.CreateMul(j, i64(s_.sw)), i64(s_.pw));
          Value* dst = gep(outRow, b_.CreateMul(j, i64(K)));
          loops.forRange(i64(0), i64(s_.kh), 1, "wr", [&](Value* r) {
            Value* ih = b_.CreateAdd(top, r);
            Value* rowInside = b_.CreateAnd(b_.CreateICmpSGE(ih, i64(0)), b_.CreateICmpSLT(ih, i64(s_.h)));
            loops.forRange(i64(0), i64(s_.kw), 1, "wc", [&](Value* c) {
              Value* iw = b_.CreateAdd(left, c);
              Value* inside = b_.CreateAnd(rowInside, b_.CreateAnd(b_.CreateICmpSGE(iw, i64(0)),
                                                                   b_.CreateICmpSLT(iw, i64(s_.w))));
              Value* d = gep(dst, b_.CreateMul(b_.CreateAdd(b_.CreateMul(r, i64(s_.kw)), c), i64(s_.cg)));
              Value* at = gep(xImg, b_.CreateMul(b_.CreateAdd(b_.CreateMul(ih, i64(s_.w)), iw), i64(s_.c)));
              LoopBuilder(b_).ifElse(inside, [&] { copyRun(at, d, s_.cg); }, [&] { copyRun(nullptr, d, s_.cg); });
            }, /*unroll=*/1);
          }, /*unroll=*/1);
        }, /*unroll=*/1);
        return;
      }
      columns(0, j0, false);
      columns(j0, j1, true);
      columns(j1, wo, false);
    }, /*unroll=*/1);
  }

  void emitToPlanes() {
    const int64_t P = s_.h * s_.w, tiles = (P + kToPlanesTile - 1) / kToPlanesTile;
    const int64_t tail = P % kToPlanesTile;
    LoopBuilder(b_).forRange(begin_, end_, 1, "unit", [&](Value* u) {
      Value* img = b_.CreateUDiv(u, i64(tiles), "img");
      Value* p0 = b_.CreateMul(b_.CreateURem(u, i64(tiles)), i64(kToPlanesTile), "p0");
      Value* src = gep(x_, b_.CreateMul(b_.CreateAdd(b_.CreateMul(img, i64(P)), p0), i64(s_.cg)));
      Value* dstOff = b_.CreateAdd(b_.CreateMul(b_.CreateMul(img, i64(s_.c)), i64(P)), p0);
      auto tile = [&](int64_t len) {
        LoopBuilder(b_).forRange(i64(0), i64(s_.cg), 1, "ch", [&](Value* n) {
          Value* off = b_.CreateAdd(dstOff, b_.CreateMul(n, i64(P)));
          for (int64_t q = 0; q < len; ++q) {
            Value* v = load(gep(src, b_.CreateAdd(n, i64(q * s_.cg))));
            Value* at = b_.CreateAdd(off, i64(q));
            if (s_.residual) v = b_.CreateFAdd(v, load(gep(res_, at)));
            store(v, gep(out_, at));
          }
        }, /*unroll=*/1);
      };
      if (tail == 0) return tile(kToPlanesTile);
      LoopBuilder(b_).ifElse(b_.CreateICmpEQ(p0, i64((tiles - 1) * kToPlanesTile)), [&] { tile(tail); },
                             [&] { if (tiles > 1) tile(kToPlanesTile); });
    }, /*unroll=*/1);
  }

  const LayoutSpec& s_;
  int W_;
  bool masked_;
  llvm::IRBuilder<> b_;
  llvm::FixedVectorType* vecTy_;
  Value *x_, *res_, *out_, *begin_, *end_;
};

} // namespace

std::unique_ptr<llvm::Module> emitLayoutModule(llvm::LLVMContext& ctx, const LayoutSpec& spec,
                                               const MicroKernelShape& shape) {
  validateLayoutSpec(spec);
  auto module = std::make_unique<llvm::Module>(layoutFunctionName(spec), ctx);
  llvm::Function* fn = createKernelFunction(*module, layoutFunctionName(spec),
                                            {"x", "residual", "out"}, {"unitBegin", "unitEnd"});
  LayoutBuilder(fn, spec, shape).emit();
  return module;
}

} // namespace nnc::codegen
