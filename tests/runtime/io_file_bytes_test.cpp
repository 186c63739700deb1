// writeFileReplacing (runtime/io/FileBytes.h): the file holds every piece, in order,
// however many there are (more than one writev takes: IOV_MAX) and whatever their sizes
// (empty ones included), replaces an older file at the path, and leaves no temporary.
#include <gtest/gtest.h>

#include <cerrno>
#include <climits>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "runtime/io/FileBytes.h"
#include "WeightFiles.h"

namespace nnc::testing {
namespace {
namespace fs = std::filesystem;

TEST(WriteFileReplacing, WritesEveryPieceInOrderAndReplacesTheOldFile) {
  test::TempDir dir("nnc_file_bytes_");
  const std::string path = (dir.path / "entry").string();
  ASSERT_EQ(writeFileReplacing(path, {{"old contents", 12}}), 0);

  // 2.5 × IOV_MAX pieces of 0 to 4,999 bytes, each of its own bytes.
  const size_t count = IOV_MAX * 5 / 2;
  std::vector<std::vector<uint8_t>> bytes(count);
  std::vector<FilePiece> pieces;
  std::vector<uint8_t> expected;
  for (size_t i = 0; i < count; ++i) {
    bytes[i].resize((i * 7919) % 5000);
    for (size_t j = 0; j < bytes[i].size(); ++j) bytes[i][j] = uint8_t(i * 131 + j);
    pieces.push_back({bytes[i].data(), bytes[i].size()});
    expected.insert(expected.end(), bytes[i].begin(), bytes[i].end());
  }
  ASSERT_EQ(writeFileReplacing(path, pieces), 0);

  const std::vector<uint8_t> got = readFileBytes(path, "written file");
  ASSERT_EQ(got.size(), expected.size());
  EXPECT_TRUE(got == expected) << "the file's bytes are not the pieces' in order";
  std::vector<std::string> files;
  for (const auto &e : fs::directory_iterator(dir.path)) files.push_back(e.path().filename().string());
  EXPECT_EQ(files, std::vector<std::string>{"entry"}) << "a temporary was left behind";
}

TEST(WriteFileReplacing, ReportsWhyItCannotWrite) {
  test::TempDir dir("nnc_file_bytes_");
  const std::string path = (dir.path / "missing" / "entry").string(); // no such directory
  const char text[] = "x";
  EXPECT_EQ(writeFileReplacing(path, {{text, 1}}), ENOENT);
  EXPECT_FALSE(fs::exists(dir.path / "missing"));
}

} // namespace
} // namespace nnc::testing
