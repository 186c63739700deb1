// Widening loads from tables stored below f32 (StoredTable.h).
#include "compiler/codegen/StoredTable.h"

#include <stdexcept>

namespace nnc::codegen {

using llvm::Value;

Value* halfBitsToFloat(llvm::IRBuilder<>& b, Value* h) {
  auto* i32s = llvm::cast<llvm::FixedVectorType>(h->getType());
  auto* f32s = llvm::FixedVectorType::get(b.getFloatTy(), i32s->getNumElements());
  auto splat = [&](uint32_t c) { return llvm::ConstantInt::get(i32s, c); };
  Value* magnitude = b.CreateShl(b.CreateAnd(h, splat(0x7fff)), splat(13));
  Value* exponent = b.CreateAnd(magnitude, splat(0x0f800000));
  Value* normal = b.CreateAdd(magnitude, splat(112u << 23));
  Value* infNan = b.CreateAdd(normal, splat(112u << 23));
  Value* small = b.CreateBitCast(b.CreateFSub(b.CreateBitCast(b.CreateAdd(normal, splat(1u << 23)), f32s),
                                              llvm::ConstantFP::get(f32s, 0x1p-14)),
                                 i32s);
  Value* bits = b.CreateSelect(b.CreateICmpEQ(exponent, splat(0x0f800000)), infNan,
                               b.CreateSelect(b.CreateICmpEQ(exponent, splat(0)), small, normal));
  Value* sign = b.CreateShl(b.CreateAnd(h, splat(0x8000)), splat(16));
  return b.CreateBitCast(b.CreateOr(bits, sign), f32s);
}

Value* loadScales(llvm::IRBuilder<>& b, const PanelLayout& L, Value* packed, Value* index, int lanes) {
  Value* base = b.CreateGEP(b.getInt8Ty(), packed, b.getInt64(L.scalesOffsetBytes()), "scales");
  const bool bf16 = L.scaleBytes() == 2;
  llvm::Type* element = bf16 ? b.getInt16Ty() : b.getFloatTy();
  llvm::Type* type = lanes == 1 ? element : llvm::FixedVectorType::get(element, unsigned(lanes));
  Value* v = b.CreateAlignedLoad(type, b.CreateGEP(element, base, index), llvm::Align(uint64_t(lanes * L.scaleBytes())));
  if (!bf16) return v;
  // bf16: the top half of an f32.
  llvm::Type* i32 = lanes == 1 ? static_cast<llvm::Type*>(b.getInt32Ty()) : llvm::FixedVectorType::get(b.getInt32Ty(), unsigned(lanes));
  llvm::Type* f32 = lanes == 1 ? static_cast<llvm::Type*>(b.getFloatTy()) : llvm::FixedVectorType::get(b.getFloatTy(), unsigned(lanes));
  return b.CreateBitCast(b.CreateShl(b.CreateZExt(v, i32), llvm::ConstantInt::get(i32, 16)), f32);
}

Value* loadStoredRow(llvm::IRBuilder<>& b, const PanelLayout& L, Value* table, Value* row, Value* col, int64_t lanes,
                     int W) {
  const DType type = L.type;
  if (type == DType::F32 || L.NR != (type == DType::I4 ? 2 : 1))
    throw std::invalid_argument("loadStoredRow: not a low-precision rowTableLayout");
  auto* i32s = llvm::FixedVectorType::get(b.getInt32Ty(), unsigned(W));
  auto* f32s = llvm::FixedVectorType::get(b.getFloatTy(), unsigned(W));
  Value* K = b.getInt64(L.K);
  const bool i4 = type == DType::I4;
  // Element (row, col): row · K + col; i4: byte (row / 2) · K + col, nibble row mod 2.
  Value* first = b.CreateAdd(b.CreateMul(i4 ? b.CreateLShr(row, 1) : row, K), col);
  // i4: shift the nibble to bits 28-31, then arithmetic-shift it back (sign extension).
  Value* up = i4 ? b.CreateSub(b.getInt32(28), b.CreateMul(b.CreateTrunc(b.CreateAnd(row, 1), b.getInt32Ty()),
                                                            b.getInt32(4)))
                 : nullptr;
  Value* bits = llvm::Constant::getNullValue(i32s);
  for (int64_t j = 0; j < lanes && j < W; ++j) {
    Value* index = b.CreateAdd(first, b.getInt64(j));
    Value* v = nullptr;
    if (type == DType::F16 || type == DType::BF16)
      v = b.CreateZExt(b.CreateLoad(b.getInt16Ty(), b.CreateGEP(b.getInt16Ty(), table, index)), b.getInt32Ty());
    else if (type == DType::I8)
      v = b.CreateSExt(b.CreateLoad(b.getInt8Ty(), b.CreateGEP(b.getInt8Ty(), table, index)), b.getInt32Ty());
    else {
      Value* byte = b.CreateZExt(b.CreateLoad(b.getInt8Ty(), b.CreateGEP(b.getInt8Ty(), table, index)), b.getInt32Ty());
      v = b.CreateAShr(b.CreateShl(byte, up), b.getInt32(28));
    }
    bits = b.CreateInsertElement(bits, v, uint64_t(j));
  }
  if (type == DType::F16) return halfBitsToFloat(b, bits);
  if (type == DType::BF16) return b.CreateBitCast(b.CreateShl(bits, llvm::ConstantInt::get(i32s, 16)), f32s);
  Value* q = b.CreateSIToFP(bits, f32s);
  auto scaleAt = [&](Value* index) { return loadScales(b, L, table, index, 1); };
  if (type == DType::I8) return b.CreateFMul(q, b.CreateVectorSplat(unsigned(W), scaleAt(row))); // scaleIndex(row, 0)
  // i4: lane j's group g = (col + j) / group at scaleIndex(row, g) = ((row / 2) · groups + g) · 2 + row mod 2.
  Value* groups = b.getInt64(L.groups());
  Value* pairBase = b.CreateAdd(b.CreateMul(b.CreateMul(b.CreateLShr(row, 1), groups), b.getInt64(2)),
                                b.CreateAnd(row, 1));
  Value* s = llvm::Constant::getNullValue(f32s);
  for (int64_t j = 0; j < lanes && j < W; ++j) {
    Value* g = b.CreateUDiv(b.CreateAdd(col, b.getInt64(j)), b.getInt64(L.group));
    s = b.CreateInsertElement(s, scaleAt(b.CreateAdd(pairBase, b.CreateMul(g, b.getInt64(2)))), uint64_t(j));
  }
  return b.CreateFMul(q, s);
}

} // namespace nnc::codegen
