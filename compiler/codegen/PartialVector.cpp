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

llvm::Value* stridedLanes(llvm::IRBuilder<>& b, std::vector<llvm::Value*> pieces, int64_t stride, int64_t lanes) {
  const int64_t W = llvm::cast<llvm::FixedVectorType>(pieces[0]->getType())->getNumElements();
  while (pieces.size() > 1) {
    if (pieces.size() % 2) pieces.push_back(llvm::Constant::getNullValue(pieces[0]->getType()));
    std::vector<llvm::Value*> joined;
    for (size_t k = 0; k < pieces.size(); k += 2) {
      const auto n = int(llvm::cast<llvm::FixedVectorType>(pieces[k]->getType())->getNumElements());
      std::vector<int> all;
      for (int l = 0; l < 2 * n; ++l) all.push_back(l);
      joined.push_back(b.CreateShuffleVector(pieces[k], pieces[k + 1], all));
    }
    pieces = joined;
  }
  std::vector<int> every;
  for (int64_t l = 0; l < W; ++l) every.push_back(l < lanes ? int(l * stride) : 0);
  return b.CreateShuffleVector(pieces[0], every);
}

} // namespace nnc::codegen
