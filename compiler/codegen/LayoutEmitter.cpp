// im2col and back-to-planes, specialised on every size of the spec (LayoutEmitter.h).
//
// Im2col, per output row (b, i) (a runtime unit): the output columns j split at compile
// time into those whose window lies inside the row ("full" columns, no column checks)
// and the few at each border (columns clamped into the row and the padding taps
// replaced by 0 with a select). Within a column: channels are a runtime loop, window
// rows and columns are unrolled; a window row outside the plane loads a clamped row and
// selects 0. The kw taps of one window row are contiguous in x and in out, so the
// unrolled copies become vector moves (SLP) in the full columns.
// ToPlanes, per tile of kToPlanesTile pixels of one image: for each channel n, the
// tile's kToPlanesTile values x[p, n] (stride cg) are stored contiguously into plane
// n (of the pointers the caller moved to channel c0), plus the residual's; the tile of x (≤ 16·cg floats) stays in L1 across n.
#include "compiler/codegen/LayoutEmitter.h"

#include <llvm/IR/IRBuilder.h>

#include <algorithm>
#include <stdexcept>

#include "compiler/codegen/LoopBuilder.h"

namespace nnc::codegen {

using llvm::Value;

int64_t layoutUnits(const LayoutSpec& s) {
  if (s.kind == LayoutSpec::Im2col) return s.batch * s.outH();
  return s.batch * ((s.h * s.w + kToPlanesTile - 1) / kToPlanesTile);
}

std::string layoutFunctionName(const LayoutSpec& spec) { return "nnc_" + spec.key(); }

void validateLayoutSpec(const LayoutSpec& s) {
  auto fail = [&](const std::string& why) { throw std::invalid_argument("layout " + s.key() + ": " + why); };
  if (s.batch < 0) fail("need batch >= 0");
  if (s.c < 1 || s.h < 1 || s.w < 1 || s.cg < 1) fail("sizes must be positive");
  if (s.c0 < 0 || s.c0 + s.cg > s.c) fail("the group's channels must lie inside the map's");
  if (s.kind == LayoutSpec::Im2col) {
    if (s.kh < 1 || s.kw < 1 || s.sh < 1 || s.sw < 1) fail("kernel and stride must be positive");
    if (s.ph < 0 || s.pw < 0) fail("padding must be >= 0");
    if (s.outH() < 1 || s.outW() < 1) fail("empty output");
  }
}

namespace {

class LayoutBuilder {
public:
  LayoutBuilder(llvm::Function* fn, const LayoutSpec& spec)
      : s_(spec), b_(llvm::BasicBlock::Create(fn->getContext(), "entry", fn)) {
    auto arg = fn->arg_begin();
    x_ = arg++; res_ = arg++; out_ = arg++; begin_ = arg++; end_ = arg++;
  }

  void emit() {
    if (s_.kind == LayoutSpec::Im2col) emitIm2col();
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

  void emitIm2col() {
    const int64_t ho = s_.outH(), wo = s_.outW(), K = s_.cg * s_.kh * s_.kw, plane = s_.h * s_.w;
    const int64_t j0 = std::min((s_.pw + s_.sw - 1) / s_.sw, wo);
    const int64_t j1 = std::clamp(s_.w + s_.pw - s_.kw >= 0 ? (s_.w + s_.pw - s_.kw) / s_.sw + 1 : 0, j0, wo);
    LoopBuilder(b_).forRange(begin_, end_, 1, "unit", [&](Value* u) {
      Value* img = b_.CreateUDiv(u, i64(ho), "img");
      Value* i = b_.CreateURem(u, i64(ho), "orow");
      Value* xImg = gep(x_, b_.CreateAdd(b_.CreateMul(img, i64(s_.c * plane)), i64(0)));
      Value* outRow = gep(out_, b_.CreateMul(u, i64(wo * K)));
      Value* top = b_.CreateSub(b_.CreateMul(i, i64(s_.sh)), i64(s_.ph), "top");
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
            for (int64_t r = 0; r < s_.kh; ++r)
              for (int64_t c = 0; c < s_.kw; ++c) {
                Value* v = load(gep(src, b_.CreateAdd(rows[size_t(r)].first, cols[size_t(c)].first)));
                Value* inside = b_.CreateAnd(rows[size_t(r)].second, cols[size_t(c)].second);
                v = b_.CreateSelect(inside, v, llvm::ConstantFP::get(b_.getFloatTy(), 0.0));
                store(v, gep(d, i64(r * s_.kw + c)));
              }
          }, /*unroll=*/1);
        }, /*unroll=*/1);
      };
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
  llvm::IRBuilder<> b_;
  Value *x_, *res_, *out_, *begin_, *end_;
};

} // namespace

std::unique_ptr<llvm::Module> emitLayoutModule(llvm::LLVMContext& ctx, const LayoutSpec& spec,
                                               const MicroKernelShape&) {
  validateLayoutSpec(spec);
  auto module = std::make_unique<llvm::Module>(layoutFunctionName(spec), ctx);
  llvm::Type* ptr = llvm::PointerType::getUnqual(ctx);
  llvm::Type* i64 = llvm::Type::getInt64Ty(ctx);
  auto* fnTy = llvm::FunctionType::get(llvm::Type::getVoidTy(ctx), {ptr, ptr, ptr, i64, i64}, false);
  auto* fn = llvm::Function::Create(fnTy, llvm::Function::ExternalLinkage, layoutFunctionName(spec), *module);
  const char* argNames[] = {"x", "residual", "out", "unitBegin", "unitEnd"};
  for (auto& arg : fn->args()) arg.setName(argNames[arg.getArgNo()]);
  fn->setDoesNotThrow();
  LayoutBuilder(fn, spec).emit();
  return module;
}

} // namespace nnc::codegen
