// KV-cache append: per row, its batch entry and position from (b, i) = (r / seq, r mod
// seq) and past, then each head vector of the row's k|v columns to its plane, copied
// (f32), narrowed (f16, bf16) or quantised (i8) in vectors of the CPU's width, the tail
// masked.
#include "compiler/codegen/KvAppendEmitter.h"

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>

#include <functional>
#include <stdexcept>

#include "compiler/codegen/KernelFunction.h"
#include "compiler/codegen/LoopBuilder.h"
#include "compiler/codegen/PartialVector.h"

namespace nnc::codegen {

using llvm::Value;

std::string kvAppendFunctionName(const KvAppendSpec& spec) { return "nnc_" + spec.key(); }

void validateKvAppendSpec(const KvAppendSpec& s) {
  if (s.rows < 0 || s.seq < 1 || s.seq > s.context || s.cols < 1 || s.col < 0 || s.col + s.cols > s.ld)
    throw std::invalid_argument("kv append " + s.key() + ": need rows >= 0, 1 <= seq <= context, cols >= 1 and " +
                                "col + cols <= ld (rows " + std::to_string(s.rows) + ")");
  if (s.type != DType::F32 && s.type != DType::F16 && s.type != DType::BF16 && s.type != DType::I8)
    throw std::invalid_argument("kv append " + s.key() + ": the cache is f32, f16, bf16 or i8, not " +
                                std::string(dtypeName(s.type)));
  if (s.headDim < 1 || s.cols % (2 * s.headDim) != 0)
    throw std::invalid_argument("kv append " + s.key() + ": cols must be 2 · kvHeads · headDim (k and v heads)");
}

namespace {

// f32 lanes to f16 bit patterns (i32 lanes), rounded to nearest even, without F16C
// (F. Giesen's float_to_half_fast3_rtne): inf/NaN and overflow keep the exponent all
// ones, tiny values go through an f32 addition of 0.5 that rounds them into place.
Value* floatToHalfBits(llvm::IRBuilder<>& b, Value* v) {
  auto* f32s = llvm::cast<llvm::FixedVectorType>(v->getType());
  auto* i32s = llvm::FixedVectorType::get(b.getInt32Ty(), f32s->getNumElements());
  auto splat = [&](uint32_t c) { return llvm::ConstantInt::get(i32s, c); };
  Value* u = b.CreateBitCast(v, i32s);
  Value* sign = b.CreateAnd(b.CreateLShr(u, splat(16)), splat(0x8000));
  Value* a = b.CreateAnd(u, splat(0x7fffffff));
  Value* nanInf = b.CreateSelect(b.CreateICmpUGT(a, splat(0x7f800000)), splat(0x7e00), splat(0x7c00));
  Value* tiny = b.CreateSub(b.CreateBitCast(b.CreateFAdd(b.CreateBitCast(a, f32s), llvm::ConstantFP::get(f32s, 0.5)),
                                            i32s),
                            splat(0x3f000000));
  Value* odd = b.CreateAnd(b.CreateLShr(a, splat(13)), splat(1));
  Value* normal = b.CreateLShr(b.CreateAdd(b.CreateAdd(a, splat(0xc8000fffu)), odd), splat(13));
  Value* bits = b.CreateSelect(b.CreateICmpUGE(a, splat(0x47800000)), nanInf,
                               b.CreateSelect(b.CreateICmpULT(a, splat(0x38800000)), tiny, normal));
  return b.CreateOr(bits, sign);
}

// f32 lanes to bf16 bit patterns (i32 lanes): the top half, rounded to nearest even;
// NaN stays a quiet NaN.
Value* floatToBf16Bits(llvm::IRBuilder<>& b, Value* v) {
  auto* f32s = llvm::cast<llvm::FixedVectorType>(v->getType());
  auto* i32s = llvm::FixedVectorType::get(b.getInt32Ty(), f32s->getNumElements());
  auto splat = [&](uint32_t c) { return llvm::ConstantInt::get(i32s, c); };
  Value* u = b.CreateBitCast(v, i32s);
  Value* rounded = b.CreateLShr(b.CreateAdd(u, b.CreateAdd(splat(0x7fff), b.CreateAnd(b.CreateLShr(u, splat(16)), splat(1)))),
                                splat(16));
  Value* nan = b.CreateICmpUGT(b.CreateAnd(u, splat(0x7fffffff)), splat(0x7f800000));
  return b.CreateSelect(nan, b.CreateOr(b.CreateLShr(u, splat(16)), splat(0x40)), rounded);
}

} // namespace

std::unique_ptr<llvm::Module> emitKvAppendModule(llvm::LLVMContext& ctx, const KvAppendSpec& spec,
                                                 const MicroKernelShape& shape, const CpuFeatures& features) {
  validateKvAppendSpec(spec);
  auto module = std::make_unique<llvm::Module>(kvAppendFunctionName(spec), ctx);
  llvm::Function* fn = createKernelFunction(*module, kvAppendFunctionName(spec),
                                            {"x", "cache"}, {"rowBegin", "rowEnd", "past"});
  auto args = fn->arg_begin();
  Value *x = args++, *cache = args++, *rowBegin = args++, *rowEnd = args++, *past = args++;

  llvm::IRBuilder<> b(llvm::BasicBlock::Create(ctx, "entry", fn));
  const int W = shape.vectorFloats;
  auto* vecTy = llvm::FixedVectorType::get(b.getFloatTy(), W);
  auto* i32s = llvm::FixedVectorType::get(b.getInt32Ty(), W);
  llvm::Type* elemTy = spec.type == DType::F32 ? b.getFloatTy() : spec.type == DType::I8 ? b.getInt8Ty() : b.getInt16Ty();
  auto* elemVecTy = llvm::FixedVectorType::get(elemTy, W);
  auto at = [&](Value* base, Value* offset) { return b.CreateGEP(b.getFloatTy(), base, offset); };
  auto elementAt = [&](Value* base, Value* offset) { return b.CreateGEP(elemTy, base, offset); };
  // The first `lanes` elements of a narrowed vector: one store, or one per lane (a tail).
  auto storeElements = [&](Value* v, Value* dst, int64_t lanes) {
    if (lanes >= W) {
      b.CreateAlignedStore(v, dst, llvm::Align(1));
      return;
    }
    for (int64_t l = 0; l < lanes; ++l)
      b.CreateAlignedStore(b.CreateExtractElement(v, uint64_t(l)), elementAt(dst, b.getInt64(l)), llvm::Align(1));
  };
  // Columns [0, n) of src to dst in vectors: body(offset, lanes).
  auto vectors = [&](int64_t n, const std::function<void(Value*, int64_t)>& body) {
    const int64_t whole = n / W * W;
    if (whole > 0) LoopBuilder(b).forRange(b.getInt64(0), b.getInt64(whole), W, "col", [&](Value* c) { body(c, W); });
    if (n % W) body(b.getInt64(whole), n % W);
  };
  llvm::AllocaInst* maxSlot = b.CreateAlloca(vecTy); // i8: a head vector's running max
  const KvCacheLayout layout = spec.layout();
  const int64_t hd = spec.headDim;
  LoopBuilder(b).forRange(rowBegin, rowEnd, 1, "row", [&](Value* r) {
    Value* batch = b.CreateUDiv(r, b.getInt64(spec.seq));
    Value* position = b.CreateAdd(past, b.CreateURem(r, b.getInt64(spec.seq)));
    Value* entry = b.CreateGEP(b.getInt8Ty(), cache, b.CreateMul(batch, b.getInt64(layout.entryBytes())));
    Value* src = at(x, b.CreateAdd(b.CreateMul(r, b.getInt64(spec.ld)), b.getInt64(spec.col)));
    // Head vector t of the row to plane t at the position.
    LoopBuilder(b).forRange(b.getInt64(0), b.getInt64(2 * layout.kvHeads), 1, "head", [&](Value* t) {
      Value* plane = b.CreateGEP(b.getInt8Ty(), entry, b.CreateMul(t, b.getInt64(layout.planeBytes())));
      Value* dst = b.CreateGEP(
          b.getInt8Ty(), plane,
          b.CreateAdd(b.getInt64(layout.valuesOffset()), b.CreateMul(position, b.getInt64(layout.valueBytes()))));
      Value* head = at(src, b.CreateMul(t, b.getInt64(hd)));
      if (spec.type == DType::F32 || spec.type == DType::F16 || spec.type == DType::BF16) {
        vectors(hd, [&](Value* c, int64_t lanes) {
          Value* v = loadFirstLanes(b, vecTy, at(head, c), lanes);
          if (spec.type == DType::F32) return storeFirstLanes(b, v, at(dst, c), lanes, shape.maskedStores);
          Value* bits = nullptr;
          if (spec.type == DType::F16 && features.f16c) // vcvtps2ph
            bits = b.CreateBitCast(b.CreateFPTrunc(v, llvm::FixedVectorType::get(b.getHalfTy(), W)), elemVecTy);
          else
            bits = b.CreateTrunc(spec.type == DType::F16 ? floatToHalfBits(b, v) : floatToBf16Bits(b, v), elemVecTy);
          storeElements(bits, elementAt(dst, c), lanes);
        });
        return;
      }
      // i8: the vector's largest magnitude, then the values scaled to ±127.
      b.CreateStore(llvm::Constant::getNullValue(vecTy), maxSlot);
      vectors(hd, [&](Value* c, int64_t lanes) {
        Value* magnitude = b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, loadFirstLanes(b, vecTy, at(head, c), lanes));
        b.CreateStore(b.CreateBinaryIntrinsic(llvm::Intrinsic::maxnum, b.CreateLoad(vecTy, maxSlot), magnitude), maxSlot);
      });
      Value* m = b.CreateUnaryIntrinsic(llvm::Intrinsic::vector_reduce_fmax, b.CreateLoad(vecTy, maxSlot));
      Value* zero = llvm::ConstantFP::get(b.getFloatTy(), 0.0);
      Value* inverse = b.CreateSelect(b.CreateFCmpOGT(m, zero), b.CreateFDiv(llvm::ConstantFP::get(b.getFloatTy(), 127.0), m), zero);
      b.CreateAlignedStore(b.CreateFDiv(m, llvm::ConstantFP::get(b.getFloatTy(), 127.0)), at(plane, position),
                           llvm::Align(4));
      // Round to nearest even by adding and subtracting 1.5·2^23 (|x · 127/m| <= 127),
      // not llvm.rint: SSE2 has no vector rounding instruction.
      Value* magic = llvm::ConstantFP::get(vecTy, 12582912.0);
      vectors(hd, [&](Value* c, int64_t lanes) {
        Value* y = b.CreateFMul(loadFirstLanes(b, vecTy, at(head, c), lanes), b.CreateVectorSplat(W, inverse));
        Value* q = b.CreateFPToSI(b.CreateFSub(b.CreateFAdd(y, magic), magic), i32s);
        storeElements(b.CreateTrunc(q, elemVecTy), elementAt(dst, c), lanes);
      });
    });
  });
  b.CreateRetVoid();
  return module;
}

} // namespace nnc::codegen
