// .npy reading/writing and raw inputs: round trips, conversions, the real fixture
// files written by NumPy, and every kind of bad file (written byte by byte here),
// each checked for an error that names the file and states the numbers.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <gtest/gtest.h>

#include "UserErrorChecks.h"
#include "runtime/io/HalfFloat.h"
#include "runtime/io/Npy.h"

using namespace nnc;
namespace fs = std::filesystem;

namespace {

class NpyTest : public ::testing::Test {
protected:
  void SetUp() override {
    char tmpl[] = "/tmp/nnc_io_npy_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string writeFile(const std::string& name, const std::string& bytes) {
    std::string path = dir_ + "/" + name;
    std::ofstream(path, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
    return path;
  }
  std::string dir_;
};

// A .npy file with an arbitrary header dict and data, unpadded, of any version.
std::string npyBytes(const std::string& dict, const std::string& data, int major = 1) {
  std::string s("\x93NUMPY", 6);
  s += char(major);
  s += '\0';
  const size_t n = dict.size();
  s += char(n & 0xff);
  s += char(n >> 8 & 0xff);
  if (major > 1) {
    s += char(n >> 16 & 0xff);
    s += char(n >> 24 & 0xff);
  }
  return s + dict + data;
}

std::string dictFor(const std::string& descr, const std::string& shape, const char* fortran = "False") {
  return "{'descr': '" + descr + "', 'fortran_order': " + fortran + ", 'shape': " + shape + ", }\n";
}

template <typename T> std::string bytesOf(std::initializer_list<T> values) {
  std::string s;
  for (T v : values) s.append(reinterpret_cast<const char*>(&v), sizeof v);
  return s;
}

// Runs `f`, which must throw a UserError whose message contains every fragment.
} // namespace

// --- round trips and conversions ---------------------------------------------------

TEST_F(NpyTest, F32RoundTrip) {
  std::vector<float> values{1.5f, -2.0f, 0.0f, 3.25f, 1e-30f, -INFINITY};
  std::string path = dir_ + "/a.npy";
  writeNpy(path, makeF32Array({2, 3}, values));
  NpyArray back = readNpy(path);
  EXPECT_EQ(back.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(back.dtype, DType::F32);
  EXPECT_EQ(toFloats(back), values);
  EXPECT_EQ(fs::file_size(path) % 64, 24u) << "data starts at a multiple of 64 bytes";
}

TEST_F(NpyTest, I32RoundTripAndOneDimensionalShape) {
  NpyArray a{{3}, DType::I32, {}};
  a.data.resize(12);
  int32_t v[3] = {7, -1, INT32_MAX};
  std::memcpy(a.data.data(), v, 12);
  std::string path = dir_ + "/i.npy";
  writeNpy(path, a);
  NpyArray back = readNpy(path, DType::I32);
  EXPECT_EQ(back.shape, std::vector<int64_t>{3});
  EXPECT_EQ(back.data, a.data);
}

TEST_F(NpyTest, ScalarAndEmptyShapes) {
  NpyArray s = readNpy(writeFile("s.npy", npyBytes(dictFor("<f4", "()"), bytesOf<float>({4.0f}))));
  EXPECT_TRUE(s.shape.empty());
  EXPECT_EQ(toFloats(s), std::vector<float>{4.0f});
  NpyArray e = readNpy(writeFile("e.npy", npyBytes(dictFor("<f4", "(0, 3)"), "")));
  EXPECT_EQ(e.elementCount(), 0);
}

TEST_F(NpyTest, ReadsVersions2And3AndOldStyleHeaders) {
  std::string data = bytesOf<float>({1, 2});
  for (int major : {2, 3})
    EXPECT_EQ(toFloats(readNpy(writeFile("v.npy", npyBytes(dictFor("<f4", "(2,)"), data, major)))),
              (std::vector<float>{1, 2}));
  // Python 2 wrote long dimensions ("2L"); keys may come in any order and quoting.
  std::string old = "{\"shape\": (1L, 2L), \"fortran_order\": False, \"descr\": \"<f4\"}";
  EXPECT_EQ(readNpy(writeFile("old.npy", npyBytes(old, data))).shape, (std::vector<int64_t>{1, 2}));
}

TEST_F(NpyTest, ConvertsAcceptedDtypesToF32) {
  auto read = [&](const std::string& descr, const std::string& data) {
    return toFloats(readNpy(writeFile("c.npy", npyBytes(dictFor(descr, "(3,)"), data))));
  };
  std::vector<float> want{1.0f, -0.5f, 2048.0f};
  EXPECT_EQ(read("<f2", bytesOf<uint16_t>({floatToHalf(1), floatToHalf(-0.5f), floatToHalf(2048)})), want);
  EXPECT_EQ(read("<f8", bytesOf<double>({1.0, -0.5, 2048.0})), want);
  EXPECT_EQ(read("<i4", bytesOf<int32_t>({1, -7, 16777216})), (std::vector<float>{1, -7, 16777216}));
  EXPECT_EQ(read("<i8", bytesOf<int64_t>({1, -7, -16777216})), (std::vector<float>{1, -7, -16777216}));
}

TEST_F(NpyTest, ConvertsToF16BF16AndI32) {
  std::string f4 = writeFile("f.npy", npyBytes(dictFor("<f4", "(2,)"), bytesOf<float>({1.0f / 3, 65504.0f})));
  NpyArray h = readNpy(f4, DType::F16);
  EXPECT_EQ(h.data.size(), 4u);
  EXPECT_EQ(toFloats(h), (std::vector<float>{halfToFloat(floatToHalf(1.0f / 3)), 65504.0f}));
  EXPECT_EQ(toFloats(readNpy(f4, DType::BF16))[0], bf16ToFloat(floatToBf16(1.0f / 3)));
  std::string i8 = writeFile("i.npy", npyBytes(dictFor("<i8", "(2,)"), bytesOf<int64_t>({-5, INT32_MAX})));
  EXPECT_EQ(toFloats(readNpy(i8, DType::I32)), (std::vector<float>{-5, float(INT32_MAX)}));
}

TEST_F(NpyTest, ReadsEveryCommittedFixture) {
  int count = 0;
  for (const char* dir : {"/examples", "/tests/fixtures"})
    for (const auto& entry : fs::recursive_directory_iterator(std::string(NNC_SOURCE_DIR) + dir))
      if (entry.path().extension() == ".npy") {
        NpyArray a = readNpy(entry.path().string());
        EXPECT_EQ(int64_t(a.data.size()), a.elementCount() * 4) << entry.path();
        ++count;
      }
  EXPECT_GT(count, 5);
}

// --- bad .npy files -----------------------------------------------------------------

TEST_F(NpyTest, BadMagic) {
  std::string path = writeFile("bad.npy", "PK\x03\x04 this is a zip");
  EXPECT_TRUE(test::throwsUserError([&] { readNpy(path); }, {path, "not a .npy file", "magic", "50 4b 03 04"}));
  std::string empty = writeFile("empty.npy", "");
  EXPECT_TRUE(test::throwsUserError([&] { readNpy(empty); }, {empty, "not a .npy file", "an empty file"}));
}

TEST_F(NpyTest, TruncatedPreamble) {
  std::string path = writeFile("t.npy", std::string("\x93NUMPY\x01\x00\x10", 9));
  EXPECT_TRUE(test::throwsUserError([&] { readNpy(path); }, {path, "truncated .npy header", "9 bytes", "needs 10"}));
  std::string v2 = writeFile("t2.npy", std::string("\x93NUMPY\x02\x00\x10\x00", 10));
  EXPECT_TRUE(test::throwsUserError([&] { readNpy(v2); }, {v2, "truncated", "10 bytes", "needs 12"}));
}

TEST_F(NpyTest, UnsupportedVersion) {
  std::string path = writeFile("v.npy", npyBytes(dictFor("<f4", "(1,)"), bytesOf<float>({1}), 4));
  EXPECT_TRUE(test::throwsUserError([&] { readNpy(path); }, {path, "version 4.0", "1.0, 2.0, 3.0"}));
}

TEST_F(NpyTest, HeaderLengthPastEnd) {
  std::string bytes = npyBytes(dictFor("<f4", "(1,)"), "");
  bytes[8] = char(0xff); // claim 0x..ff bytes of header
  std::string path = writeFile("h.npy", bytes);
  const size_t claimed = 0xff | (size_t(uint8_t(bytes[9])) << 8);
  EXPECT_TRUE(test::throwsUserError([&] { readNpy(path); }, {path, "header length " + std::to_string(claimed),
                                                             "past the end", std::to_string(bytes.size()) + " bytes"}));
}

TEST_F(NpyTest, MalformedHeaderDict) {
  std::string path = writeFile("m.npy", npyBytes("{'descr': '<f4', 'shape': [2]}", ""));
  EXPECT_TRUE(test::throwsUserError([&] { readNpy(path); }, {path, "malformed .npy header", "'shape'", "'('"}));
  std::string missing = writeFile("k.npy", npyBytes("{'descr': '<f4', 'shape': (2,)}", ""));
  EXPECT_TRUE(test::throwsUserError([&] { readNpy(missing); }, {missing, "fortran_order"}));
  std::string extra = writeFile("x.npy", npyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (), 'x': 1}", ""));
  EXPECT_TRUE(test::throwsUserError([&] { readNpy(extra); }, {extra, "key 'x'"}));
  std::string unterminated = writeFile("u.npy", npyBytes("{'descr': '<f4", ""));
  EXPECT_TRUE(test::throwsUserError([&] { readNpy(unterminated); }, {unterminated, "closing quote"}));
}

TEST_F(NpyTest, UnsupportedDtypeListsAccepted) {
  std::string path = writeFile("u8.npy", npyBytes(dictFor("|u1", "(4,)"), "abcd"));
  EXPECT_TRUE(test::throwsUserError([&] { readNpy(path); },
                                    {path, "unsupported .npy dtype '|u1'", "'<f4', '<f2', '<f8', '<i4', '<i8'"}));
  std::string structured =
      writeFile("st.npy", npyBytes("{'descr': [('x', '<f4')], 'fortran_order': False, 'shape': (1,), }", "abcd"));
  EXPECT_TRUE(
      test::throwsUserError([&] { readNpy(structured); }, {structured, "structured dtype", "[('x', '<f4')]", "'<f4'"}));
}

TEST_F(NpyTest, BigEndian) {
  std::string path = writeFile("be.npy", npyBytes(dictFor(">f4", "(1,)"), "\x3f\x80\x00\x00"));
  EXPECT_TRUE(test::throwsUserError([&] { readNpy(path); }, {path, "big-endian", "'>f4'", "'<f4'"}));
}

TEST_F(NpyTest, FortranOrder) {
  std::string path = writeFile("fo.npy", npyBytes(dictFor("<f4", "(1,)", "True"), bytesOf<float>({1})));
  EXPECT_TRUE(test::throwsUserError([&] { readNpy(path); }, {path, "Fortran", "C order"}));
}

TEST_F(NpyTest, DataShorterOrLongerThanShape) {
  std::string shortFile = writeFile("short.npy", npyBytes(dictFor("<f4", "(2, 3)"), std::string(20, '\0')));
  EXPECT_TRUE(test::throwsUserError([&] { readNpy(shortFile); },
                                    {shortFile, "20 bytes", "(2, 3)", "needs 24 bytes", "6 elements", "truncated"}));
  std::string longFile = writeFile("long.npy", npyBytes(dictFor("<f8", "(2,)"), std::string(17, '\0')));
  EXPECT_TRUE(
      test::throwsUserError([&] { readNpy(longFile); }, {longFile, "17 bytes", "needs 16 bytes", "extra bytes"}));
}

TEST_F(NpyTest, ShapeOverflowAndNegativeDimensions) {
  std::string big = writeFile("big.npy", npyBytes(dictFor("<f4", "(4294967296, 4294967296)"), ""));
  EXPECT_TRUE(test::throwsUserError([&] { readNpy(big); }, {big, "(4294967296, 4294967296)", "64 bits"}));
  std::string bytesOverflow = writeFile("b2.npy", npyBytes(dictFor("<f8", "(2305843009213693952,)"), ""));
  EXPECT_TRUE(test::throwsUserError([&] { readNpy(bytesOverflow); }, {bytesOverflow, "64 bits"}));
  std::string huge = writeFile("huge.npy", npyBytes(dictFor("<f4", "(99999999999999999999,)"), ""));
  EXPECT_TRUE(test::throwsUserError([&] { readNpy(huge); }, {huge, "99999999999999999999", "64 bits"}));
  std::string negative = writeFile("neg.npy", npyBytes(dictFor("<f4", "(-1, 2)"), ""));
  EXPECT_TRUE(test::throwsUserError([&] { readNpy(negative); }, {negative, "non-negative dimension", "'-1"}));
}

TEST_F(NpyTest, LossyConversionsAreRefused) {
  std::string ints = writeFile("big_int.npy", npyBytes(dictFor("<i8", "(2,)"), bytesOf<int64_t>({1, 16777217})));
  EXPECT_TRUE(
      test::throwsUserError([&] { readNpy(ints); }, {ints, "element 1", "16777217", "f32 cannot hold exactly"}));
  EXPECT_TRUE(test::throwsUserError([&] { readNpy(ints, DType::I8); }, {ints, "as i8"}));
  std::string wide = writeFile("wide.npy", npyBytes(dictFor("<i8", "(1,)"), bytesOf<int64_t>({int64_t(1) << 40})));
  EXPECT_TRUE(
      test::throwsUserError([&] { readNpy(wide, DType::I32); }, {wide, "element 0", "1099511627776", "i32 range"}));
  std::string floats = writeFile("fl.npy", npyBytes(dictFor("<f4", "(1,)"), bytesOf<float>({1})));
  EXPECT_TRUE(test::throwsUserError([&] { readNpy(floats, DType::I32); }, {floats, "'<f4'", "i32", "'<i4', '<i8'"}));
}

// A finite value beyond the target's range became ±inf silently (1e39 from '<f8' as f32,
// 70000 as f16), where an integer f32 cannot hold exactly is refused.
TEST_F(NpyTest, FiniteValuesBeyondTheRangeAreRefused) {
  std::string f8 = writeFile("f8.npy", npyBytes(dictFor("<f8", "(4,)"), bytesOf<double>({1, 2, 3, -1e39})));
  EXPECT_TRUE(test::throwsUserError([&] { readNpy(f8); },
                                    {f8, "element 3 is -1e+39, beyond the range of f32 (largest finite 3.40282e+38)"}));
  std::string f4 = writeFile("f4.npy", npyBytes(dictFor("<f4", "(2,)"), bytesOf<float>({1, 70000})));
  EXPECT_TRUE(test::throwsUserError([&] { readNpy(f4, DType::F16); },
                                    {f4, "element 1 is 70000, beyond the range of f16 (largest finite 65504)"}));
  EXPECT_EQ(toFloats(readNpy(f4, DType::BF16))[1], 70144.0f); // within bf16's range: rounded
  // Infinities and NaN are values, not overflows: they pass as they are.
  std::string inf = writeFile("inf.npy", npyBytes(dictFor("<f8", "(2,)"), bytesOf<double>({INFINITY, NAN})));
  const std::vector<float> v = toFloats(readNpy(inf));
  EXPECT_TRUE(std::isinf(v[0]) && std::isnan(v[1]));
  // The largest f32 from f64 rounds to itself; just above it rounds down, far above is refused.
  std::string edge = writeFile("edge.npy", npyBytes(dictFor("<f8", "(2,)"), bytesOf<double>({3.4028234663852886e38,
                                                                                             3.4028235e38})));
  EXPECT_EQ(toFloats(readNpy(edge))[1], 3.4028234663852886e38f);
}

// Token ids (read as i32) take integers only: the list of accepted dtypes said '<f4',
// '<f2', '<f8' too, which the next step then refused.
TEST_F(NpyTest, TokenIdsListOnlyIntegerDtypes) {
  std::string u1 = writeFile("u1.npy", npyBytes(dictFor("|u1", "(4,)"), "abcd"));
  EXPECT_TRUE(test::throwsUserError([&] { readNpy(u1, DType::I32); },
                                    {u1, "unsupported .npy dtype '|u1'; accepted for i32: '<i4', '<i8'"}));
  EXPECT_FALSE(test::throwsUserError([&] { readNpy(u1, DType::I32); }, {"<f4"}));
  std::string beFloat = writeFile("bef.npy", npyBytes(dictFor(">f4", "(1,)"), "\x3f\x80\x00\x00"));
  EXPECT_TRUE(test::throwsUserError([&] { readNpy(beFloat, DType::I32); },
                                    {beFloat, "unsupported .npy dtype '>f4'; accepted for i32: '<i4', '<i8'"}));
  std::string beInt = writeFile("bei.npy", npyBytes(dictFor(">i4", "(1,)"), "\x00\x00\x00\x01"));
  EXPECT_TRUE(test::throwsUserError([&] { readNpy(beInt, DType::I32); }, {beInt, "big-endian", "'>i4'", "'<i4'"}));
}

TEST_F(NpyTest, MissingFile) {
  std::string path = dir_ + "/nope.npy";
  EXPECT_TRUE(test::throwsUserError([&] { readNpy(path); }, {path, "cannot open", "No such file"}));
  EXPECT_TRUE(test::throwsUserError([&] { readNpy(dir_); }, {dir_, "cannot"}));
}

// --- raw inputs ---------------------------------------------------------------------

TEST_F(NpyTest, RawInputOfExactSize) {
  std::string path = writeFile("in.bin", bytesOf<float>({1, 2, 3, 4}));
  EXPECT_EQ(readRawInput(path, 4, DType::F32).size(), 16u);
  EXPECT_EQ(readRawInput(path, 8, DType::F16).size(), 16u);
}

TEST_F(NpyTest, RawInputOfWrongSizeStatesBothSizes) {
  std::string path = writeFile("in.bin", std::string(40, '\0'));
  try {
    readRawInput(path, 4, DType::F32);
    FAIL() << "expected RawInputSizeError";
  } catch (const RawInputSizeError& e) {
    std::string m = e.what();
    for (const char* fragment : {"expected 4 f32 elements (16 bytes)", "found 40 bytes (10 elements)"})
      EXPECT_NE(m.find(fragment), std::string::npos) << m;
    EXPECT_NE(m.find(path), std::string::npos) << m;
    EXPECT_EQ(e.foundElements, 10);
    EXPECT_EQ(e.foundBytes, 40);
    EXPECT_TRUE(e.wholeElements);
  }
  std::string ragged = writeFile("ragged.bin", std::string(10, '\0'));
  EXPECT_TRUE(test::throwsUserError([&] { readRawInput(ragged, 4, DType::F32); },
                                    {ragged, "16 bytes", "found 10 bytes", "2 whole elements and 2 bytes over"}));
}

// /proc and /sys files state a size (0, 4096) that is not what they hold: a small stated
// size is counted by reading, so the message gives the bytes there are.
TEST_F(NpyTest, RawInputFromAFileWhoseStatedSizeIsNotItsSize) {
  const std::string proc = "/proc/self/cmdline"; // states 0 bytes
  std::ifstream in(proc, std::ios::binary);
  const std::string held((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GT(held.size(), 0u);
  ASSERT_EQ(fs::file_size(proc), 0u);
  try {
    readRawInput(proc, int64_t(held.size()) + 1, DType::F32);
    FAIL() << "expected RawInputSizeError";
  } catch (const RawInputSizeError& e) {
    EXPECT_EQ(e.foundBytes, int64_t(held.size())) << e.what();
  }
}

// --- robustness -----------------------------------------------------------------------

// Every proper prefix of a valid file, and thousands of random byte corruptions, end
// in a UserError or a successful read — never a crash or another exception.
TEST_F(NpyTest, EveryTruncationAndRandomCorruptionIsHandled) {
  std::string path = dir_ + "/good.npy";
  writeNpy(path, makeF32Array({3, 4}, std::vector<float>(12, 1.0f)));
  std::ifstream in(path, std::ios::binary);
  const std::string good((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (size_t n = 0; n < good.size(); ++n)
    EXPECT_THROW(readNpy(writeFile("prefix.npy", good.substr(0, n))), UserError) << "prefix " << n;
  uint32_t seed = 12345;
  auto next = [&] { return seed = seed * 1664525u + 1013904223u; };
  for (int trial = 0; trial < 3000; ++trial) {
    std::string bad = good;
    for (int k = 0; k < 1 + int(next() % 3); ++k) bad[next() % 80] = char(next() >> 24); // preamble and header
    try {
      readNpy(writeFile("mutant.npy", bad));
    } catch (const UserError&) {
    }
  }
}
