#include <gtest/gtest.h>

#include "compiler/support/CheckedMath.h"
#include "compiler/support/Diagnostics.h"

using namespace nnc;

TEST(Diagnostics, RendersFileLineColumnSourceAndCaret) {
  SourceFile f("m.nn", "model m {\n  dense(3)\n}\n");
  DiagnosticEngine d(&f);
  d.error({{2, 3}, {2, 7}}, "something wrong");
  std::string out = d.render();
  EXPECT_EQ(out, "m.nn:2:3: error: something wrong\n    2 |   dense(3)\n      |   ^~~~~\n");
}

// Past the cap, warnings are counted and said, their notes dropped with them (not hung
// on the last kept warning), and an error after many warnings is still kept.
TEST(Diagnostics, ManyWarningsNeitherHideAnErrorNorMoveTheirNotes) {
  SourceFile f("m.nn", "model m {\n  dense(3)\n}\n");
  DiagnosticEngine d(&f);
  const size_t n = DiagnosticEngine::kMaxErrors + 10;
  for (size_t i = 0; i < n; ++i) {
    d.warning({{2, 3}, {2, 7}}, "warning " + std::to_string(i));
    d.note({{2, 3}, {2, 7}}, "its note");
  }
  d.error({{2, 3}, {2, 7}}, "the error");
  EXPECT_EQ(d.warningCount(), n);
  EXPECT_EQ(d.errorCount(), 1u);
  ASSERT_EQ(d.diagnostics().size(), DiagnosticEngine::kMaxErrors + 1);
  for (size_t i = 0; i < DiagnosticEngine::kMaxErrors; ++i) EXPECT_EQ(d.diagnostics()[i].notes.size(), 1u) << i;
  EXPECT_EQ(d.diagnostics().back().message, "the error");
  EXPECT_NE(d.render().find("nnc: 10 more warnings not shown"), std::string::npos);
}

TEST(Diagnostics, ClosestMatchAndCommas) {
  EXPECT_EQ(closestMatch("desne", {"dense", "conv2d"}), "dense");
  EXPECT_EQ(closestMatch("xyz", {"dense", "conv2d"}), "");
  EXPECT_EQ(withCommas(6738415616), "6,738,415,616");
  EXPECT_EQ(withCommas(-1234), "-1,234");
  EXPECT_EQ(withCommas(0), "0");
}

TEST(CheckedMath, OverflowThrows) {
  EXPECT_THROW(mulChecked(INT64_MAX, 2), CountOverflow);
  EXPECT_THROW(addChecked(INT64_MAX, 1), CountOverflow);
  EXPECT_EQ(mulChecked(3, 4, 5), 60);
}

TEST(Diagnostics, OneDecimalWithCommas) {
  EXPECT_EQ(withCommas1(1365.33), "1,365.3");
  EXPECT_EQ(withCommas1(0.998), "1.0");
  EXPECT_EQ(withCommas1(180.7), "180.7");
}
