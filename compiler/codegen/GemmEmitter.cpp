// The GEMM generator: loop nest, register-blocked micro-kernel and epilogue.
// Reading order: emitGemmModule → GemmBuilder::emitPanel → emitBlock → emitKStep /
// emitEpilogue. The only machine facts used are the MicroKernelShape fields.
#include "compiler/codegen/GemmEmitter.h"

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/IntrinsicsX86.h>

#include <algorithm>
#include <functional>
#include <stdexcept>
#include <vector>

#include "compiler/codegen/DotGemmEmitter.h"
#include "compiler/codegen/KernelFunction.h"
#include "compiler/codegen/LoopBuilder.h"
#include "compiler/codegen/PackLayout.h"
#include "compiler/codegen/PartialVector.h"
#include "compiler/codegen/StoredTable.h"
#include "compiler/codegen/VectorMath.h"

namespace nnc::codegen {

using llvm::Value;

namespace {

constexpr int kUnrollK = 4; // a multiple of every accumulatorSets() value
static_assert(kWindowChannelMultiple % kUnrollK == 0, "a conv window's tap is whole unrolled k steps");

class GemmBuilder {
public:
  GemmBuilder(llvm::Function* fn, const GemmSpec& spec, const MicroKernelShape& shape, const CpuFeatures& features)
      : spec_(spec), shape_(shape), features_(features), layout_(gemmPanelLayout(spec, shape)),
        b_(llvm::BasicBlock::Create(fn->getContext(), "entry", fn)),
        math_(b_, *fn->getParent(), shape.fma), fn_(fn),
        vecTy_(llvm::FixedVectorType::get(b_.getFloatTy(), shape.vectorFloats)),
        vectorsPerRow_(shape.NR / shape.vectorFloats) {
    auto arg = fn->arg_begin();
    A_ = arg++; B_ = arg++; bias_ = arg++; residual_ = arg++; C_ = arg++; aPackArg_ = arg++;
    panelBegin_ = arg++; panelEnd_ = arg++; rowBlockBegin_ = arg++; rowBlockEnd_ = arg++;
    switch (spec.weightType) {
    case DType::F32: unitTy_ = b_.getFloatTy(); break;
    case DType::F16: case DType::BF16: unitTy_ = b_.getInt16Ty(); break;
    default: unitTy_ = b_.getInt8Ty(); break; // i8; i4: bytes of two weights
    }
    if (spec.weightType == DType::I4 && (shape.NR / shape.vectorFloats) % 2 != 0)
      throw std::invalid_argument("gemm: i4 weights need an even number of vectors per panel (row " +
                                  std::string(shape.family) + ")");
  }

  void emit() {
    blocking_ = gemmBlocking(spec_, shape_);
    blockPanels_ = blockPanels(spec_, shape_);
    fullBlocks_ = spec_.M / shape_.MR;
    if (blocking_.packA) aPack_ = aPackArg_; // the caller's buffer of blocking_.packedAFloats
    wideB_ = widensPanels(spec_, shape_, blocking_);
    rowsDot_ = spec_.weightRows && spec_.M <= shape_.MR;
    if (const KernelScratch scratch = kernelScratch(spec_, shape_, blocking_); scratch.panelCopyFloats > 0)
      wide_ = b_.CreateGEP(b_.getInt8Ty(), aPackArg_, i64(scratch.panelCopyOffset), "panelcopy");
    LoopBuilder loops(b_);
    // NC chunks of the task's panels.
    const int64_t panels = (spec_.N + shape_.NR - 1) / shape_.NR;
    chunks(panelBegin_, panelEnd_, blocking_.panelsPerChunk, panels, "jc", [&](Value* begin, Value* end) {
      jcBegin_ = begin, jcEnd_ = end;
      const int64_t KC = blocking_.KC, kb = blocking_.kBlocks;
      if (kb == 1) return emitKBlock(i64(0), spec_.K, b_.getTrue(), true);
      // The blocks before the last are one copy of the block's code, the first told
      // apart at run time (its epilogue starts the sums; emitEpilogue): a copy of the
      // loop nest a block kind made K-blocked kernels slow to compile (128 × 2048 ×
      // 5632 over f16, i8 or i4 weights, the f32 kernel widening them: ~200 ms).
      loops.forRange(i64(0), i64(kb - 1), 1, "kb", [&](Value* k) {
        emitKBlock(b_.CreateMul(k, i64(KC), "k0"), KC, b_.CreateICmpEQ(k, i64(0), "firstk"), false);
      });
      emitKBlock(i64((kb - 1) * KC), spec_.K - (kb - 1) * KC, b_.getFalse(), true);
    });
    b_.CreateRetVoid();
  }

private:
  Value* i64(int64_t v) { return b_.getInt64(v); }

  void chunks(Value* begin, Value* end, int64_t per, int64_t total, const char* name,
              const std::function<void(Value*, Value*)>& body) {
    LoopBuilder(b_).forChunks(begin, end, per, total, name, body);
  }
  Value* minimum(Value* a, Value* b, const char* name) { return LoopBuilder(b_).minimum(a, b, name); }

  // K block [k0, k0 + kLen) over the current NC chunk: MC chunks of the task's row
  // blocks, then the chunk's panels, then its row blocks.
  void emitKBlock(Value* k0, int64_t kLen, Value* first, bool last) {
    k0_ = k0, kLen_ = kLen, firstK_ = first, lastK_ = last;
    planNextPanelPrefetch();
    LoopBuilder loops(b_);
    const int64_t rowBlocks = (spec_.M + shape_.MR - 1) / shape_.MR;
    chunks(rowBlockBegin_, rowBlockEnd_, blocking_.rowBlocksPerChunk, rowBlocks, "ic",
           [&](Value* begin, Value* end) {
      icBegin_ = begin, icEnd_ = end;
      icFullEnd_ = minimum(icEnd_, i64(fullBlocks_), "icfullend");
      if (aPack_) emitPackA(kLen);
      Value* singlesBegin = jcBegin_;
      if (blockPanels_ > 1) {
        // Few rows: several panels per block (independent weight streams in flight).
        const int64_t B = blockPanels_;
        Value* fullEnd = minimum(jcEnd_, i64(layout_.fullPanels()), "fullend");
        Value* groups = b_.CreateSDiv(b_.CreateSub(fullEnd, jcBegin_), i64(B));
        groups = b_.CreateSelect(b_.CreateICmpSGT(groups, i64(0)), groups, i64(0));
        singlesBegin = b_.CreateAdd(jcBegin_, b_.CreateMul(groups, i64(B)), "singles");
        loops.forRange(jcBegin_, singlesBegin, B, "panels",
                       [&](Value* p) { emitPanel(p, B * shape_.NR); });
      }
      loops.forRange(singlesBegin, jcEnd_, 1, "panel", [&](Value* p) {
        if (layout_.tailColumns() == 0) return emitPanel(p, shape_.NR);
        // No full panel: the only panel is the tail (no code for a full one).
        if (layout_.fullPanels() == 0) {
          if (!layout_.hasRowTail() || lastK_) emitPanel(p, layout_.tailColumns());
          return;
        }
        Value* isTail = b_.CreateICmpEQ(p, i64(layout_.fullPanels()));
        // A row tail is computed over the whole K at once, in the last K block.
        const bool tailHere = !layout_.hasRowTail() || lastK_;
        loops.ifElse(isTail, [&] { if (tailHere) emitPanel(p, layout_.tailColumns()); },
                     [&] { emitPanel(p, shape_.NR); });
      });
    });
  }

  // Copies A[rows of the MC chunk][k0 .. k0+kLen) into aPack_, MR-row micro-panels
  // stored k-major: block b (from icBegin), row i, step k at b·KC·MR + k·MR + i.
  // Full row blocks go W steps of k at a time (emitPackTile); the M tail block and the
  // K % W steps are copied one float at a time.
  void emitPackA(int64_t kLen) {
    LoopBuilder loops(b_);
    const int64_t MR = shape_.MR, W = shape_.vectorFloats;
    const bool tiles = MR <= W; // a W×W transpose holds a whole row block
    const int64_t tiledK = tiles ? kLen / W * W : 0;
    auto dstOf = [&](Value* blk) {
      return b_.CreateGEP(b_.getFloatTy(), aPack_,
                          b_.CreateMul(b_.CreateSub(blk, icBegin_), i64(blocking_.KC * MR)));
    };
    auto srcOf = [&](Value* row) {
      return b_.CreateGEP(b_.getFloatTy(), A_, b_.CreateAdd(b_.CreateMul(row, i64(spec_.K)), k0_));
    };
    // Scalar copy of rows [0, rows) × steps [kBegin, kLen) of the block at row0.
    auto copyScalar = [&](Value* row0, Value* rows, Value* dst0, int64_t kBegin) {
      loops.forRange(i64(0), rows, 1, "packrow", [&](Value* r) {
        Value* src = srcOf(b_.CreateAdd(row0, r));
        Value* dst = b_.CreateGEP(b_.getFloatTy(), dst0, r);
        loops.forRange(i64(kBegin), i64(kLen), 1, "packk", [&](Value* k) {
          Value* v = b_.CreateLoad(b_.getFloatTy(), b_.CreateGEP(b_.getFloatTy(), src, k));
          b_.CreateStore(v, b_.CreateGEP(b_.getFloatTy(), dst, b_.CreateMul(k, i64(MR))));
        });
      });
    };
    loops.forRange(icBegin_, icEnd_, 1, "packblk", [&](Value* blk) {
      Value* row0 = b_.CreateMul(blk, i64(MR));
      Value* dst0 = dstOf(blk);
      auto full = [&] {
        if (tiledK > 0)
          loops.forRange(i64(0), i64(tiledK), W, "packtile",
                         [&](Value* k) { emitPackTile(row0, dst0, k); }, 1);
        if (tiledK < kLen) copyScalar(row0, i64(MR), dst0, tiledK);
      };
      if (spec_.M % MR == 0) return full();
      loops.ifElse(b_.CreateICmpSLT(blk, i64(fullBlocks_)), full, [&] {
        copyScalar(row0, i64(spec_.M % MR), dst0, 0);
      });
    });
  }

  // Steps [k, k+W) of the MR rows from row0: W-float loads of each row (rows past MR
  // are zero), a W×W transpose (log2 W rounds of swapping off-diagonal h×h blocks),
  // then one W-float store per step at dst0 + (k+j)·MR. Stores overlap (MR <= W): each
  // overwrites the previous one's W - MR spare lanes, and the last one's spill lands
  // in the next micro-panel (written later) or in the buffer's W floats of padding.
  void emitPackTile(Value* row0, Value* dst0, Value* k) {
    const int W = shape_.vectorFloats;
    const int64_t MR = shape_.MR;
    std::vector<Value*> v(size_t(W), llvm::Constant::getNullValue(vecTy_));
    for (int64_t i = 0; i < MR; ++i)
      v[size_t(i)] = load(b_.CreateGEP(b_.getFloatTy(),
                                       b_.CreateGEP(b_.getFloatTy(), A_,
                                                    b_.CreateMul(b_.CreateAdd(row0, i64(i)), i64(spec_.K))),
                                       b_.CreateAdd(k0_, k)),
                          W);
    transposeSquare(v);
    for (int j = 0; j < W; ++j)
      b_.CreateAlignedStore(
          v[size_t(j)],
          b_.CreateGEP(b_.getFloatTy(), dst0, b_.CreateMul(b_.CreateAdd(k, i64(j)), i64(MR))),
          llvm::Align(4));
  }

  // v (W vectors of W lanes, row j = v[j]) transposed in place: log2 W rounds of
  // swapping off-diagonal h×h blocks.
  void transposeSquare(std::vector<Value*>& v) {
    const int W = shape_.vectorFloats;
    for (int h = W / 2; h >= 1; h /= 2) {
      std::vector<int> lo(static_cast<size_t>(W)), hi(static_cast<size_t>(W));
      for (int l = 0; l < W; ++l) {
        lo[size_t(l)] = (l & h) ? W + l - h : l;
        hi[size_t(l)] = (l & h) ? W + l : l + h;
      }
      for (int j = 0; j < W; ++j) {
        if (j & h) continue;
        Value* a = v[size_t(j)];
        Value* c = v[size_t(j + h)];
        v[size_t(j)] = b_.CreateShuffleVector(a, c, lo);
        v[size_t(j + h)] = b_.CreateShuffleVector(a, c, hi);
      }
    }
  }

  // GemmSpec::weightRows: row pointer n of the table B_ (channel n's K floats).
  Value* weightRow(Value* n) {
    return b_.CreateLoad(b_.getPtrTy(), b_.CreateGEP(b_.getPtrTy(), B_, n), "wrow");
  }

  // GemmSpec::weightRows, one panel (channels n0 .. n0 + columns) of the MC chunk.
  // Few rows (rowsDot_: M <= MR, one row block): dot products along each weight row
  // (emitRowsDot). More rows: this K block of the panel's rows is transposed into the
  // copy wide_ (in aPack) in the panel layout (emitTransposeRows), which the row blocks
  // then read as they read a widened panel: the products, their order and hence the bits
  // are those of the same GEMM over packed weights.
  void emitRowsPanel(Value* n0, int64_t columns) {
    if (rowsDot_) return emitRowsDot(n0, columns);
    emitTransposeRows(n0, columns);
    Value* wide = b_.CreateGEP(b_.getFloatTy(), wide_, b_.CreateNeg(b_.CreateMul(k0_, i64(shape_.NR))), "widepanel");
    LoopBuilder loops(b_);
    readWide_ = true;
    // Weights from beyond L2: the transposing pass would wait on DRAM for each panel, so
    // the row blocks bring the next panel's rows into L2 as they go, row block r of the
    // chunk's R the r-th share of its rows, a line per row every four unrolled steps
    // (one prefetch per row and step: the same line three times in four).
    const int64_t sharing = std::min<int64_t>(blocking_.rowBlocksPerChunk, fullBlocks_);
    const bool prefetchNext = sharing >= 2 && kLen_ >= kUnrollK && weightsOutgrowL2(spec_);
    if (fullBlocks_ > 0)
      loops.forRange(icBegin_, icFullEnd_, 1, "rowblock", [&](Value* blk) {
        if (prefetchNext) {
          const int64_t per = (shape_.NR + sharing - 1) / sharing;
          Value* first = b_.CreateAdd(b_.CreateAdd(n0, i64(shape_.NR)), b_.CreateMul(b_.CreateSub(blk, icBegin_), i64(per)));
          for (int64_t t = 0; t < per; ++t) {
            Value* n = b_.CreateAdd(first, i64(t));
            n = b_.CreateSelect(b_.CreateICmpSLT(n, i64(spec_.N)), n, i64(spec_.N - 1)); // past the last panel: its own rows
            nextRows_.push_back(weightRow(n));
          }
        }
        emitBlock(b_.CreateMul(blk, i64(shape_.MR), "row0"), shape_.MR, n0, wide, columns);
        nextRows_.clear();
      });
    if (spec_.M % shape_.MR > 0)
      loops.ifElse(b_.CreateICmpSGT(icEnd_, i64(fullBlocks_)), [&] {
        emitBlock(i64(fullBlocks_ * shape_.MR), spec_.M % shape_.MR, n0, wide, columns);
      }, [] {});
    readWide_ = false;
  }

  // Steps [k0, k0 + kLen) of the vectors of channels that hold the panel's `columns`
  // channels into wide_ (step k - k0 at (k - k0)·NR): per W channels, W steps of their
  // W rows (a row of zeros past `columns`) transposed into W vectors; the last kLen % W
  // steps by masked loads (never past a row's end: its file may end there).
  void emitTransposeRows(Value* n0, int64_t columns) {
    const int W = shape_.vectorFloats;
    const int64_t NR = shape_.NR, vectors = (columns + W - 1) / W;
    const int64_t whole = kLen_ / W * W, rem = kLen_ % W;
    LoopBuilder loops(b_);
    for (int64_t g = 0; g < vectors; ++g) {
      std::vector<Value*> rows(static_cast<size_t>(W), nullptr);
      for (int64_t j = 0; j < W && g * W + j < columns; ++j)
        rows[size_t(j)] = b_.CreateGEP(b_.getFloatTy(), weightRow(b_.CreateAdd(n0, i64(g * W + j))), k0_);
      auto tile = [&](Value* k, int64_t lanes) { // k relative to k0
        std::vector<Value*> v(static_cast<size_t>(W));
        for (int j = 0; j < W; ++j)
          v[size_t(j)] = rows[size_t(j)] ? load(b_.CreateGEP(b_.getFloatTy(), rows[size_t(j)], k), lanes)
                                         : llvm::Constant::getNullValue(vecTy_);
        transposeSquare(v);
        for (int64_t t = 0; t < lanes; ++t)
          b_.CreateAlignedStore(v[size_t(t)],
                                b_.CreateGEP(b_.getFloatTy(), wide_,
                                             b_.CreateAdd(b_.CreateMul(b_.CreateAdd(k, i64(t)), i64(NR)), i64(g * W))),
                                llvm::Align(W * 4));
      };
      if (whole > 0) loops.forRange(i64(0), i64(whole), W, "tk", [&](Value* k) { tile(k, W); }, 1);
      if (rem > 0) tile(i64(whole), rem);
    }
  }

  // Few rows over weight rows: per group of up to kDotColumns channels (their rows stay
  // in L1 across the row blocks), blocks of dotTailRows rows × the group, each (row,
  // channel) one W-lane vector over the whole K (the K % W steps by masked loads of A
  // and of the row), summed horizontally in a fixed order (horizontalSums) into a stack
  // row of the panel's sums; then each row's sums go through the usual epilogue
  // (emitEpilogue: bias, activation, residual, the gated product) as accumulators.
  void emitRowsDot(Value* n0, int64_t columns) {
    const int W = shape_.vectorFloats;
    const int64_t M = spec_.M, NR = shape_.NR, R = dotTailRows(shape_);
    const int64_t fullK = spec_.K / W * W, kRem = spec_.K % W;
    const int64_t groups = (columns + kDotColumns - 1) / kDotColumns;
    llvm::AllocaInst* sums;
    std::vector<llvm::AllocaInst*> acc(static_cast<size_t>(M * vectorsPerRow_));
    {
      llvm::IRBuilder<> entry(&fn_->getEntryBlock(), fn_->getEntryBlock().begin());
      sums = entry.CreateAlloca(llvm::ArrayType::get(b_.getFloatTy(), uint64_t(M * NR)), nullptr, "dotsums");
      sums->setAlignment(llvm::Align(64));
      for (auto& a : acc) a = entry.CreateAlloca(vecTy_, nullptr, "dotacc");
    }
    LoopBuilder loops(b_);
    for (int64_t g = 0, c0 = 0; g < groups; ++g) {
      const int64_t nc = columns / groups + (g < columns % groups ? 1 : 0); // balanced: 10 -> 4, 3, 3
      std::vector<Value*> wRows(static_cast<size_t>(nc));
      for (int64_t j = 0; j < nc; ++j) wRows[size_t(j)] = weightRow(b_.CreateAdd(n0, i64(c0 + j)));
      for (int64_t r0 = 0; r0 < M; r0 += R) {
        const int64_t nr = std::min(R, M - r0);
        std::vector<Value*> aRows(static_cast<size_t>(nr));
        for (int64_t i = 0; i < nr; ++i)
          aRows[size_t(i)] = b_.CreateGEP(b_.getFloatTy(), A_, i64((r0 + i) * spec_.K), "drow");
        std::vector<llvm::AllocaInst*> dacc(static_cast<size_t>(nr * nc));
        {
          llvm::IRBuilder<> entry(&fn_->getEntryBlock(), fn_->getEntryBlock().begin());
          for (auto& a : dacc) a = entry.CreateAlloca(vecTy_, nullptr, "dacc");
        }
        for (auto* a : dacc) b_.CreateStore(llvm::Constant::getNullValue(vecTy_), a);
        // Decode: the rows lie in the file's 4 KiB pages, where the hardware prefetcher
        // stops at each page's end, so each step asks for its rows' line 2 KiB ahead.
        // TinyLlama f32 decode, 2 threads, Sapphire Rapids guest: 5.5 -> 6.0-6.4 tok/s
        // (1 KiB and 4 KiB alike within the noise). The Zen 4 guest reads them faster
        // without (1 thread 3.3-3.7 -> 4.0-4.7 tok/s, 2 threads 5.4-6.1 -> 6.5-7.4), as it
        // does f16 weights: the host's measured choice (prefetchChoiceApplies) decides.
        const int64_t ahead = M <= kDecodePrefetchRows && shape_.prefetchesStreamedWeights ? 2048 / 4 : 0;
        auto step = [&](Value* k, int64_t lanes) {
          std::vector<Value*> a(static_cast<size_t>(nr));
          for (int64_t i = 0; i < nr; ++i) a[size_t(i)] = load(b_.CreateGEP(b_.getFloatTy(), aRows[size_t(i)], k), lanes);
          for (int64_t j = 0; j < nc; ++j) {
            if (ahead > 0 && lanes == W)
              emitPrefetch(b_, b_.CreateGEP(b_.getFloatTy(), wRows[size_t(j)], b_.CreateAdd(k, i64(ahead))), false, 3);
            Value* w = load(b_.CreateGEP(b_.getFloatTy(), wRows[size_t(j)], k), lanes);
            for (int64_t i = 0; i < nr; ++i) {
              llvm::AllocaInst* slot = dacc[size_t(i * nc + j)];
              b_.CreateStore(math_.mulAdd(a[size_t(i)], w, b_.CreateLoad(vecTy_, slot)), slot);
            }
          }
        };
        if (fullK > 0) loops.forRange(i64(0), i64(fullK), W, "dk", [&](Value* k) { step(k, W); }, 1);
        if (kRem > 0) step(i64(fullK), kRem);
        for (int64_t i = 0; i < nr; ++i) {
          for (int64_t q = 0; q < nc; q += kDotColumns) {
            std::vector<Value*> v;
            for (int64_t j = q; j < std::min(nc, q + kDotColumns); ++j) v.push_back(b_.CreateLoad(vecTy_, dacc[size_t(i * nc + j)]));
            Value* four = horizontalSums(v);
            for (int64_t j = q; j < std::min(nc, q + kDotColumns); ++j)
              b_.CreateStore(b_.CreateExtractElement(four, uint64_t(j - q)),
                             b_.CreateGEP(b_.getFloatTy(), sums, i64((r0 + i) * NR + c0 + j)));
          }
        }
      }
      c0 += nc;
    }
    for (int64_t i = 0; i < M; ++i)
      for (int j = 0; j < vectorsPerRow_; ++j) {
        const int64_t first = int64_t(j) * W, lanes = std::min<int64_t>(W, columns - first);
        b_.CreateStore(load(b_.CreateGEP(b_.getFloatTy(), sums, i64(i * NR + first)), lanes),
                       acc[size_t(i * vectorsPerRow_ + j)]);
      }
    emitEpilogue(i64(0), M, n0, columns, acc);
  }

  // One panel: the row blocks of the MC chunk, then the M tail, for `columns` valid columns.
  void emitPanel(Value* panel, int64_t columns) {
    // A tail panel narrower than NR computes only the vectors that hold its columns.
    vectorsPerRow_ = int((columns + shape_.vectorFloats - 1) / shape_.vectorFloats);
    Value* n0 = b_.CreateMul(panel, i64(shape_.NR), "n0");
    if (spec_.weightRows) return emitRowsPanel(n0, columns);
    Value* bPanel = b_.CreateGEP(unitTy_, B_, b_.CreateMul(panel, i64(units(layout_.panelElements()))), "bpanel");
    int64_t tailRows = spec_.M % shape_.MR;
    LoopBuilder loops(b_);
    if (columns < shape_.NR && layout_.hasRowTail()) {
      // Dot products: the MC chunk's rows in runtime steps of dotTailRows (a divisor of
      // MR, so only the M tail can leave a remainder), then that remainder if M has one.
      bPanel = b_.CreateGEP(b_.getFloatTy(), B_, i64(layout_.tailOffset()), "btail");
      const int64_t R = dotTailRows(shape_), rem = spec_.M % R;
      Value* end = minimum(b_.CreateMul(icEnd_, i64(shape_.MR)), i64(spec_.M - rem), "dotend");
      if (spec_.M >= R) // each step one R-row block, kept a loop
        loops.forRange(b_.CreateMul(icBegin_, i64(shape_.MR)), end, R, "dotrows",
                       [&](Value* row0) { emitDotBlock(row0, R, n0, bPanel, columns); }, 1);
      if (rem > 0)
        loops.ifElse(b_.CreateICmpSGT(icEnd_, i64(fullBlocks_)),
                     [&] { emitDotBlock(i64(spec_.M - rem), rem, n0, bPanel, columns); }, [] {});
      return;
    }
    const bool prefetchNext = prefetchesNextPanel(columns);
    Value* nextSlices = bPanel; // the packed panel: the next one follows it
    auto fullBlocksFrom = [&](Value* first, Value* panelB) {
      loops.forRange(first, icFullEnd_, 1, "rowblock", [&](Value* blk) {
        Value* slice = prefetchNext ? nextPanelSlice(nextSlices, b_.CreateSub(blk, icBegin_)) : nullptr;
        emitBlock(b_.CreateMul(blk, i64(shape_.MR), "row0"), shape_.MR, n0, panelB, columns, slice);
      });
    };
    auto tail = [&](Value* panelB) {
      if (tailRows > 0)
        loops.ifElse(b_.CreateICmpSGT(icEnd_, i64(fullBlocks_)),
                     [&] { emitBlock(i64(fullBlocks_ * shape_.MR), tailRows, n0, panelB, columns); }, [] {});
    };
    if (!wideB_) {
      if (fullBlocks_ > 0) fullBlocksFrom(icBegin_, bPanel);
      return tail(bPanel);
    }
    // widensPanels(): the task's first full row block reads the packed panel and stores
    // what it widens into wide_ (this K block, at wide_ − k0·NR for absolute k); the
    // others read that copy. A task without a full row block reads the packed panel.
    Value* wide = b_.CreateGEP(b_.getFloatTy(), wide_, b_.CreateNeg(b_.CreateMul(k0_, i64(shape_.NR))), "widepanel");
    loops.ifElse(b_.CreateICmpSLT(icBegin_, icFullEnd_), [&] {
      storeWide_ = wide;
      emitBlock(b_.CreateMul(icBegin_, i64(shape_.MR), "row0"), shape_.MR, n0, bPanel, columns,
                prefetchNext ? nextPanelSlice(nextSlices, i64(0)) : nullptr);
      storeWide_ = nullptr;
      readWide_ = true;
      fullBlocksFrom(b_.CreateAdd(icBegin_, i64(1)), wide);
      tail(wide);
      readWide_ = false;
    }, [&] { tail(bPanel); });
  }

  // The narrow tail (layout_.hasRowTail()): rows [row0, row0+rows) × the `columns` tail
  // channels from n0, as dot products along the whole K. Sub-blocks of dotTailRows rows ×
  // up to kDotColumns channels; each (row, channel) accumulates one W-lane vector over
  // K (A and the channel's row both contiguous), K % W by a masked load of A (the
  // weight rows are zero-padded to tailStride), then a fixed-order horizontal sum that
  // puts the sub-block's channels of one row side by side in a kDotColumns-lane
  // vector, and the whole epilogue on it. Every (row, channel) is computed the same
  // way whatever the sub-block, so results do not depend on the split.
  void emitDotBlock(Value* row0, int64_t rows, Value* n0, Value* bTail, int64_t columns) {
    const int W = shape_.vectorFloats;
    const int64_t groups = (columns + kDotColumns - 1) / kDotColumns;
    const int64_t fullK = spec_.K / W * W, kRem = spec_.K % W;
    const int R = dotTailRows(shape_);
    for (int64_t r0 = 0; r0 < rows; r0 += R) {
      const int64_t nr = std::min<int64_t>(R, rows - r0);
      std::vector<Value*> aRows(static_cast<size_t>(nr));
      for (int64_t i = 0; i < nr; ++i)
        aRows[size_t(i)] = b_.CreateGEP(
            b_.getFloatTy(), A_, b_.CreateMul(b_.CreateAdd(row0, i64(r0 + i)), i64(spec_.K)), "drow");
      for (int64_t g = 0, c0 = 0; g < groups; ++g) {
        // Balanced groups: 10 channels -> 4, 3, 3.
        const int64_t nc = columns / groups + (g < columns % groups ? 1 : 0);
        std::vector<Value*> wRows(static_cast<size_t>(nc));
        for (int64_t j = 0; j < nc; ++j)
          wRows[size_t(j)] = b_.CreateGEP(b_.getFloatTy(), bTail, i64((c0 + j) * layout_.tailStride()), "dwrow");
        std::vector<llvm::AllocaInst*> acc(static_cast<size_t>(nr * nc));
        {
          llvm::IRBuilder<> entry(&fn_->getEntryBlock(), fn_->getEntryBlock().begin());
          for (auto& a : acc) a = entry.CreateAlloca(vecTy_, nullptr, "dacc");
        }
        for (auto* a : acc) b_.CreateStore(llvm::Constant::getNullValue(vecTy_), a);
        auto step = [&](Value* k, int64_t lanes) {
          std::vector<Value*> a(static_cast<size_t>(nr));
          for (int64_t i = 0; i < nr; ++i)
            a[size_t(i)] = load(b_.CreateGEP(b_.getFloatTy(), aRows[size_t(i)], k), lanes);
          for (int64_t j = 0; j < nc; ++j) {
            Value* w = loadPackedB(b_.CreateGEP(b_.getFloatTy(), wRows[size_t(j)], k));
            for (int64_t i = 0; i < nr; ++i) {
              llvm::AllocaInst* slot = acc[size_t(i * nc + j)];
              b_.CreateStore(math_.mulAdd(a[size_t(i)], w, b_.CreateLoad(vecTy_, slot)), slot);
            }
          }
        };
        LoopBuilder loops(b_);
        // Kept a loop: its body is already nr×nc independent FMAs.
        if (fullK > 0)
          loops.forRange(i64(0), i64(fullK), W, "dk", [&](Value* k) { step(k, W); }, 1);
        if (kRem > 0) step(i64(fullK), kRem);
        for (int64_t i = 0; i < nr; ++i) {
          std::vector<Value*> v(static_cast<size_t>(nc));
          for (int64_t j = 0; j < nc; ++j) v[size_t(j)] = b_.CreateLoad(vecTy_, acc[size_t(i * nc + j)]);
          Value* sums = horizontalSums(v);
          emitDotEpilogue(b_.CreateAdd(row0, i64(r0 + i)), b_.CreateAdd(n0, i64(c0)), nc, sums);
        }
        c0 += nc;
      }
    }
  }

  // out[j] = sum of the lanes of v[j] (j < v.size() <= kDotColumns), as a kDotColumns-lane
  // vector: two levels of pairwise adds within each 4-lane block (haddps order), then
  // the W/4 blocks added in order.
  Value* horizontalSums(std::vector<Value*> v) {
    const int W = shape_.vectorFloats;
    v.resize(kDotColumns, llvm::Constant::getNullValue(vecTy_));
    auto hadd = [&](Value* x, Value* y) {
      std::vector<int> even, odd;
      for (int q = 0; q < W; q += 4)
        for (int t : {q, q + 2, W + q, W + q + 2}) even.push_back(t), odd.push_back(t + 1);
      return b_.CreateFAdd(b_.CreateShuffleVector(x, y, even), b_.CreateShuffleVector(x, y, odd));
    };
    Value* t = hadd(hadd(v[0], v[1]), hadd(v[2], v[3]));
    auto block = [&](int q) {
      return b_.CreateShuffleVector(t, std::vector<int>{q, q + 1, q + 2, q + 3});
    };
    Value* sum = block(0);
    for (int q = 4; q < W; q += 4) sum = b_.CreateFAdd(sum, block(q));
    return sum;
  }

  // C[row][col .. col+lanes) = actAfterResidual(act(sums + bias) + residual), on
  // kDotColumns-lane vectors.
  void emitDotEpilogue(Value* row, Value* col, int64_t lanes, Value* v) {
    auto* ty = llvm::FixedVectorType::get(b_.getFloatTy(), kDotColumns);
    auto ld = [&](Value* p) { return loadFirstLanes(b_, ty, p, lanes); };
    Value* offset = b_.CreateAdd(b_.CreateMul(row, i64(spec_.N)), col);
    if (spec_.bias) v = b_.CreateFAdd(v, ld(b_.CreateGEP(b_.getFloatTy(), bias_, col)));
    v = math_.activation(spec_.act, v);
    if (spec_.residual) v = b_.CreateFAdd(v, ld(b_.CreateGEP(b_.getFloatTy(), residual_, offset)));
    v = math_.activation(spec_.actAfterResidual, v);
    storeFirstLanes(b_, v, b_.CreateGEP(b_.getFloatTy(), C_, offset), lanes, shape_.maskedStores);
  }

  // rows×NR register block starting at row0: accumulate over K into `sets`
  // independent accumulator sets, sum them, then the epilogue.
  void emitBlock(Value* row0, int64_t rows, Value* n0, Value* bPanel, int64_t columns,
                 Value* nextSlice = nullptr) {
    // With several panels a block, a full panel alone keeps their set count (same sums).
    const bool full = vectorsPerRow_ >= shape_.NR / shape_.vectorFloats;
    const int64_t setVectors = blockPanels_ > 1 && full ? blockPanels_ * shape_.NR / shape_.vectorFloats : vectorsPerRow_;
    const int sets = accumulatorSets(rows, shape_, int(setVectors));
    const size_t perSet = size_t(rows * vectorsPerRow_);
    narrowLast_ = narrowsLastVector(columns);
    std::vector<std::vector<llvm::AllocaInst*>> acc(sets, std::vector<llvm::AllocaInst*>(perSet));
    {
      llvm::IRBuilder<> entry(&fn_->getEntryBlock(), fn_->getEntryBlock().begin());
      for (auto& set : acc)
        for (size_t i = 0; i < perSet; ++i)
          set[i] = entry.CreateAlloca(accumulatorType(int(i) % vectorsPerRow_), nullptr, "acc");
    }
    for (auto& set : acc)
      for (auto* a : set) b_.CreateStore(llvm::Constant::getNullValue(a->getAllocatedType()), a);
    if (blocking_.kBlocks > 1)
      prefetchTile(C_, row0, rows, n0, columns, /*forWrite=*/true, /*everyLine=*/false);
    else if (outputOutgrowsL2(spec_) && !spec_.gated)
      prefetchTile(C_, row0, rows, n0, columns, /*forWrite=*/true, /*everyLine=*/true);
    // The epilogue adds the residual in the first K block without an activation, else
    // in the last (emitEpilogue).
    if (spec_.residual && (spec_.act == Activation::None ? !isFalse(firstK_) : lastK_))
      prefetchTile(residual_, row0, rows, n0, columns, /*forWrite=*/false, /*everyLine=*/true);
    std::vector<Value*> aRows(rows);
    if (aPack_) {
      // Packed A: row i of this block at k is aPack[(blk - icBegin)·KC·MR + (k - k0)·MR + i].
      Value* rel = b_.CreateSub(b_.CreateExactSDiv(row0, i64(shape_.MR)), icBegin_);
      Value* base = b_.CreateSub(b_.CreateMul(rel, i64(blocking_.KC * shape_.MR)),
                                 b_.CreateMul(k0_, i64(shape_.MR)));
      for (int64_t i = 0; i < rows; ++i)
        aRows[i] = b_.CreateGEP(b_.getFloatTy(), aPack_, b_.CreateAdd(base, i64(i)), "aprow");
    } else if (spec_.windows.c == 0) {
      for (int64_t i = 0; i < rows; ++i)
        aRows[i] = b_.CreateGEP(b_.getFloatTy(), A_,
                                b_.CreateMul(b_.CreateAdd(row0, i64(i)), i64(spec_.K)), "arow");
    }
    // Unrolled ×kUnrollK here and no further: LLVM's extra ×2 of this loop doubled the
    // address uses Loop Strength Reduction works through (over half of codegen time for
    // a 1-row kernel) without a measurable gain.
    int64_t unrolledK = kLen_ / kUnrollK * kUnrollK;
    LoopBuilder loops(b_);
    // i4: the unrolled steps share one scale group when groups, K blocks and conv
    // windows' runs start at multiples of kUnrollK, so its scales load once per unrolled
    // step. (A run starts at k = t·run: with run = kw·c not a multiple of 4, e.g. 3
    // input channels, a step crossed a group and took the old group's scale.)
    const GemmSpec::Windows& win = spec_.windows;
    const bool runsAligned = win.c == 0 || (win.rows ? win.kw * win.c : win.c) % kUnrollK == 0;
    const bool sharedScales = !readWide_ && spec_.weightType == DType::I4 && layout_.group % kUnrollK == 0 &&
                              (blocking_.kBlocks == 1 || blocking_.KC % kUnrollK == 0) && runsAligned;
    auto prefetchStep = [&](Value* k) {
      if (!readWide_ && prefetchesB(rows)) prefetchB(k, bPanel);
      if (nextSlice) prefetchNextSlice(k, nextSlice);
      for (Value* row : nextRows_) emitPrefetch(b_, b_.CreateGEP(b_.getFloatTy(), row, k), /*forWrite=*/false, 2);
    };
    auto unrolledStepOf = [&](const std::vector<Value*>& rowsOfA, Value* k) {
      prefetchStep(k);
      std::vector<Value*> scales = sharedScales ? groupScales(k, n0) : std::vector<Value*>{};
      for (int u = 0; u < kUnrollK; ++u)
        emitKStep(b_.CreateAdd(k, i64(u)), rowsOfA, bPanel, acc[u % sets], n0, scales);
    };
    auto unrolledStep = [&](Value* k) { unrolledStepOf(aRows, k); };
    // i4 with few rows (decode): each scale group's products go to accumulators of their
    // own, and the group's scales are applied once, by one FMA per vector, instead of a
    // multiply per widened weight vector (one of the four vector instructions per 16
    // weights). Not in kernels that widen panels (wideB_: whether a block reads the
    // widened copy depends on the split), and the register budget counts a block's
    // vectors, so that a full panel alone and in a block sum alike: the bits do not depend
    // on the split.
    const bool groupSums = spec_.weightType == DType::I4 && !wideB_ && spec_.windows.c == 0 &&
                           layout_.group % kUnrollK == 0 &&
                           (blocking_.kBlocks == 1 || blocking_.KC % layout_.group == 0) &&
                           2 * sets * rows * setVectors <= shape_.registers - 8;
    int64_t groupedK = 0; // steps [0, groupedK) of the K block go group by group
    if (groupSums && kLen_ >= layout_.group) {
      groupedK = kLen_ / layout_.group * layout_.group;
      std::vector<std::vector<llvm::AllocaInst*>> sums(sets, std::vector<llvm::AllocaInst*>(perSet));
      {
        llvm::IRBuilder<> entry(&fn_->getEntryBlock(), fn_->getEntryBlock().begin());
        for (auto& set : sums)
          for (auto& a : set) a = entry.CreateAlloca(vecTy_, nullptr, "groupsum");
      }
      loops.forRange(k0_, b_.CreateAdd(k0_, i64(groupedK)), layout_.group, "kgroup", [&](Value* g0) {
        for (auto& set : sums)
          for (auto* a : set) b_.CreateStore(llvm::Constant::getNullValue(vecTy_), a);
        if (prefetchesB(rows)) prefetchGroupScales(g0, n0);
        unscaledI4_ = true;
        loops.forRange(g0, b_.CreateAdd(g0, i64(layout_.group)), kUnrollK, "k", [&](Value* k) {
          prefetchStep(k);
          for (int u = 0; u < kUnrollK; ++u) emitKStep(b_.CreateAdd(k, i64(u)), aRows, bPanel, sums[u % sets], n0, {});
        }, 1);
        unscaledI4_ = false;
        const std::vector<Value*> scales = groupScales(g0, n0);
        for (int set = 0; set < sets; ++set)
          for (int64_t i = 0; i < rows; ++i)
            for (int j = 0; j < vectorsPerRow_; ++j) {
              llvm::AllocaInst* slot = acc[size_t(set)][size_t(i * vectorsPerRow_ + j)];
              Value* sum = b_.CreateLoad(vecTy_, sums[size_t(set)][size_t(i * vectorsPerRow_ + j)]);
              b_.CreateStore(math_.mulAdd(scales[size_t(j)], sum, b_.CreateLoad(vecTy_, slot)), slot);
            }
      }, 1);
    }
    if (spec_.windows.c > 0) {
      // Run by run (a tap's c channels, or a window row's kw·c floats): the rows'
      // pointers, then the run's k steps (K = runs · run).
      const GemmSpec::Windows& w = spec_.windows;
      const int64_t run = w.rows ? w.kw * w.c : w.c, runs = w.rows ? w.kh : w.kh * w.kw;
      std::vector<WindowRow> origins = windowRows(row0, rows);
      loops.forRange(i64(0), i64(runs), 1, "tap", [&](Value* t) {
        Value* ky = w.rows ? t : b_.CreateUDiv(t, i64(w.kw));
        Value* kx = w.rows ? i64(0) : b_.CreateURem(t, i64(w.kw));
        Value* back = b_.CreateMul(t, i64(-run)); // aRows[i][k] is float k − t·run of the run
        for (int64_t i = 0; i < rows; ++i) {
          Value* iy = b_.CreateAdd(origins[i].y, ky);
          Value* ix = b_.CreateAdd(origins[i].x, kx);
          Value* pixel = b_.CreateAdd(origins[i].imagePixel, b_.CreateAdd(b_.CreateMul(iy, i64(w.w)), ix));
          Value* at = b_.CreateGEP(b_.getFloatTy(), A_, b_.CreateMul(pixel, i64(w.c)));
          if (!w.rows) { // unsigned compares: a negative coordinate is outside too
            Value* inside = b_.CreateAnd(b_.CreateICmpULT(iy, i64(w.h)), b_.CreateICmpULT(ix, i64(w.w)));
            at = b_.CreateSelect(inside, at, zeroPixel());
          }
          aRows[i] = b_.CreateGEP(b_.getFloatTy(), at, back, "winrow");
        }
        Value* k = b_.CreateMul(t, i64(run));
        const int64_t whole = run / kUnrollK * kUnrollK;
        if (whole > 0) loops.forRange(k, b_.CreateAdd(k, i64(whole)), kUnrollK, "k", unrolledStep, 1);
        for (int64_t j = whole; j < run; ++j) // a window row's remainder (rows only)
          emitKStep(b_.CreateAdd(k, i64(j)), aRows, bPanel, acc[j % sets], n0, {});
      }, 1);
      unrolledK = kLen_;
    } else if (unrolledK > groupedK && aPack_) { // groupedK: a multiple of kUnrollK
      loops.forRange(b_.CreateAdd(k0_, i64(groupedK)), b_.CreateAdd(k0_, i64(unrolledK)), kUnrollK, "k",
                     unrolledStep, 1);
    } else if (unrolledK > groupedK) {
      forKOverRowsOfA(loops, aRows, b_.CreateAdd(k0_, i64(groupedK)), b_.CreateAdd(k0_, i64(unrolledK)),
                      unrolledStepOf);
    }
    const int64_t tailK = std::max(unrolledK, groupedK); // the last kLen_ % kUnrollK steps
    if (kLen_ - tailK >= 2)
      // A loop of one step, not the steps one after another: LLVM then scheduled all the
      // steps' broadcasts of A ahead of their FMAs and spilled them (23³, 12 rows × 2
      // vectors: ~100 spill moves after the loop).
      loops.forRange(b_.CreateAdd(k0_, i64(tailK)), b_.CreateAdd(k0_, i64(kLen_)), 1, "ktail",
                     [&](Value* k) { emitKStep(k, aRows, bPanel, acc[0], n0, {}); }, 1);
    else if (kLen_ > tailK)
      emitKStep(b_.CreateAdd(k0_, i64(tailK)), aRows, bPanel, acc[tailK % sets], n0, {});
    // Pairwise sum of the sets into set 0, in a fixed order (same code for any split).
    for (int stride = 1; stride < sets; stride *= 2)
      for (int s = 0; s + stride < sets; s += 2 * stride)
        for (size_t i = 0; i < perSet; ++i)
          b_.CreateStore(b_.CreateFAdd(b_.CreateLoad(acc[s][i]->getAllocatedType(), acc[s][i]),
                                       b_.CreateLoad(acc[s][i]->getAllocatedType(), acc[s + stride][i])),
                         acc[s][i]);
    emitEpilogue(row0, rows, n0, columns, acc[0]);
  }

  // The unrolled k loop over the rows of A in place (row i at aRows[0] + i·K): they are
  // read through one pointer that the loop advances (a phi), so that each FMA with a
  // broadcast folded in addresses A as that pointer + a constant. From aRows[i][k] LLVM
  // made `row base + k·4` (an index register) instead, and Intel cores split an FMA
  // with an indexed memory operand into two µops: 16³ on the Sapphire Rapids guest, same
  // binary, medians 72-90 -> 107-120 GFLOP/s (docs/bench.md). (The narrow tail's one-row
  // dot products keep theirs: LLVM gives A's and W's pointers, which advance alike, one
  // index register.)
  void forKOverRowsOfA(LoopBuilder& loops, const std::vector<Value*>& aRows, Value* kBegin, Value* kEnd,
                       const std::function<void(const std::vector<Value*>&, Value*)>& step) {
    llvm::AllocaInst* cursor;
    {
      llvm::IRBuilder<> entry(&fn_->getEntryBlock(), fn_->getEntryBlock().begin());
      cursor = entry.CreateAlloca(b_.getPtrTy(), nullptr, "arowscursor");
    }
    b_.CreateStore(b_.CreateGEP(b_.getFloatTy(), aRows[0], kBegin), cursor);
    loops.forRange(kBegin, kEnd, kUnrollK, "k", [&](Value* k) {
      Value* at = b_.CreateLoad(b_.getPtrTy(), cursor, "arowsat"); // A[row 0][k]
      std::vector<Value*> rows(aRows.size()); // rows[i][k + u] is at[i·K + u]
      for (size_t i = 0; i < aRows.size(); ++i)
        rows[i] = b_.CreateGEP(b_.getFloatTy(), at, b_.CreateSub(i64(int64_t(i) * spec_.K), k));
      step(rows, k);
      b_.CreateStore(b_.CreateGEP(b_.getFloatTy(), at, i64(kUnrollK)), cursor);
    }, 1);
  }

  // Conv windows: where row row0 + i's window starts — image b's first pixel (b·h·w),
  // and input coordinates (oy·sh − ph, ox·sw − pw) of its tap (0, 0).
  struct WindowRow {
    Value *imagePixel, *y, *x;
  };
  std::vector<WindowRow> windowRows(Value* row0, int64_t rows) {
    const GemmSpec::Windows& w = spec_.windows;
    std::vector<WindowRow> out;
    for (int64_t i = 0; i < rows; ++i) {
      Value* r = b_.CreateAdd(row0, i64(i));
      Value* q = b_.CreateUDiv(r, i64(w.outW()));
      Value* ox = b_.CreateURem(r, i64(w.outW()));
      Value* oy = b_.CreateURem(q, i64(w.outH()));
      Value* image = b_.CreateUDiv(q, i64(w.outH()));
      out.push_back({b_.CreateMul(image, i64(w.h * w.w)), b_.CreateSub(b_.CreateMul(oy, i64(w.sh)), i64(w.ph)),
                     b_.CreateSub(b_.CreateMul(ox, i64(w.sw)), i64(w.pw))});
    }
    return out;
  }
  // c zero floats (a tap in the padding reads them), one per module.
  Value* zeroPixel() {
    llvm::Module* m = fn_->getParent();
    if (llvm::GlobalVariable* g = m->getGlobalVariable("nnc_zero_pixel", true)) return g;
    auto* type = llvm::ArrayType::get(b_.getFloatTy(), uint64_t(spec_.windows.c));
    auto* g = new llvm::GlobalVariable(*m, type, /*isConstant=*/true, llvm::GlobalValue::InternalLinkage,
                                       llvm::ConstantAggregateZero::get(type), "nnc_zero_pixel");
    g->setAlignment(llvm::Align(64));
    return g;
  }

  // Low-precision weights at few rows (batch 1-3): the widening keeps the core busy, and
  // the hardware prefetcher alone left i8/i4 streams from DRAM at half the read
  // probe's rate, so each unrolled step asks for every line of the step prefetchBytes()
  // ahead in each of the block's panels (a prefetch past the buffer's end does not
  // fault). Measured with bench/'s --dtypes (weights from DRAM, 4096² and 11008×4096,
  // 1 thread), share of the read probe:
  //  - Sapphire-Rapids-class guest, the step's first line only: 1024 bytes ahead best
  //    for f16, bf16, i8, 2048 for i4 (one line per step there); 4096 and 8192 worse.
  //  - Zen 5 guest (docs/bench.md, "Storage dtypes"), runs in a busy hour: first line
  //    at 1024 bytes i8 0.55-0.78, f16 0.63-0.92; every line (i8: 2 per step, f16/bf16:
  //    4) at 4096 bytes i8 0.92-1.23, f16 0.90-1.12; 3072 alike, 2048 and 8192 a little
  //    lower. In a quiet hour both reach 0.96-1.09; TinyLlama i8 decode, 1 thread, busy
  //    hour, 3 interleaved rounds: 17.6-22.2 -> 25.9-28.5 tok/s. i4 (one line per step
  //    either way) is bound by its nibble widening (33-36 GB/s from L3), not the stream.
  //  - Zen 4 guest: f16 and bf16 stream faster without it (4096² from DRAM, 1 thread:
  //    f16 1376-1423 -> 1150-1164 us, bf16 1206-1347 -> 1100-1113; TinyLlama decode
  //    9.0 -> 11.9 tok/s), i8 and i4 do not. Hosts differ, so whether f16/bf16 weights
  //    are prefetched is measured per host (MicroKernelShape::prefetchesStreamedWeights).
  //  - Xeon guest with AMX: f16 decode rows faster 1 KiB ahead than 4 KiB or none, so the
  //    distance for f16/bf16 is the host's measured one too
  //    (MicroKernelShape::halfWeightPrefetchBytes).
  int64_t prefetchBytes() const {
    if (followsHalfWeightPrefetchDistance(spec_)) return shape_.halfWeightPrefetchBytes;
    return spec_.weightType == DType::I4 ? 2048 : 4096;
  }
  bool prefetchesB(int64_t rows) const {
    return spec_.weightType != DType::F32 && rows <= kDecodePrefetchRows &&
           (shape_.prefetchesStreamedWeights || !prefetchChoiceApplies(spec_, shape_));
  }
  void prefetchB(Value* k, Value* bPanel) {
    const int perPanel = shape_.NR / shape_.vectorFloats;
    const int64_t stepBytes = bytesFor(shape_.NR, spec_.weightType);
    const int64_t ahead = prefetchBytes() / std::max<int64_t>(1, stepBytes);
    for (int q = 0; q * perPanel < vectorsPerRow_; ++q) {
      Value* step = b_.CreateAdd(k, i64(ahead));
      Value* p = b_.CreateGEP(unitTy_, bPanel,
                              b_.CreateAdd(b_.CreateMul(step, i64(units(shape_.NR))), i64(q * units(layout_.panelElements()))));
      emitPrefetchLines(b_, p, stepBytes * kUnrollK);
    }
  }

  // Weights from DRAM at many rows: the first row block of each panel demands B at the
  // kernel's full rate (2 lines per k step), which DRAM does not deliver, and stalls
  // while the chunk's other row blocks find the panel in L2. So the row blocks of one
  // panel bring the next panel (this K block of it) into L2 as they go: row block r of
  // the chunk asks for the r-th of R slices, a few lines per unrolled step. Measured
  // on a Sapphire Rapids guest, 1 thread, weights from DRAM: 128×2048×2048 113 -> 172
  // GFLOP/s, 128×5632×2048 145 -> 174 (the hot-weight rate is ~180). Warm weights
  // (B <= L2/2) and chunks of one row block do not prefetch.
  bool prefetchesNextPanel(int64_t columns) const {
    return columns == shape_.NR && blockPanels_ == 1 && nextSliceRows_ >= 2 && kLen_ >= kUnrollK &&
           weightsOutgrowL2(spec_);
  }
  // Row blocks of a chunk that share the next panel, and each one's slice of it.
  void planNextPanelPrefetch() {
    nextSliceRows_ = std::min<int64_t>(blocking_.rowBlocksPerChunk, fullBlocks_);
    if (nextSliceRows_ < 2) return;
    const int64_t kBlockBytes = bytesFor(kLen_ * shape_.NR, spec_.weightType);
    const int64_t lines = (kBlockBytes + 63) / 64;
    const int64_t sliceLines = (lines + nextSliceRows_ - 1) / nextSliceRows_;
    const int64_t steps = std::max<int64_t>(1, kLen_ / kUnrollK);
    nextLinesPerStep_ = (sliceLines + steps - 1) / steps;
    nextSliceBytes_ = sliceLines * 64;
  }
  Value* nextPanelSlice(Value* bPanel, Value* relBlock) {
    const int64_t panelBytes = units(layout_.panelElements()) * unitBytes();
    // Panels are k-major over the whole K: this K block of the next one starts at k0·NR.
    Value* start = b_.CreateAdd(i64(panelBytes), b_.CreateMul(k0_, i64(bytesFor(shape_.NR, spec_.weightType))));
    start = b_.CreateAdd(start, b_.CreateMul(relBlock, i64(nextSliceBytes_)));
    return b_.CreateGEP(b_.getInt8Ty(), bPanel, start, "nextslice");
  }
  void prefetchNextSlice(Value* k, Value* slice) {
    Value* step = b_.CreateSDiv(b_.CreateSub(k, k0_), i64(kUnrollK));
    Value* first = b_.CreateMul(step, i64(nextLinesPerStep_ * 64));
    for (int64_t j = 0; j < nextLinesPerStep_; ++j) {
      Value* p = b_.CreateGEP(b_.getInt8Ty(), slice, b_.CreateAdd(first, i64(j * 64)));
      emitPrefetch(b_, p, /*forWrite=*/false, /*locality=*/2);
    }
  }

  // Lines of a rows×columns tile of `base` (C or the residual, N floats per row), asked
  // for at the start of a block so that its epilogue does not wait on L3 or DRAM:
  // - With K blocks, C holds partial sums, read and written at the end of each short K
  //   block: its first and last line per row, with write intent (2048³ with KC 256:
  //   98 -> 102 GFLOP/s). Whole-K blocks whose C stays in L2 gain nothing from it and
  //   small ones lose (16³: -5 %), so they do not.
  // - A C larger than L2 is written to lines that are not in any cache, and the store
  //   waits for each line's read-for-ownership: every line, with write intent (ResNet-18's
  //   first conv at batch 8, 25.7 MB of output, 2 threads: 6.3 -> 4.9 ms median of 8
  //   processes; MobileNet V2's GEMMs at batch 8, 1 thread: 29.8 -> 27.1 ms).
  // - The residual, a shortcut written layers ago: every line (ResNet-18 at batch 8,
  //   1 thread: its layer-1 convs with the shortcut 9.4 -> 8.9 ms).
  void prefetchTile(Value* base, Value* row0, int64_t rows, Value* n0, int64_t columns, bool forWrite,
                    bool everyLine) {
    std::vector<int64_t> cols; // float offsets in the row: 16 per 64-byte line
    if (everyLine)
      for (int64_t c = 0; c < columns; c += 16) cols.push_back(c);
    else
      cols = {0, columns - 1};
    for (int64_t i = 0; i < rows; ++i) {
      Value* rowStart = b_.CreateAdd(b_.CreateMul(b_.CreateAdd(row0, i64(i)), i64(spec_.N)), n0);
      for (int64_t c : cols)
        emitPrefetch(b_, b_.CreateGEP(b_.getFloatTy(), base, b_.CreateAdd(rowStart, i64(c))), forWrite);
    }
  }

  // acc[i][j] += A[row i][k] * Bpanel[k][j*W .. j*W+W). i4: `scales` are the k step's
  // group scales (groupScales), or empty to load them here.
  void emitKStep(Value* k, const std::vector<Value*>& aRows, Value* bPanel,
                 const std::vector<llvm::AllocaInst*>& acc, Value* n0, std::vector<Value*> scales) {
    std::vector<Value*> bVec(vectorsPerRow_);
    if (readWide_) { // f32, scales of i4 applied (stored by the first row block)
      Value* bRow = b_.CreateGEP(b_.getFloatTy(), bPanel, b_.CreateMul(k, i64(shape_.NR)));
      for (int j = 0; j < vectorsPerRow_; ++j)
        bVec[j] = b_.CreateAlignedLoad(vecTy_, b_.CreateGEP(b_.getFloatTy(), bRow, i64(j * shape_.vectorFloats)),
                                       llvm::Align(shape_.vectorFloats * 4));
      return emitKStepFmas(k, aRows, acc, bVec);
    }
    Value* bRow = b_.CreateGEP(unitTy_, bPanel, b_.CreateMul(k, i64(units(shape_.NR))));
    const int perPanel = shape_.NR / shape_.vectorFloats; // a block's next panel follows
    const bool i4 = spec_.weightType == DType::I4, scaled = i4 && !unscaledI4_;
    if (scaled && scales.empty()) scales = groupScales(k, n0);
    // i4 packed for digit products (widensDigitLayout; PackLayout.h, kPack 4): k's dot
    // step k / 4 is NR·2 bytes, whose 32-bit lane c holds k % 4's byte of channel c
    // (low nibble) and of channel c + W (high nibble), each q + 8.
    Value* digitStep = nullptr, *digitShift = nullptr;
    if (i4 && layout_.kPack == 4) {
      if (perPanel != 2) throw std::logic_error("gemm: the digit layout's nibbles fill two vectors a panel (" + spec_.key() + ")");
      digitStep = b_.CreateGEP(unitTy_, bPanel, b_.CreateMul(b_.CreateUDiv(k, i64(4)), i64(shape_.NR * 2)));
      digitShift = b_.CreateTrunc(b_.CreateMul(b_.CreateURem(k, i64(4)), i64(8)), b_.getInt32Ty());
    }
    for (int j = 0; j < vectorsPerRow_; ++j) {
      // i4: vector v of a panel is the low (v < perPanel/2) or high nibbles of the k
      // step's bytes from (v mod perPanel/2)·W (PackLayout.h).
      const int v = j % perPanel, halfPanel = perPanel / 2;
      const int64_t within = i4 ? int64_t(v % halfPanel) * shape_.vectorFloats : int64_t(v) * shape_.vectorFloats;
      if (digitStep)
        bVec[j] = loadDigitNibbles(b_.CreateGEP(unitTy_, digitStep, i64(j / perPanel * units(layout_.panelElements()))),
                                   digitShift, v >= halfPanel);
      else
        bVec[j] = loadPackedB(b_.CreateGEP(unitTy_, bRow, i64(j / perPanel * units(layout_.panelElements()) + within)),
                              i4 && v >= halfPanel);
      if (scaled) bVec[j] = b_.CreateFMul(bVec[j], scales[size_t(j)]);
      if (storeWide_)
        b_.CreateAlignedStore(bVec[j], b_.CreateGEP(b_.getFloatTy(), storeWide_,
                                                    b_.CreateAdd(b_.CreateMul(k, i64(shape_.NR)), i64(j * shape_.vectorFloats))),
                              llvm::Align(shape_.vectorFloats * 4));
    }
    emitKStepFmas(k, aRows, acc, bVec);
  }

  void emitKStepFmas(Value* k, const std::vector<Value*>& aRows, const std::vector<llvm::AllocaInst*>& acc,
                     const std::vector<Value*>& bVec) {
    for (size_t i = 0; i < aRows.size(); ++i) {
      Value* aIndex = aPack_ ? b_.CreateMul(k, i64(shape_.MR)) : k;
      Value* a = b_.CreateLoad(b_.getFloatTy(), b_.CreateGEP(b_.getFloatTy(), aRows[i], aIndex));
      Value* aSplat = b_.CreateVectorSplat(shape_.vectorFloats, a);
      for (int j = 0; j < vectorsPerRow_; ++j) {
        llvm::AllocaInst* slot = acc[i * vectorsPerRow_ + j];
        Value* sum = b_.CreateLoad(slot->getAllocatedType(), slot);
        if (sum->getType() == vecTy_) {
          b_.CreateStore(math_.mulAdd(aSplat, bVec[j], sum), slot);
        } else { // narrowsLastVector: the first lanes of the weights, a narrower broadcast
          const int lanes = int(llvm::cast<llvm::FixedVectorType>(sum->getType())->getNumElements());
          Value* b = b_.CreateShuffleVector(bVec[j], firstLanes(lanes));
          b_.CreateStore(math_.mulAdd(b_.CreateVectorSplat(lanes, a), b, sum), slot);
        }
      }
    }
  }

  // Storage units (unitTy_) for `elements` weights: i4 packs two a byte.
  int64_t units(int64_t elements) const { return spec_.weightType == DType::I4 ? elements / 2 : elements; }
  int64_t unitBytes() const { return int64_t(unitTy_->getPrimitiveSizeInBits() / 8); }

  // The one place that reads packed weights: one W-lane vector from ptr, widened to f32
  // (i8, i4: the integers q; their scales are applied by the caller or the epilogue).
  // highNibbles: i4, the lanes are the high nibbles of the W bytes at ptr, else the low.
  Value* loadPackedB(Value* ptr, bool highNibbles = false) {
    const int W = shape_.vectorFloats;
    if (spec_.weightType == DType::F32)
      return b_.CreateAlignedLoad(vecTy_, ptr, llvm::Align(W * 4));
    auto* i32s = llvm::FixedVectorType::get(b_.getInt32Ty(), unsigned(W));
    auto splat = [&](uint32_t c) { return llvm::ConstantInt::get(i32s, c); };
    switch (spec_.weightType) {
    case DType::F16: {
      if (features_.f16c) { // vcvtph2ps
        auto* halfs = llvm::FixedVectorType::get(b_.getHalfTy(), unsigned(W));
        return b_.CreateFPExt(b_.CreateAlignedLoad(halfs, ptr, llvm::Align(W * 2)), vecTy_);
      }
      auto* i16s = llvm::FixedVectorType::get(b_.getInt16Ty(), unsigned(W));
      return halfBitsToFloat(b_.CreateZExt(b_.CreateAlignedLoad(i16s, ptr, llvm::Align(W * 2)), i32s));
    }
    case DType::BF16: { // the top half of an f32
      auto* i16s = llvm::FixedVectorType::get(b_.getInt16Ty(), unsigned(W));
      Value* bits = b_.CreateZExt(b_.CreateAlignedLoad(i16s, ptr, llvm::Align(W * 2)), i32s);
      return b_.CreateBitCast(b_.CreateShl(bits, splat(16)), vecTy_);
    }
    case DType::I8: {
      auto* i8s = llvm::FixedVectorType::get(b_.getInt8Ty(), unsigned(W));
      return b_.CreateSIToFP(b_.CreateSExt(b_.CreateAlignedLoad(i8s, ptr, llvm::Align(W)), i32s), vecTy_);
    }
    default: { // i4: sign-extend the nibble from bits 0-3 or 4-7 of each byte
      auto* i8s = llvm::FixedVectorType::get(b_.getInt8Ty(), unsigned(W));
      Value* bytes = b_.CreateZExt(b_.CreateAlignedLoad(i8s, ptr, llvm::Align(W)), i32s);
      if (W == 16 && highNibbles) {
        // AVX-512, high nibbles: no shift and no shuffle. With the nibble's top bit
        // flipped and the bits of 2^19 set, the f32 is 2^19 + u (bits 4-7 of the
        // mantissa weigh 1 at that exponent; u = n ^ 8 = the value + 8), and subtracting
        // 2^19 + 8 leaves the value, exactly: vpternlogd and vsubps, which run on pipes
        // the lookup's shuffles do not use. Measured on Zen 4 (4 panels, M = 1, from L1):
        // 35.2 -> 31.8 ps a weight against shift + vpermps.
        Value* biased = b_.CreateXor(b_.CreateAnd(bytes, splat(0xF0)), splat(0x49000000u | 0x80u));
        return b_.CreateFSub(b_.CreateBitCast(biased, vecTy_), llvm::ConstantFP::get(vecTy_, 524288.0 + 8.0));
      }
      if (W == 16) {
        // AVX-512, low nibbles: vpermps looks the nibble's value up in a 16-float table,
        // reading only the low 4 bits of each index: one instruction instead of two
        // shifts and a conversion.
        std::vector<llvm::Constant*> table;
        for (int q = 0; q < 16; ++q) table.push_back(llvm::ConstantFP::get(b_.getFloatTy(), q < 8 ? q : q - 16));
        llvm::Function* permute = llvm::Intrinsic::getDeclaration(fn_->getParent(),
                                                                  llvm::Intrinsic::x86_avx512_permvar_sf_512);
        return b_.CreateCall(permute, {llvm::ConstantVector::get(table), bytes});
      }
      Value* q = b_.CreateAShr(b_.CreateShl(bytes, splat(highNibbles ? 24 : 28)), splat(28));
      return b_.CreateSIToFP(q, vecTy_);
    }
    }
  }

  // i4 packed for digit products (emitKStep): from the dot step's W 32-bit lanes at ptr,
  // the nibbles `shift` bits up (high: 4 bits further), q + 8 each, as the f32 value q.
  Value* loadDigitNibbles(Value* ptr, Value* shift, bool high) {
    const int W = shape_.vectorFloats;
    auto* i32s = llvm::FixedVectorType::get(b_.getInt32Ty(), unsigned(W));
    Value* lanes = b_.CreateAlignedLoad(i32s, ptr, llvm::Align(W * 4));
    Value* by = b_.CreateVectorSplat(unsigned(W), high ? b_.CreateAdd(shift, b_.getInt32(4)) : shift);
    Value* biased = b_.CreateAnd(b_.CreateLShr(lanes, by), llvm::ConstantInt::get(i32s, 15));
    return b_.CreateFSub(b_.CreateSIToFP(biased, vecTy_), llvm::ConstantFP::get(vecTy_, 8.0));
  }

  // f16 bit patterns (zero-extended to i32 lanes) to f32 without F16C (StoredTable.h).
  Value* halfBitsToFloat(Value* h) { return codegen::halfBitsToFloat(b_, h); }

  // Packed scales (after the weights: PackLayout.h) from scale index `index`, as f32.
  Value* scaleVector(Value* index) { return loadScales(b_, layout_, B_, index, shape_.vectorFloats); }

  // i4: the scale vectors of k step k's group for the block's vectors (panel from n0;
  // a block's next panels follow): channel n0 + c, group g at (n0·groups + g·NR + c)
  // within the panel (PackLayout.h: scaleIndex).
  std::vector<Value*> groupScales(Value* k, Value* n0) {
    const int perPanel = shape_.NR / shape_.vectorFloats;
    Value* first = groupScaleIndex(k, n0);
    std::vector<Value*> out(static_cast<size_t>(vectorsPerRow_));
    for (int j = 0; j < vectorsPerRow_; ++j)
      out[size_t(j)] = scaleVector(
          b_.CreateAdd(first, i64(j / perPanel * layout_.groups() * shape_.NR + j % perPanel * shape_.vectorFloats)));
    return out;
  }
  // Scale index of channel n0's group for k step k (the panel's first scale of it).
  Value* groupScaleIndex(Value* k, Value* n0) {
    Value* g = b_.CreateUDiv(k, i64(layout_.group), "group");
    return b_.CreateAdd(b_.CreateMul(n0, i64(layout_.groups())), b_.CreateMul(g, i64(shape_.NR)));
  }
  // i4 at few rows: the block's panels' scales kScalePrefetchBytes ahead of k's group
  // (measured on a Zen 5 guest, 1 thread, M = 1 from DRAM, a busy hour, 3 processes
  // each: 1.01-1.08× a plain read loop's rate without, 1.07-1.15× with, 0.97-1.14× at
  // 2048 bytes; the dot-product kernels do the same).
  void prefetchGroupScales(Value* k, Value* n0) {
    const int perPanel = shape_.NR / shape_.vectorFloats;
    Value* base = b_.CreateGEP(b_.getInt8Ty(), B_, i64(layout_.scalesOffsetBytes()), "scales");
    Value* first = groupScaleIndex(k, n0);
    for (int q = 0; q * perPanel < vectorsPerRow_; ++q) {
      Value* index = b_.CreateAdd(first, i64(q * layout_.groups() * shape_.NR));
      Value* panelScales = b_.CreateGEP(b_.getInt8Ty(), base, b_.CreateMul(index, i64(layout_.scaleBytes())));
      emitPrefetchLines(b_, b_.CreateGEP(b_.getInt8Ty(), panelScales, i64(kScalePrefetchBytes)),
                        shape_.NR * layout_.scaleBytes());
    }
  }

  void emitEpilogue(Value* row0, int64_t rows, Value* n0, int64_t columns,
                    const std::vector<llvm::AllocaInst*>& acc) {
    if (spec_.gated) return emitGatedEpilogue(row0, rows, n0, acc);
    const int W = shape_.vectorFloats;
    for (int j = 0; j < vectorsPerRow_; ++j) {
      int64_t lanes = std::min<int64_t>(W, columns - int64_t(j) * W);
      if (lanes <= 0) break;
      Value* col = b_.CreateAdd(n0, i64(int64_t(j) * W), "col");
      Value* biasVec = spec_.bias && lastK_ ? load(b_.CreateGEP(b_.getFloatTy(), bias_, col), lanes)
                                  : nullptr;
      // With a residual and no activation, K blocking starts the sum from the residual.
      const bool residualFirst = spec_.residual && spec_.act == Activation::None && !lastK_;
      // i8: the sums are of a·q; one scale per channel (PackLayout.h), in every K block.
      Value* scale = spec_.weightType == DType::I8 ? scaleVector(col) : nullptr;
      // Row i at the block's first row + i·N: a constant displacement of one address
      // (per-row offsets became a register each, spilled, on 16³).
      Value* first = b_.CreateAdd(b_.CreateMul(row0, i64(spec_.N)), col);
      Value* cFirst = b_.CreateGEP(b_.getFloatTy(), C_, first);
      Value* residualFirstRow = spec_.residual ? b_.CreateGEP(b_.getFloatTy(), residual_, first) : nullptr;
      for (int64_t i = 0; i < rows; ++i) {
        Value* v = loadAccumulator(acc[i * vectorsPerRow_ + j]);
        if (scale) v = b_.CreateFMul(v, scale);
        Value* cPtr = b_.CreateGEP(b_.getFloatTy(), cFirst, i64(i * spec_.N));
        auto residualRow = [&] { return b_.CreateGEP(b_.getFloatTy(), residualFirstRow, i64(i * spec_.N)); };
        // The first block starts the sums (from the residual, residualFirst), the
        // others add to the partial sums so far.
        auto start = [&] { return residualFirst ? b_.CreateFAdd(load(residualRow(), lanes), v) : v; };
        auto partial = [&] { return b_.CreateFAdd(load(cPtr, lanes), v); };
        v = isTrue(firstK_) ? start() : isFalse(firstK_) ? partial() : b_.CreateSelect(firstK_, start(), partial());
        if (lastK_) {
          if (biasVec) v = b_.CreateFAdd(v, biasVec);
          v = math_.activation(spec_.act, v);
          const bool residualDone = spec_.act == Activation::None && !isTrue(firstK_); // lastK_: a constant
          if (spec_.residual && !residualDone) v = b_.CreateFAdd(v, load(residualRow(), lanes));
          v = math_.activation(spec_.actAfterResidual, v);
        }
        store(v, cPtr, lanes);
      }
    }
  }

  // GemmSpec::gated (whole K, whole panels): in each panel of the block (blockPanels_
  // of them), vector j of the first half is a gate channel vector and j + half its up
  // vector; C (N/2 columns) gets act(gate + bias) · (up + bias) at the gate vector's
  // column halved.
  void emitGatedEpilogue(Value* row0, int64_t rows, Value* n0, const std::vector<llvm::AllocaInst*>& acc) {
    const int W = shape_.vectorFloats;
    const int perPanel = int(shape_.NR / W), half = perPanel / 2;
    const int64_t outN = spec_.N / 2;
    Value* out0 = b_.CreateLShr(n0, 1, "gatedcol"); // n0: a panel's first column, even
    for (int j = 0; j < vectorsPerRow_; ++j) {
      if (j % perPanel >= half) continue; // an up vector, taken with its gate vector
      const int64_t gateCol = int64_t(j) * W, upCol = gateCol + int64_t(half) * W;
      Value* gateScale = spec_.weightType == DType::I8 ? scaleVector(b_.CreateAdd(n0, i64(gateCol))) : nullptr;
      Value* upScale = spec_.weightType == DType::I8 ? scaleVector(b_.CreateAdd(n0, i64(upCol))) : nullptr;
      Value* col = b_.CreateAdd(out0, i64(int64_t(j / perPanel) * (shape_.NR / 2) + int64_t(j % perPanel) * W));
      Value* cFirst = b_.CreateGEP(b_.getFloatTy(), C_, b_.CreateAdd(b_.CreateMul(row0, i64(outN)), col));
      // The bias is [gate; up]: output column c's gate bias at c, its up bias at N/2 + c.
      Value* gateBias = spec_.bias ? load(b_.CreateGEP(b_.getFloatTy(), bias_, col), W) : nullptr;
      Value* upBias = spec_.bias ? load(b_.CreateGEP(b_.getFloatTy(), bias_, b_.CreateAdd(col, i64(outN))), W) : nullptr;
      for (int64_t i = 0; i < rows; ++i) {
        Value* gate = loadAccumulator(acc[i * vectorsPerRow_ + j]);
        Value* up = loadAccumulator(acc[i * vectorsPerRow_ + j + half]);
        if (gateScale) gate = b_.CreateFMul(gate, gateScale), up = b_.CreateFMul(up, upScale);
        if (gateBias) gate = b_.CreateFAdd(gate, gateBias), up = b_.CreateFAdd(up, upBias);
        Value* v = b_.CreateFMul(math_.activation(spec_.act, gate), up);
        store(v, b_.CreateGEP(b_.getFloatTy(), cFirst, i64(i * outN)), W);
      }
    }
  }

  // On a host that runs the row at half rate (MicroKernelShape::halfRate: 512-bit FMAs
  // as two 256-bit halves), a tail panel's last vector that holds at most half a vector
  // of columns accumulates in a half-width vector: one 256-bit FMA instead of two halves
  // for lanes that are zero padding. 23³ on the avx512 row: 2 × 16 lanes for 23 columns
  // become 16 + 8, 3 halves per row and k step instead of 4. The sums are the same
  // (the same FMAs on the lanes that are stored). f32 weights; not in the dot-product
  // tail (useRowTail), whose columns are rows of K.
  bool narrowsLastVector(int64_t columns) const {
    const int W = shape_.vectorFloats;
    return shape_.halfRate && W >= 16 && spec_.weightType == DType::F32 && !spec_.gated && columns < shape_.NR &&
           !layout_.hasRowTail() && columns % W != 0 && columns % W <= W / 2;
  }
  llvm::Type* accumulatorType(int j) {
    return narrowLast_ && j == vectorsPerRow_ - 1 ? llvm::FixedVectorType::get(b_.getFloatTy(), shape_.vectorFloats / 2)
                                                  : static_cast<llvm::Type*>(vecTy_);
  }
  static llvm::SmallVector<int, 16> firstLanes(int lanes, int of = 0) {
    llvm::SmallVector<int, 16> mask;
    for (int i = 0; i < (of > 0 ? of : lanes); ++i) mask.push_back(i < lanes ? i : lanes); // lanes: a zero
    return mask;
  }
  // An accumulator as a whole vector (a narrowed one with zeros above its lanes).
  Value* loadAccumulator(llvm::AllocaInst* slot) {
    Value* v = b_.CreateLoad(slot->getAllocatedType(), slot);
    if (v->getType() == vecTy_) return v;
    const int lanes = int(llvm::cast<llvm::FixedVectorType>(v->getType())->getNumElements());
    return b_.CreateShuffleVector(v, llvm::Constant::getNullValue(v->getType()), firstLanes(lanes, shape_.vectorFloats));
  }

  // Loads/stores of `lanes` floats (a full vector, or a partial one: PartialVector.h).
  Value* load(Value* ptr, int64_t lanes) { return loadFirstLanes(b_, vecTy_, ptr, lanes); }
  void store(Value* v, Value* ptr, int64_t lanes) {
    storeFirstLanes(b_, v, ptr, lanes, shape_.maskedStores);
  }

  const GemmSpec& spec_;
  const MicroKernelShape& shape_;
  CpuFeatures features_;
  PanelLayout layout_;
  llvm::IRBuilder<> b_;
  VectorMath math_;
  llvm::Function* fn_;
  llvm::FixedVectorType* vecTy_;
  llvm::Type* unitTy_ = nullptr; // element type of packed-B addressing: float, i16 or i8
  int vectorsPerRow_; // of the panel being emitted: NR / W, or fewer in a narrow tail panel
  bool narrowLast_ = false; // of the block being emitted: narrowsLastVector
  Value *A_, *B_, *bias_, *residual_, *C_, *aPackArg_, *panelBegin_, *panelEnd_, *rowBlockBegin_, *rowBlockEnd_;
  int64_t fullBlocks_ = 0;
  int64_t nextSliceRows_ = 0, nextLinesPerStep_ = 0, nextSliceBytes_ = 0; // planNextPanelPrefetch
  int blockPanels_ = 1; // blockPanels(): full panels this many at a time
  ResolvedBlocking blocking_{};
  Value* aPack_ = nullptr; // the packed A block (blocking_.packA): the aPack argument
  bool rowsDot_ = false;   // GemmSpec::weightRows at few rows: dot products along the rows
  std::vector<Value*> nextRows_; // weight rows the block being emitted prefetches (emitRowsPanel)
  bool wideB_ = false;     // widensPanels(): row blocks read an f32 copy of the panel
  Value* wide_ = nullptr;  // that copy (this K block of one panel), in aPack after packed A
  // The block being emitted: reads the copy (readWide_), or reads the packed panel and
  // writes the copy (storeWide_, the copy's pointer for absolute k), or neither.
  bool readWide_ = false;
  Value* storeWide_ = nullptr;
  bool unscaledI4_ = false; // emitKStep leaves i4 weights unscaled (a group's own sums)
  // The loop nest's current position (set by the enclosing loops while emitting).
  Value *jcBegin_ = nullptr, *jcEnd_ = nullptr;                        // panels of the NC chunk
  Value *icBegin_ = nullptr, *icEnd_ = nullptr, *icFullEnd_ = nullptr; // row blocks of the MC chunk
  Value* k0_ = nullptr;                                                // K block start
  int64_t kLen_ = 0;
  Value* firstK_ = nullptr; // i1: the first K block (a constant, or at run time among the blocks before the last)
  bool lastK_ = true;
  static bool isTrue(Value* v) { return llvm::isa<llvm::ConstantInt>(v) && llvm::cast<llvm::ConstantInt>(v)->isOne(); }
  static bool isFalse(Value* v) { return llvm::isa<llvm::ConstantInt>(v) && llvm::cast<llvm::ConstantInt>(v)->isZero(); }
};

} // namespace

std::unique_ptr<llvm::Module> emitGemmModule(llvm::LLVMContext& ctx, const GemmSpec& spec,
                                             const MicroKernelShape& shape, const CpuFeatures& features) {
  validateGemmSpec(spec);
  auto module = std::make_unique<llvm::Module>(gemmFunctionName(spec, shape), ctx);
  llvm::Function* fn = createKernelFunction(*module, gemmFunctionName(spec, shape),
                                            {"A", "Bpacked", "bias", "residual", "C", "aPack"},
                                            {"panelBegin", "panelEnd", "rowBlockBegin", "rowBlockEnd"});
  for (unsigned i : {0u, 1u, 2u}) { // read-only inputs that never overlap C
    fn->addParamAttr(i, llvm::Attribute::NoAlias);
    fn->addParamAttr(i, llvm::Attribute::ReadOnly);
  }
  fn->addParamAttr(3, llvm::Attribute::ReadOnly); // residual may be C itself
  fn->addParamAttr(1, llvm::Attribute::getWithAlignment(ctx, llvm::Align(64)));
  fn->addParamAttr(5, llvm::Attribute::NoAlias); // aPack: the kernel's own buffer
  fn->addParamAttr(5, llvm::Attribute::getWithAlignment(ctx, llvm::Align(64)));
  const MicroKernelShape kernelShape = kernelShapeFor(spec, shape);
  if (usesDotKernel(spec, kernelShape)) emitDotGemm(fn, spec, kernelShape, features);
  else GemmBuilder(fn, spec, kernelShape, features).emit();
  return module;
}

} // namespace nnc::codegen
