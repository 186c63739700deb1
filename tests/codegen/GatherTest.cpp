// The embedding's row gather against a plain copy, on every CPU row this host runs:
// widths around the vector width (masked tails), the table and the output flush against
// guard pages (a read past the table or a write past the output faults), and ids
// outside [0, vocab) — negative, vocab itself, INT32_MAX — read nothing and write zeros.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "RowEngines.h"
#include "compiler/codegen/GatherEmitter.h"
#include "compiler/codegen/PackLayout.h"

namespace nnc::testing {
namespace {

using codegen::GatherKernelFn;
using codegen::GatherSpec;

TEST(Gather, CopiesTheTableRowOfEveryId) {
  std::mt19937 rng(11);
  for (const RowEngine& row : executableRows()) {
    for (int64_t cols : {1, 3, 4, 7, 8, 9, 16, 17, 33, 100}) {
      const int64_t vocab = 13, rows = 23;
      GatherSpec s;
      s.rows = rows;
      s.seq = 23;
      s.vocab = vocab;
      s.cols = cols;
      auto f = reinterpret_cast<GatherKernelFn>(row.jit->kernel(s));
      GuardedBuffer table(size_t(vocab * cols), /*guardAfter=*/true), out(size_t(rows * cols), true);
      for (size_t i = 0; i < table.size(); ++i) table.data()[i] = float(i) * 0.25f - 3.0f;
      std::vector<int32_t> ids(static_cast<size_t>(rows));
      for (auto& id : ids) id = int32_t(rng() % vocab);
      ids[0] = 0, ids[1] = int32_t(vocab - 1); // the first and the last row
      for (int64_t split : {int64_t(0), int64_t(7)}) { // one range, or two (as threads run it)
        for (size_t i = 0; i < out.size(); ++i) out.data()[i] = -1.0f;
        f(ids.data(), table.data(), out.data(), 0, split);
        f(ids.data(), table.data(), out.data(), split, rows);
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t c = 0; c < cols; ++c)
            ASSERT_EQ(out.data()[r * cols + c], table.data()[ids[size_t(r)] * cols + c])
                << row.family << " cols " << cols << " row " << r << " col " << c;
      }
    }
  }
}

// A table stored below f32 (rowTableLayout: docs/lowering.md, "Storage dtypes") gives
// exactly the values the packing stores: f16/bf16 rounded, i8 q · s with one scale per
// row, i4 q · s per group along the row (odd vocab: the last i4 pair is half padding;
// groups that do not divide the row; rows longer than the packing's 256-step tile). The
// reference is storedWeightValues, so equal.
TEST(Gather, ReadsTablesStoredInEveryDtype) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (const RowEngine& row : executableRows()) {
    for (DType type : {DType::F16, DType::BF16, DType::I8, DType::I4}) {
      int64_t differing = 0; // stored values that differ from w (the rounding is real)
      for (int64_t cols : {1, 7, 16, 37, 300}) {
        const int64_t vocab = 11, rows = 19, group = 8;
        GatherSpec s;
        s.rows = rows, s.seq = rows, s.vocab = vocab, s.cols = cols;
        s.tableType = type;
        s.group = type == DType::I4 ? group : 0;
        const codegen::PanelLayout layout = codegen::rowTableLayout(vocab, cols, type, s.group);
        std::vector<float> w(size_t(vocab * cols));
        for (auto& v : w) v = normal(rng) * (1.0f + float(&v - w.data()) / float(cols)); // rows of unequal size
        GuardedBuffer table(size_t((layout.totalBytes() + 3) / 4), true);
        codegen::packWeightsPanel(layout, w.data(), table.data());
        const std::vector<float> want = codegen::storedWeightValues(layout, w.data());
        auto f = reinterpret_cast<GatherKernelFn>(row.jit->kernel(s));
        std::vector<int32_t> ids(static_cast<size_t>(rows));
        for (auto& id : ids) id = int32_t(rng() % vocab);
        ids[0] = 0, ids[1] = int32_t(vocab - 1);
        GuardedBuffer out(size_t(rows * cols), true);
        f(ids.data(), table.data(), out.data(), 0, rows);
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t c = 0; c < cols; ++c) {
            const size_t i = size_t(ids[size_t(r)] * cols + c);
            ASSERT_EQ(out.data()[r * cols + c], want[i])
                << row.family << " " << dtypeName(type) << " cols " << cols << " row " << r << " col " << c;
            differing += want[i] != w[i];
          }
      }
      EXPECT_GT(differing, 0) << dtypeName(type);
    }
  }
}

TEST(Gather, IdsOutsideTheVocabularyReadNothingAndWriteZeros) {
  for (const RowEngine& row : executableRows()) {
    GatherSpec s;
    s.rows = 5;
    s.vocab = 4;
    s.cols = 9;
    auto f = reinterpret_cast<GatherKernelFn>(row.jit->kernel(s));
    GuardedBuffer table(size_t(s.vocab * s.cols), true), before(size_t(s.vocab * s.cols), false);
    GuardedBuffer out(size_t(s.rows * s.cols), true);
    for (size_t i = 0; i < table.size(); ++i) table.data()[i] = before.data()[i] = 1.0f + float(i);
    const std::vector<int32_t> ids = {-1, 4, std::numeric_limits<int32_t>::max(),
                                      std::numeric_limits<int32_t>::min(), 3};
    for (GuardedBuffer* t : {&table, &before}) { // guard after the table, then before it
      for (size_t i = 0; i < out.size(); ++i) out.data()[i] = -1.0f;
      f(ids.data(), t->data(), out.data(), 0, s.rows);
      for (int64_t r = 0; r < 4; ++r)
        for (int64_t c = 0; c < s.cols; ++c) ASSERT_EQ(out.data()[r * s.cols + c], 0.0f) << row.family << " row " << r;
      for (int64_t c = 0; c < s.cols; ++c) ASSERT_EQ(out.data()[4 * s.cols + c], t->data()[3 * s.cols + c]);
    }
  }
}

TEST(Gather, KeyNamesVocabularyAndWidthOnly) {
  GatherSpec a, b;
  a.rows = 3, a.seq = 3, a.vocab = 10, a.cols = 8;
  b = a;
  b.rows = 30, b.seq = 5;
  EXPECT_EQ(a.key(), b.key()); // rows and seq are runtime matters
  b.vocab = 11;
  EXPECT_NE(a.key(), b.key());
  GatherSpec bad = a;
  bad.vocab = 0;
  EXPECT_THROW(codegen::validateGatherSpec(bad), std::invalid_argument);
}

} // namespace
} // namespace nnc::testing
