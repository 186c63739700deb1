// clipped / clipMessage: text from a user's file is echoed at a bounded length, control
// bytes hidden and UTF-8 never cut mid-character; closestMatch skips long words.
#include <gtest/gtest.h>

#include "compiler/support/Diagnostics.h"

using namespace nnc;

TEST(ClippedText, ShortTextStaysControlBytesAreHidden) {
  EXPECT_EQ(clipped("fc1.weight"), "fc1.weight");
  EXPECT_EQ(clipped("a\nb\x1b[31m"), "a?b?[31m");
}

TEST(ClippedText, LongTextIsCutAndMeasured) {
  std::string mb(1 << 20, 'x');
  std::string c = clipped(mb);
  EXPECT_EQ(c, std::string(80, 'x') + "... (1,048,576 bytes)");
  // "é" is two bytes; a cut inside it backs off to the character's start.
  std::string accents;
  for (int i = 0; i < 100; ++i) accents += "\xc3\xa9";
  std::string cut = clipped(accents, 81);
  EXPECT_EQ(cut.substr(0, 80), accents.substr(0, 80));
  EXPECT_EQ(cut.substr(80, 3), "...");
}

TEST(ClippedText, MessagesAreBounded) {
  EXPECT_EQ(clipMessage("line 1\nline 2"), "line 1\nline 2");
  std::string huge(100000, 'y');
  std::string m = clipMessage(huge);
  EXPECT_EQ(m.size(), kMaxMessageBytes); // the mark included: as much text as fits with it
  EXPECT_NE(m.find("message cut: 100,000 bytes in all"), std::string::npos);
}

TEST(ClippedText, ClosestMatchIgnoresLongWords) {
  EXPECT_EQ(closestMatch("desne", {"dense", "relu"}), "dense");
  EXPECT_EQ(closestMatch(std::string(1 << 20, 'd'), {"dense"}), ""); // and fast: no 1 MB x 5 table
}
