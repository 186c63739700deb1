#include <gtest/gtest.h>

#include <sstream>

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

// A line longer than the excerpt's 200 bytes: the excerpt is a window around the
// column, cut with "...", and the caret under the mistake (it sat under the "..."
// at the 200th byte).
TEST(Diagnostics, ALongLineIsShownAroundTheColumn) {
  std::string longLine = "  ";
  for (int i = 0; i < 3000; ++i) longLine += "relu ";
  const uint32_t col = uint32_t(longLine.size()) + 1;
  longLine += "desne(3)";
  for (int i = 0; i < 100; ++i) longLine += " relu";
  SourceFile f("m.nn", "model m {\n  input x: [4]\n" + longLine + "\n}\n");
  DiagnosticEngine d(&f);
  d.error({{3, col}, {3, col + 4}}, "unknown layer 'desne'");
  std::istringstream out(d.render());
  std::string head, excerpt, caret;
  std::getline(out, head), std::getline(out, excerpt), std::getline(out, caret);
  EXPECT_EQ(excerpt.substr(0, 12), "    3 | ...r"); // cut before
  EXPECT_EQ(excerpt.substr(excerpt.size() - 3), "..."); // and after
  EXPECT_LE(excerpt.size(), 8u + 3u + 200u + 3u);
  const size_t at = caret.find('^');
  ASSERT_NE(at, std::string::npos) << caret;
  EXPECT_EQ(excerpt.substr(at, 5), "desne") << excerpt << "\n" << caret;
  EXPECT_EQ(caret.substr(at), "^~~~~");
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
