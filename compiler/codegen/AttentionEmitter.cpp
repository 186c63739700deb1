// Attention: the loop nest of AttentionEmitter.h. Accumulators live in allocas of the
// entry block (SROA turns them into registers); every loop bound that depends on
// `past` or on a block's causal limit is a runtime value, everything else a constant.
#include "compiler/codegen/AttentionEmitter.h"

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <stdexcept>
#include <vector>

#include "compiler/codegen/KernelFunction.h"
#include "compiler/codegen/LoopBuilder.h"
#include "compiler/codegen/PartialVector.h"
#include "compiler/codegen/StoredTable.h"
#include "compiler/codegen/VectorMath.h"

namespace nnc::codegen {

using llvm::Value;

std::string attentionFunctionName(const AttentionSpec& spec) { return "nnc_" + spec.key(); }

void validateAttentionSpec(const AttentionSpec& s) {
  auto fail = [&](const std::string& why) { throw std::invalid_argument("attention " + s.key() + ": " + why); };
  if (s.batch < 1 || s.seq < 1 || s.kvStride < 1 || s.heads < 1 || s.kvHeads < 1 || s.headDim < 1)
    fail("need batch, seq, kvStride, heads, kvHeads and headDim >= 1 (batch " + std::to_string(s.batch) + ")");
  if (s.heads % s.kvHeads != 0) fail("kvHeads must divide heads");
  if (s.seq > s.kvStride) fail("the queries' keys do not fit kvStride");
  if (s.qCol < 0 || s.qCol + s.heads * s.headDim > s.qLd || s.heads * s.headDim > s.outLd ||
      (!s.kvCache && (s.kCol < 0 || s.vCol < 0 || s.kCol + s.kvHeads * s.headDim > s.kvLd ||
                      s.vCol + s.kvHeads * s.headDim > s.kvLd)))
    fail("the heads do not fit their rows");
  if (!(s.scale > 0)) fail("the scale must be positive");
  if (s.kvType != DType::F32 && s.kvType != DType::F16 && s.kvType != DType::BF16 && s.kvType != DType::I8)
    fail("k and v are f32, f16, bf16 or i8");
  if (s.kvType != DType::F32 && !s.kvCache) fail("k and v below f32 are a KV cache (kvCache)");
}

namespace {

class AttentionBuilder {
public:
  AttentionBuilder(llvm::Function* fn, const AttentionSpec& spec, const MicroKernelShape& shape,
                   const CpuFeatures& features)
      : s_(spec), shape_(shape), features_(features), W_(shape.vectorFloats),
        b_(llvm::BasicBlock::Create(fn->getContext(), "entry", fn)), math_(b_, *fn->getParent(), shape.fma),
        vecTy_(llvm::FixedVectorType::get(b_.getFloatTy(), W_)), slots_(spec.keySlots()) {
    kvElemTy_ = spec.kvType == DType::F32 ? b_.getFloatTy()
                : spec.kvType == DType::I8 ? b_.getInt8Ty()
                                           : b_.getInt16Ty();
    auto arg = fn->arg_begin();
    q_ = arg++, k_ = arg++, v_ = arg++, scratch_ = arg++, out_ = arg++, unitBegin_ = arg++, unitEnd_ = arg++;
    past_ = arg++;
  }

  void emit() {
    const int64_t group = s_.heads / s_.kvHeads, hd = s_.headDim, R = AttentionSpec::kRowBlock;
    kvLen_ = b_.CreateAdd(past_, i64(s_.seq), "kvlen");
    LoopBuilder(b_).forRange(unitBegin_, unitEnd_, 1, "unit", [&](Value* u) {
      Value* batch = b_.CreateUDiv(u, i64(s_.kvHeads), "b");
      Value* g = b_.CreateURem(u, i64(s_.kvHeads), "g");
      Value* unitScratch = at(scratch_, b_.CreateMul(u, i64(s_.scratchPerUnit())));
      kt_ = unitScratch;
      p_ = s_.seq == 1 ? unitScratch : at(unitScratch, i64(hd * slots_)); // one query: no Kᵀ (scratchPerUnit)
      pointKeysAt(batch, g);
      // Query head h = g · group + hq onwards, in the rows of batch entry b from row0.
      auto pointHeadsAt = [&](Value* hq, Value* row0) {
        Value* h = b_.CreateAdd(b_.CreateMul(g, i64(group)), hq, "h");
        qBase_ = at(q_, b_.CreateAdd(b_.CreateMul(row0, i64(s_.qLd)), b_.CreateAdd(i64(s_.qCol), b_.CreateMul(h, i64(hd)))));
        outBase_ = at(out_, b_.CreateAdd(b_.CreateMul(row0, i64(s_.outLd)), b_.CreateMul(h, i64(hd))));
      };
      if (s_.seq == 1) { // decoding: the group's heads as the rows of blocks, K's rows as they are
        const int64_t perBlock = s_.oneQueryHeads(), whole = group / perBlock * perBlock;
        if (whole > 0)
          LoopBuilder(b_).forRange(i64(0), i64(whole), perBlock, "heads", [&](Value* hq) {
            pointHeadsAt(hq, batch);
            emitOneQuery(perBlock);
          }, 1);
        if (group % perBlock) {
          pointHeadsAt(i64(whole), batch);
          emitOneQuery(group % perBlock);
        }
        return;
      }
      transposeKeys(kBase_);
      LoopBuilder(b_).forRange(i64(0), i64(group), 1, "head", [&](Value* hq) {
        pointHeadsAt(hq, b_.CreateMul(batch, i64(s_.seq)));
        const int64_t whole = s_.seq / R * R;
        if (whole > 0)
          LoopBuilder(b_).forRange(i64(0), i64(whole), R, "block", [&](Value* i0) { emitBlock(R, i0); }, 1);
        if (s_.seq % R) emitBlock(s_.seq % R, i64(whole));
      });
    });
    b_.CreateRetVoid();
  }

private:
  // kBase_ and vBase_ at key 0 of K/V head g in batch entry b, rowLd_ elements from one
  // key to the next; a cache's i8 scales from kScales_ and vScales_ (one float a key).
  void pointKeysAt(Value* batch, Value* g) {
    if (!s_.kvCache) {
      rowLd_ = s_.kvLd;
      Value* row0 = b_.CreateAdd(b_.CreateMul(batch, i64(s_.kvStride * s_.kvLd)), b_.CreateMul(g, i64(s_.headDim)));
      kBase_ = kvAt(k_, b_.CreateAdd(row0, i64(s_.kCol)));
      vBase_ = kvAt(v_, b_.CreateAdd(row0, i64(s_.vCol)));
      return;
    }
    const KvCacheLayout layout = s_.cacheLayout();
    rowLd_ = layout.valueStride();
    auto plane = [&](Value* base, Value* t) {
      return b_.CreateGEP(
          b_.getInt8Ty(), base,
          b_.CreateAdd(b_.CreateMul(batch, i64(layout.entryBytes())), b_.CreateMul(t, i64(layout.planeBytes()))));
    };
    Value* kPlane = plane(k_, g);
    Value* vPlane = plane(v_, b_.CreateAdd(g, i64(s_.kvHeads)));
    kScales_ = kPlane, vScales_ = vPlane;
    kBase_ = b_.CreateGEP(b_.getInt8Ty(), kPlane, i64(layout.valuesOffset()));
    vBase_ = b_.CreateGEP(b_.getInt8Ty(), vPlane, i64(layout.valuesOffset()));
  }
  Value* i64(int64_t v) { return b_.getInt64(v); }
  Value* at(Value* ptr, Value* offset) { return b_.CreateGEP(b_.getFloatTy(), ptr, offset); }
  Value* kvAt(Value* ptr, Value* offset) { return b_.CreateGEP(kvElemTy_, ptr, offset); }
  // The i8 scale of key j in a plane's scales (kScales_, vScales_).
  Value* scaleOf(Value* scales, Value* j) {
    return b_.CreateAlignedLoad(b_.getFloatTy(), at(scales, j), llvm::Align(4));
  }
  // `lanes` elements of k or v at ptr widened to f32 (zeros past them): f16 with
  // vcvtph2ps when the target has F16C, else in integer code; bf16 by a shift; i8
  // sign-extended (the caller applies the scale).
  Value* loadKv(Value* ptr, int64_t lanes) {
    if (s_.kvType == DType::F32) return loadVec(ptr, lanes);
    auto* elems = llvm::FixedVectorType::get(kvElemTy_, unsigned(W_));
    auto* i32s = llvm::FixedVectorType::get(b_.getInt32Ty(), unsigned(W_));
    const llvm::Align align(s_.kvType == DType::I8 ? 1 : 2);
    Value* raw = nullptr;
    if (lanes >= W_) {
      raw = b_.CreateAlignedLoad(elems, ptr, align);
    } else {
      std::vector<llvm::Constant*> mask;
      for (int l = 0; l < W_; ++l) mask.push_back(b_.getInt1(l < lanes));
      raw = b_.CreateMaskedLoad(elems, ptr, align, llvm::ConstantVector::get(mask), llvm::Constant::getNullValue(elems));
    }
    switch (s_.kvType) {
    case DType::F16:
      if (features_.f16c) return b_.CreateFPExt(b_.CreateBitCast(raw, llvm::FixedVectorType::get(b_.getHalfTy(), W_)), vecTy_);
      return halfBitsToFloat(b_, b_.CreateZExt(raw, i32s));
    case DType::BF16:
      return b_.CreateBitCast(b_.CreateShl(b_.CreateZExt(raw, i32s), llvm::ConstantInt::get(i32s, 16)), vecTy_);
    default: return b_.CreateSIToFP(b_.CreateSExt(raw, i32s), vecTy_);
    }
  }
  Value* loadVec(Value* ptr, int64_t lanes = 0) { return loadFirstLanes(b_, vecTy_, ptr, lanes ? lanes : W_); }
  void storeVec(Value* v, Value* ptr, int64_t lanes = 0) {
    storeFirstLanes(b_, v, ptr, lanes ? lanes : W_, shape_.maskedStores);
  }
  Value* splat(Value* scalar) { return b_.CreateVectorSplat(W_, scalar); }
  // n rounded up to a multiple of m (a power of two).
  Value* roundUp(Value* n, int64_t m) { return b_.CreateAnd(b_.CreateAdd(n, i64(m - 1)), i64(~(m - 1))); }

  llvm::AllocaInst* slot(llvm::Type* ty) {
    llvm::Function* fn = b_.GetInsertBlock()->getParent();
    llvm::IRBuilder<> entry(&fn->getEntryBlock(), fn->getEntryBlock().begin());
    return entry.CreateAlloca(ty);
  }
  std::vector<llvm::AllocaInst*> zeroedVectors(size_t n) {
    std::vector<llvm::AllocaInst*> slots;
    for (size_t i = 0; i < n; ++i) {
      slots.push_back(slot(vecTy_));
      b_.CreateStore(llvm::Constant::getNullValue(vecTy_), slots.back());
    }
    return slots;
  }
  void accumulate(llvm::AllocaInst* acc, Value* a, Value* x) {
    b_.CreateStore(math_.mulAdd(a, x, b_.CreateLoad(vecTy_, acc)), acc);
  }

  // Kᵀ[c, j] = k[j, c] for the kvLen keys, zeros up to the next whole vector. A
  // cache stored below f32 is widened a vector of the row at a time (× its scale).
  void transposeKeys(Value* kBase) {
    const int64_t hd = s_.headDim;
    LoopBuilder(b_).forRange(i64(0), kvLen_, 1, "key", [&](Value* j) {
      Value* krow = kvAt(kBase, b_.CreateMul(j, i64(rowLd_)));
      if (s_.kvType != DType::F32) {
        Value* scale = s_.kvType == DType::I8 ? splat(scaleOf(kScales_, j)) : nullptr;
        for (int64_t c0 = 0; c0 < hd; c0 += W_) {
          const int64_t lanes = std::min<int64_t>(W_, hd - c0);
          Value* x = loadKv(kvAt(krow, i64(c0)), lanes);
          if (scale) x = b_.CreateFMul(x, scale);
          for (int64_t l = 0; l < lanes; ++l)
            b_.CreateAlignedStore(b_.CreateExtractElement(x, uint64_t(l)),
                                  at(kt_, b_.CreateAdd(i64((c0 + l) * slots_), j)), llvm::Align(4));
        }
        return;
      }
      LoopBuilder(b_).forRange(i64(0), i64(hd), 1, "c", [&](Value* c) {
        Value* x = b_.CreateAlignedLoad(b_.getFloatTy(), at(krow, c), llvm::Align(4));
        b_.CreateAlignedStore(x, at(kt_, b_.CreateAdd(b_.CreateMul(c, i64(slots_)), j)), llvm::Align(4));
      });
    });
    LoopBuilder(b_).forRange(kvLen_, roundUp(kvLen_, W_), 1, "pad", [&](Value* j) {
      LoopBuilder(b_).forRange(i64(0), i64(hd), 1, "c", [&](Value* c) {
        b_.CreateAlignedStore(llvm::ConstantFP::get(b_.getFloatTy(), 0.0),
                              at(kt_, b_.CreateAdd(b_.CreateMul(c, i64(slots_)), j)), llvm::Align(4));
      });
    });
  }

  // The keys row r of the block starting at query i0 attends to.
  Value* limit(Value* i0, int64_t r) { return limit(i0, i64(r)); }
  Value* limit(Value* i0, Value* r) {
    return s_.causal ? b_.CreateAdd(past_, b_.CreateAdd(i0, b_.CreateAdd(r, i64(1)))) : kvLen_;
  }

  void emitBlock(int64_t rows, Value* i0) {
    Value* keys = limit(i0, rows - 1); // the block's last row sees the most keys
    Value* keySpan = roundUp(keys, W_);
    Value* pairs = b_.CreateAnd(keySpan, i64(~(2 * int64_t(W_) - 1)));
    LoopBuilder(b_).forRange(i64(0), pairs, 2 * W_, "kv2", [&](Value* jv) { scores(rows, i0, jv, 2); }, 1);
    LoopBuilder(b_).forRange(pairs, keySpan, W_, "kv1", [&](Value* jv) { scores(rows, i0, jv, 1); }, 1);
    weightedValues(rows, i0, rows > 1 ? limit(i0, int64_t(0)) : keys, keys,
                   softmaxRows(rows, [&](Value* r) { return limit(i0, r); }, keySpan), s_.outLd);
  }

  // One query (decoding, seq 1): `heads` query heads of the unit's group, from qBase_
  // and outBase_ on, as the rows of one block (their q and out rows hd apart). Their
  // scores come straight from K's rows, W keys at a time: per head a vector of q · k
  // products per key, the W vectors summed lane-wise into one vector of W scores
  // (sumEachVector). The heads are inside the key blocks, so that a block's K rows come
  // from memory once for all of them, and AV reads each V row once for them all.
  // (Transposing K for one query moves every key twice to use it once; one head at a
  // time reads K and V once per head. Measured: docs/lowering.md, "Attention of one
  // query".)
  void emitOneQuery(int64_t heads) {
    const int64_t hd = s_.headDim, vectors = (hd + W_ - 1) / W_;
    auto lanes = [&](int64_t v) { return std::min<int64_t>(W_, hd - v * W_); };
    Value* keys = kvLen_; // causal or not, the one query sees every key
    Value* keySpan = roundUp(keys, W_);
    Value* lastKey = b_.CreateSub(keys, i64(1));
    LoopBuilder(b_).forRange(i64(0), keySpan, W_, "kv", [&](Value* jv) {
      // Lanes past the last key (masked by softmaxRow) read the last key's row, so
      // that no read goes past the cache's rows.
      std::vector<Value*> rows;
      for (int l = 0; l < W_; ++l)
        rows.push_back(l == 0 ? jv : b_.CreateBinaryIntrinsic(llvm::Intrinsic::umin, b_.CreateAdd(jv, i64(l)), lastKey));
      for (int64_t r = 0; r < heads; ++r) {
        std::vector<Value*> q, products;
        for (int64_t v = 0; v < vectors; ++v) q.push_back(loadVec(at(qBase_, i64(r * hd + v * W_)), lanes(v)));
        for (Value* j : rows) {
          Value* kRow = kvAt(kBase_, b_.CreateMul(j, i64(rowLd_)));
          Value* acc = nullptr;
          for (int64_t v = 0; v < vectors; ++v) {
            Value* k = loadKv(kvAt(kRow, i64(v * W_)), lanes(v));
            acc = acc ? math_.mulAdd(q[size_t(v)], k, acc) : b_.CreateFMul(q[size_t(v)], k);
          }
          if (s_.kvType == DType::I8) acc = b_.CreateFMul(acc, splat(scaleOf(kScales_, j)));
          products.push_back(acc);
        }
        storeVec(sumEachVector(std::move(products)), at(p_, b_.CreateAdd(i64(r * slots_), jv)));
      }
    }, 1);
    weightedValues(heads, i64(0), keys, keys, softmaxRows(heads, [&](Value*) { return keys; }, keySpan), hd);
  }
  // Lane l of the result: the sum of x[l]'s lanes (x: W vectors). A tree of two-input
  // shuffles: each level pairs neighbours and adds the halves of each one's segments,
  // so a vector holding m sums in segments of `seg` lanes becomes 2m in seg / 2.
  Value* sumEachVector(std::vector<Value*> x) {
    for (int64_t seg = W_; x.size() > 1; seg /= 2) {
      const int64_t half = seg / 2, sums = W_ / seg;
      std::vector<int> first, second;
      for (int64_t lane = 0; lane < W_; ++lane) {
        const int64_t slot = lane / half, from = slot < sums ? 0 : W_, start = from + slot % sums * seg + lane % half;
        first.push_back(int(start));
        second.push_back(int(start + half));
      }
      std::vector<Value*> next;
      for (size_t i = 0; i < x.size(); i += 2)
        next.push_back(b_.CreateFAdd(b_.CreateShuffleVector(x[i], x[i + 1], first),
                                     b_.CreateShuffleVector(x[i], x[i + 1], second)));
      x = std::move(next);
    }
    return x[0];
  }

  // P[r, jv + :nv·W] = q[i0 + r, :] · Kᵀ[:, jv + :nv·W]
  void scores(int64_t rows, Value* i0, Value* jv, int nv) {
    std::vector<llvm::AllocaInst*> acc = zeroedVectors(size_t(rows * nv));
    std::vector<Value*> qRows;
    for (int64_t r = 0; r < rows; ++r)
      qRows.push_back(at(qBase_, b_.CreateMul(b_.CreateAdd(i0, i64(r)), i64(s_.qLd))));
    LoopBuilder(b_).forRange(i64(0), i64(s_.headDim), 1, "c", [&](Value* c) {
      Value* ktRow = at(kt_, b_.CreateAdd(b_.CreateMul(c, i64(slots_)), jv));
      std::vector<Value*> kt;
      for (int v = 0; v < nv; ++v) kt.push_back(loadVec(at(ktRow, i64(v * W_))));
      for (int64_t r = 0; r < rows; ++r) {
        Value* qv = splat(b_.CreateAlignedLoad(b_.getFloatTy(), at(qRows[size_t(r)], c), llvm::Align(4)));
        for (int v = 0; v < nv; ++v) accumulate(acc[size_t(r * nv + v)], qv, kt[size_t(v)]);
      }
    }, 4);
    for (int64_t r = 0; r < rows; ++r)
      for (int v = 0; v < nv; ++v)
        storeVec(b_.CreateLoad(vecTy_, acc[size_t(r * nv + v)]),
                 at(p_, b_.CreateAdd(i64(r * slots_), b_.CreateAdd(jv, i64(v * W_)))));
  }

  // Rows 0 .. rows − 1 of P through softmaxRow (row r seeing keysOf(r) keys); returns
  // their sums. A loop, not unrolled: the exp is the kernel's largest code, and once per
  // row it made the prefill's attention kernel the longest compile of TinyLlama's prompt
  // program (Zen 3: 208 ms of the 283 ms the program's kernels took on two threads).
  std::vector<Value*> softmaxRows(int64_t rows, const std::function<Value*(Value* r)>& keysOf, Value* keySpan) {
    llvm::AllocaInst* rowSums = slot(llvm::ArrayType::get(b_.getFloatTy(), uint64_t(rows)));
    auto sumOf = [&](Value* r) { return b_.CreateGEP(rowSums->getAllocatedType(), rowSums, {i64(0), r}); };
    LoopBuilder(b_).forRange(i64(0), i64(rows), 1, "softmax", [&](Value* r) {
      b_.CreateStore(softmaxRow(r, keysOf(r), keySpan), sumOf(r));
    }, 1);
    std::vector<Value*> sums;
    for (int64_t r = 0; r < rows; ++r) sums.push_back(b_.CreateLoad(b_.getFloatTy(), sumOf(i64(r))));
    return sums;
  }

  // Row r of P over [0, keySpan): exp(scale·s − max) for the keys below `keys`, 0 after
  // them; returns the sum. Its two key loops are not unrolled either: LLVM's runtime
  // unrolling copied the exp with them, and without it TinyLlama's prompt attention
  // kernel compiled in ~75 ms instead of ~115 (Zen 3, one thread) and ran no slower.
  Value* softmaxRow(Value* r, Value* keys, Value* keySpan) {
    const float inf = std::numeric_limits<float>::infinity();
    Value* row = at(p_, b_.CreateMul(r, i64(slots_)));
    Value* scale = llvm::ConstantFP::get(vecTy_, s_.scale);
    Value* minusInf = llvm::ConstantFP::get(vecTy_, -inf);
    std::vector<llvm::Constant*> lane;
    for (int l = 0; l < W_; ++l) lane.push_back(b_.getInt32(uint32_t(l)));
    Value* iota = llvm::ConstantVector::get(lane);
    // scale·s where the lane's key is below `keys`, else −inf
    auto scaled = [&](Value* jv, Value** keep) {
      Value* left = b_.CreateTrunc(b_.CreateSub(keys, jv), b_.getInt32Ty()); // <= W·2 past the span, no overflow
      *keep = b_.CreateICmpSLT(iota, b_.CreateVectorSplat(W_, left));
      return b_.CreateSelect(*keep, b_.CreateFMul(loadVec(at(row, jv)), scale), minusInf);
    };
    llvm::AllocaInst* maxSlot = slot(vecTy_);
    b_.CreateStore(minusInf, maxSlot);
    LoopBuilder(b_).forRange(i64(0), keySpan, W_, "smax", [&](Value* jv) {
      Value* keep;
      Value* t = scaled(jv, &keep);
      b_.CreateStore(b_.CreateBinaryIntrinsic(llvm::Intrinsic::maximum, b_.CreateLoad(vecTy_, maxSlot), t), maxSlot);
    }, 1);
    Value* rowMax = splat(b_.CreateUnaryIntrinsic(llvm::Intrinsic::vector_reduce_fmaximum, b_.CreateLoad(vecTy_, maxSlot)));
    llvm::AllocaInst* sumSlot = zeroedVectors(1)[0];
    LoopBuilder(b_).forRange(i64(0), keySpan, W_, "sexp", [&](Value* jv) {
      Value* keep;
      Value* t = scaled(jv, &keep);
      Value* e = b_.CreateSelect(keep, math_.exp(b_.CreateFSub(t, rowMax)), llvm::Constant::getNullValue(vecTy_));
      storeVec(e, at(row, jv));
      b_.CreateStore(b_.CreateFAdd(b_.CreateLoad(vecTy_, sumSlot), e), sumSlot);
    }, 1);
    return b_.CreateFAddReduce(llvm::ConstantFP::get(b_.getFloatTy(), 0.0), b_.CreateLoad(vecTy_, sumSlot));
  }

  // out[i0 + r, :] = Σ_{j < keys} P[r, j] · v[j, :] / sums[r], in chunks of head
  // vectors that keep rows × chunk accumulators within the registers; output rows
  // outRowStride floats apart (query rows: outLd; one query's heads: headDim). Every
  // row sees the keys below `shared`; a key in [shared, keys) only the rows whose
  // limit(i0, r) it is below (a causal block's diagonal): the others skip it, rather
  // than add 0 · v, so that a NaN or inf in a later position's value never reaches an
  // earlier row (0 · NaN is NaN: it reached the rows before it in its block of queries,
  // which a decode step, seeing only the keys before it, never does).
  void weightedValues(int64_t rows, Value* i0, Value* shared, Value* keys, const std::vector<Value*>& sums,
                      int64_t outRowStride) {
    const int64_t hd = s_.headDim, vectors = (hd + W_ - 1) / W_;
    const int64_t chunk = std::clamp<int64_t>((shape_.registers - 4) / rows, 1, vectors);
    for (int64_t v0 = 0; v0 < vectors; v0 += chunk) {
      const int64_t n = std::min(chunk, vectors - v0);
      auto lanes = [&](int64_t v) { return std::min<int64_t>(W_, hd - (v0 + v) * W_); };
      std::vector<llvm::AllocaInst*> acc = zeroedVectors(size_t(rows * n));
      auto key = [&](Value* j, bool diagonal) {
        Value* vRow = kvAt(vBase_, b_.CreateAdd(b_.CreateMul(j, i64(rowLd_)), i64(v0 * W_)));
        std::vector<Value*> vv;
        for (int64_t v = 0; v < n; ++v) vv.push_back(loadKv(kvAt(vRow, i64(v * W_)), lanes(v)));
        Value* scale = s_.kvType == DType::I8 ? scaleOf(vScales_, j) : nullptr; // p · s, once per key
        for (int64_t r = 0; r < rows; ++r) {
          Value* p = b_.CreateAlignedLoad(b_.getFloatTy(), at(p_, b_.CreateAdd(i64(r * slots_), j)), llvm::Align(4));
          if (scale) p = b_.CreateFMul(p, scale);
          Value* sees = diagonal ? b_.CreateICmpSLT(j, limit(i0, r)) : nullptr;
          for (int64_t v = 0; v < n; ++v) {
            llvm::AllocaInst* a = acc[size_t(r * n + v)];
            Value* before = b_.CreateLoad(vecTy_, a);
            Value* after = math_.mulAdd(splat(p), vv[size_t(v)], before);
            b_.CreateStore(sees ? b_.CreateSelect(sees, after, before) : after, a);
          }
        }
      };
      LoopBuilder(b_).forRange(i64(0), shared, 1, "key", [&](Value* j) { key(j, false); }, 2);
      if (shared != keys) LoopBuilder(b_).forRange(shared, keys, 1, "diag", [&](Value* j) { key(j, true); }, 1);
      for (int64_t r = 0; r < rows; ++r) {
        Value* outRow = at(outBase_, b_.CreateAdd(b_.CreateMul(b_.CreateAdd(i0, i64(r)), i64(outRowStride)), i64(v0 * W_)));
        Value* sum = splat(sums[size_t(r)]);
        for (int64_t v = 0; v < n; ++v)
          storeVec(b_.CreateFDiv(b_.CreateLoad(vecTy_, acc[size_t(r * n + v)]), sum), at(outRow, i64(v * W_)),
                   lanes(v));
      }
    }
  }

  const AttentionSpec& s_;
  const MicroKernelShape& shape_;
  CpuFeatures features_;
  int W_;
  llvm::IRBuilder<> b_;
  VectorMath math_;
  llvm::FixedVectorType* vecTy_;
  int64_t slots_;
  int64_t rowLd_ = 0; // elements of kvType from one key's k (or v) to the next
  Value *q_, *k_, *v_, *scratch_, *out_, *unitBegin_, *unitEnd_, *past_;
  llvm::Type* kvElemTy_;
  Value *kScales_ = nullptr, *vScales_ = nullptr;
  Value *kvLen_ = nullptr, *kBase_ = nullptr, *kt_ = nullptr, *p_ = nullptr, *vBase_ = nullptr, *qBase_ = nullptr, *outBase_ = nullptr;
};

} // namespace

std::unique_ptr<llvm::Module> emitAttentionModule(llvm::LLVMContext& ctx, const AttentionSpec& spec,
                                                  const MicroKernelShape& shape, const CpuFeatures& features) {
  validateAttentionSpec(spec);
  auto module = std::make_unique<llvm::Module>(attentionFunctionName(spec), ctx);
  llvm::Function* fn = createKernelFunction(*module, attentionFunctionName(spec),
                                            {"q", "k", "v", "scratch", "out"}, {"unitBegin", "unitEnd", "past"});
  AttentionBuilder(fn, spec, shape, features).emit();
  return module;
}

} // namespace nnc::codegen
