#include "compiler/codegen/PartialVector.h"

#include <vector>

namespace nnc::codegen {

llvm::Value* loadFirstLanes(llvm::IRBuilder<>& b, llvm::FixedVectorType* ty, llvm::Value* ptr,
                            int64_t lanes, float fill) {
  const int64_t W = ty->getNumElements();
  if (lanes >= W) return b.CreateAlignedLoad(ty, ptr, llvm::Align(4));
  std::vector<llvm::Constant*> bits;
  for (int64_t l = 0; l < W; ++l) bits.push_back(b.getInt1(l < lanes));
  return b.CreateMaskedLoad(ty, ptr, llvm::Align(4), llvm::ConstantVector::get(bits),
                            llvm::ConstantFP::get(ty, fill));
}

void storeFirstLanes(llvm::IRBuilder<>& b, llvm::Value* v, llvm::Value* ptr, int64_t lanes,
                     bool masked) {
  const int64_t W = llvm::cast<llvm::FixedVectorType>(v->getType())->getNumElements();
  if (lanes >= W) {
    b.CreateAlignedStore(v, ptr, llvm::Align(4));
    return;
  }
  if (masked) {
    std::vector<llvm::Constant*> bits;
    for (int64_t l = 0; l < W; ++l) bits.push_back(b.getInt1(l < lanes));
    b.CreateMaskedStore(v, ptr, llvm::Align(4), llvm::ConstantVector::get(bits));
    return;
  }
  for (int64_t offset = 0, piece = W / 2; offset < lanes; offset += piece) {
    while (piece > lanes - offset) piece /= 2;
    llvm::Value* at = b.CreateGEP(b.getFloatTy(), ptr, b.getInt64(offset));
    if (piece == 1) {
      b.CreateAlignedStore(b.CreateExtractElement(v, uint64_t(offset)), at, llvm::Align(4));
      continue;
    }
    std::vector<int> lanesOfPiece;
    for (int64_t l = 0; l < piece; ++l) lanesOfPiece.push_back(int(offset + l));
    b.CreateAlignedStore(b.CreateShuffleVector(v, lanesOfPiece), at, llvm::Align(4));
  }
}

} // namespace nnc::codegen
