// Inputs and outputs chosen by extension: .npy (any case) or raw little-endian f32.
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <gtest/gtest.h>

#include "runtime/io/FileBytes.h"
#include "runtime/io/TensorFiles.h"

using namespace nnc;
namespace fs = std::filesystem;

class TensorFilesTest : public ::testing::Test {
protected:
  void SetUp() override {
    char tmpl[] = "/tmp/nnc_io_tf_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_;
};

TEST_F(TensorFilesTest, NpyOutputKeepsShapeAndReadsBack) {
  for (const char* name : {"/out.npy", "/OUT.NPY"}) {
    std::string path = dir_ + name;
    writeOutputFile(path, {2, 2}, {1, 2, 3, 4});
    NpyArray back = readInputFile(path, DType::F32, 999);
    EXPECT_EQ(back.shape, (std::vector<int64_t>{2, 2}));
    EXPECT_EQ(toFloats(back), (std::vector<float>{1, 2, 3, 4}));
  }
}

TEST_F(TensorFilesTest, RawOutputIsBareLittleEndianF32) {
  std::string path = dir_ + "/out.bin";
  writeOutputFile(path, {3}, {1.0f, -2.0f, 0.25f});
  std::vector<uint8_t> bytes = readFileBytes(path, "test file");
  ASSERT_EQ(bytes.size(), 12u);
  float values[3];
  std::memcpy(values, bytes.data(), 12);
  EXPECT_EQ(values[1], -2.0f);
  NpyArray back = readInputFile(path, DType::F32, 3);
  EXPECT_EQ(back.shape, std::vector<int64_t>{3});
  EXPECT_EQ(toFloats(back), (std::vector<float>{1.0f, -2.0f, 0.25f}));
  EXPECT_THROW(readInputFile(path, DType::F32, 4), RawInputSizeError);
}

TEST_F(TensorFilesTest, UnwritablePathIsAUserError) {
  std::string path = dir_ + "/no/such/dir/out.npy";
  try {
    writeOutputFile(path, {1}, {1});
    FAIL() << "expected a UserError";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("cannot create"), std::string::npos) << e.what();
  }
}
