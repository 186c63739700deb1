// --svg FILE: a picture of where the parameters and the MACs sit.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "NncProcess.h"

using namespace nnc_cli_test;

TEST(Svg, AlexNetShowsParameterAndMacShares) {
  TempDir dir;
  std::string out = dir.write("a.svg", "");
  Result r = runNnc({"examples/seeds/alexnet.nn", "--svg", out});
  ASSERT_EQ(r.exitCode, 0) << r.describe();
  std::ifstream in(out);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string svg = ss.str();
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_NE(svg.find("fc6 (dense)"), std::string::npos);
  EXPECT_NE(svg.find("37,752,832 (61.9 %)"), std::string::npos) << svg.substr(0, 2000);
  EXPECT_NE(svg.find("223,948,800 (30.9 %)"), std::string::npos); // conv2 does the most work
  // Pages 001 and 003: weight memory per dtype against the devices, and the roofline.
  for (const char *part : {"Weight memory per dtype", "f32   243,860,896 B (243.86 MB)", "MCU flash 1 MB",
                           "MCU SRAM 256 kB", "cards: 8, 16, 24, 48, 80 GB", "Roofline at batch 1: this host",
                           "GFLOP/s", "ridge at", "fc6 (dense)"})
    EXPECT_NE(svg.find(part), std::string::npos) << part;
}

TEST(Svg, UnwritablePathIsAUserError) {
  Result r = runNnc({"examples/seeds/mnist.nn", "--svg", "/nonexistent-dir/x.svg"});
  EXPECT_EQ(r.exitCode, 1) << r.describe();
  EXPECT_NE(r.err.find("/nonexistent-dir/x.svg"), std::string::npos) << r.describe();
}
