// .safetensors reading and writing: round trips, F16/BF16 conversion, the committed
// PyTorch fixtures, and every kind of bad file (header bytes written here), each
// checked for an error naming the file, the tensor, and the numbers.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "UserErrorChecks.h"
#include "compiler/support/Error.h"
#include "runtime/io/HalfFloat.h"
#include "runtime/io/SafeTensors.h"
#include "runtime/model/WeightStore.h"

using namespace nnc;
namespace fs = std::filesystem;

namespace {

class SafeTensorsTest : public ::testing::Test {
protected:
  void SetUp() override {
    char tmpl[] = "/tmp/nnc_io_st_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string writeFile(const std::string& bytes) {
    std::string path = dir_ + "/w" + std::to_string(++files_ % 8) + ".safetensors";
    std::ofstream(path, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
    return path;
  }
  // A file with `header` as its JSON and `dataBytes` zero bytes of data.
  std::string writeWithHeader(const std::string& header, size_t dataBytes) {
    std::string s(8, '\0');
    for (int i = 0; i < 8; ++i) s[i] = char(uint64_t(header.size()) >> (8 * i) & 0xff);
    return writeFile(s + header + std::string(dataBytes, '\0'));
  }
  std::string dir_;
  int files_ = 0;
};

// Opening a file with this header and data size fails with all `fragments` (and the path).
#define EXPECT_OPEN_FAILS(header, dataBytes, ...)                                                                      \
  do {                                                                                                                 \
    std::string path_ = writeWithHeader(header, dataBytes);                                                            \
    EXPECT_TRUE(test::throwsUserError([&] { SafeTensorsFile::open(path_); }, {path_, __VA_ARGS__}));                   \
  } while (0)

} // namespace

// --- round trips ----------------------------------------------------------------------

// F32 tensors are read in place from the mapped file (no copy of GBs on load); other
// dtypes, and F32 data at an address not aligned for floats, are converted instead.
TEST_F(SafeTensorsTest, F32InPlaceOnlyWhenAlignedF32) {
  std::string path = dir_ + "/m.safetensors";
  writeSafeTensors(path, {{"w", {2, 2}, {1, 2, 3, 4}}});
  SafeTensorsFile f = SafeTensorsFile::open(path);
  const float* in = f.f32InPlace("w");
  ASSERT_NE(in, nullptr);
  EXPECT_EQ(std::vector<float>(in, in + 4), f.readF32("w"));
  EXPECT_EQ(reinterpret_cast<const uint8_t*>(in), f.rawData("w"));
  SafeTensorsFile copy = f; // views stay valid while any copy holds the file's storage
  std::vector<uint8_t> empty{2, 0, 0, 0, 0, 0, 0, 0, '{', '}'};
  f = SafeTensorsFile::fromBytes("other", empty);
  EXPECT_EQ(copy.f32InPlace("w")[3], 4.0f);
  // BF16 (2 bytes each) and an F32 tensor starting 2 bytes into the buffer.
  const std::string header = R"({"b":{"dtype":"BF16","shape":[1],"data_offsets":[0,2]},)"
                             R"("f":{"dtype":"F32","shape":[1],"data_offsets":[2,6]}})";
  std::string bytes(8, '\0');
  const std::string padded = header + std::string((8 - header.size() % 8) % 8, ' ');
  for (int i = 0; i < 8; ++i) bytes[size_t(i)] = char(uint64_t(padded.size()) >> (8 * i) & 0xff);
  bytes += padded + std::string("\x80\x3f", 2) + std::string("\x00\x00\x80\x3f", 4);
  SafeTensorsFile odd = SafeTensorsFile::open(writeFile(bytes));
  EXPECT_EQ(odd.f32InPlace("b"), nullptr);
  EXPECT_EQ(odd.f32InPlace("f"), nullptr);
  EXPECT_EQ(odd.readF32("b"), std::vector<float>{1.0f});
  EXPECT_EQ(odd.readF32("f"), std::vector<float>{1.0f});
}

// A file on disk is mapped; its page tables are filled only when asked (a weight store
// asks before packing), and the bytes read the same after. Bytes given in memory have
// no mapping.
TEST_F(SafeTensorsTest, MappedFilesPopulateOnRequest) {
  std::string path = dir_ + "/m.safetensors";
  std::vector<float> values(5000);
  for (size_t i = 0; i < values.size(); ++i) values[i] = float(i) * 0.5f - 7.0f;
  writeSafeTensors(path, {{"w", {50, 100}, values}});
  SafeTensorsFile f = SafeTensorsFile::open(path);
  ASSERT_NE(f.mapping(), nullptr);
  EXPECT_EQ(f.mapping()->size(), fs::file_size(path));
  EXPECT_EQ(f.mapping()->data(), f.rawData("w") - (fs::file_size(path) - values.size() * 4));
  f.mapping()->populate();
  EXPECT_EQ(f.readF32("w"), values);
  std::vector<uint8_t> empty{2, 0, 0, 0, 0, 0, 0, 0, '{', '}'};
  EXPECT_EQ(SafeTensorsFile::fromBytes("in memory", empty).mapping(), nullptr);
}

// MappedFile::read copies the bytes a pointer into the mapping names with pread (the
// packer's copy of the rows it packs): the same bytes as the mapping, any length up to
// the end, and false for a range that leaves the mapping.
TEST_F(SafeTensorsTest, MappedFilesReadTheBytesTheMappingHolds) {
  std::string path = dir_ + "/m.safetensors";
  std::vector<float> values(5000);
  for (size_t i = 0; i < values.size(); ++i) values[i] = float(i) * 0.25f + 3.0f;
  writeSafeTensors(path, {{"w", {50, 100}, values}});
  SafeTensorsFile f = SafeTensorsFile::open(path);
  const MappedFile& m = *f.mapping();
  const auto* w = reinterpret_cast<const float*>(f.rawData("w"));
  std::vector<float> got(300, -1.0f);
  ASSERT_TRUE(m.read(w + 100, 300 * sizeof(float), got.data()));
  EXPECT_EQ(got, std::vector<float>(values.begin() + 100, values.begin() + 400));
  ASSERT_TRUE(m.read(w + 4700, 300 * sizeof(float), got.data())); // to the file's last byte
  EXPECT_EQ(got, std::vector<float>(values.begin() + 4700, values.end()));
  EXPECT_FALSE(m.read(w + 4701, 300 * sizeof(float), got.data())); // one float beyond the end
  EXPECT_FALSE(m.read(values.data(), 4, got.data()));               // not in the mapping
  EXPECT_TRUE(m.read(m.data(), 0, got.data()));
}

TEST_F(SafeTensorsTest, WriteThenRead) {
  std::string path = dir_ + "/m.safetensors";
  writeSafeTensors(path, {{"fc.weight", {2, 3}, {1, 2, 3, 4, 5, 6}}, {"fc.bias", {2}, {-1, 0.5f}}, {"s", {}, {7}}},
                   {{"format", "pt"}});
  SafeTensorsFile f = SafeTensorsFile::open(path);
  EXPECT_EQ(f.names(), (std::vector<std::string>{"fc.bias", "fc.weight", "s"}));
  EXPECT_TRUE(f.has("fc.bias"));
  EXPECT_FALSE(f.has("fc2.bias"));
  EXPECT_EQ(f.info("fc.weight").shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(f.info("fc.weight").dtype, "F32");
  EXPECT_EQ(f.readF32("fc.weight"), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(f.readF32("fc.bias"), (std::vector<float>{-1, 0.5f}));
  EXPECT_EQ(f.readF32("s"), std::vector<float>{7});
  EXPECT_EQ(f.metadata().at("format"), "pt");
  EXPECT_EQ((fs::file_size(path) - 8 - 36) % 8, 0u) << "header padded to 8 bytes";
  EXPECT_TRUE(test::throwsUserError([&] { f.info("fc2.bias"); }, {path, "no tensor named 'fc2.bias'"}));
}

TEST_F(SafeTensorsTest, ReadsF16AndBF16AsF32AndRefusesIntegers) {
  std::string header = R"({"h":{"dtype":"F16","shape":[2],"data_offsets":[0,4]},)"
                       R"("b":{"dtype":"BF16","shape":[2],"data_offsets":[4,8]},)"
                       R"("ids":{"dtype":"I64","shape":[1],"data_offsets":[8,16]}})";
  std::string s(8, '\0');
  s[0] = char(header.size());
  uint16_t halves[4] = {floatToHalf(1.5f), floatToHalf(-65504), floatToBf16(3.0f), floatToBf16(-1e-3f)};
  std::string data(reinterpret_cast<const char*>(halves), 8);
  data += std::string(8, '\0');
  std::string path = writeFile(s + header + data);
  SafeTensorsFile f = SafeTensorsFile::open(path);
  EXPECT_EQ(f.readF32("h"), (std::vector<float>{1.5f, -65504}));
  EXPECT_EQ(f.readF32("b"), (std::vector<float>{3.0f, bf16ToFloat(floatToBf16(-1e-3f))}));
  EXPECT_EQ(f.info("ids").elementBytes, 8);
  EXPECT_TRUE(test::throwsUserError([&] { f.readF32("ids"); }, {path, "'ids'", "I64", "F32, F16 or BF16"}));
}

TEST_F(SafeTensorsTest, EmptyTensorsAreFine) {
  std::string path = writeWithHeader(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                                     R"("e":{"dtype":"F32","shape":[0,3],"data_offsets":[4,4]}})",
                                     4);
  SafeTensorsFile f = SafeTensorsFile::open(path);
  EXPECT_EQ(f.info("e").elementCount(), 0);
  EXPECT_TRUE(f.readF32("e").empty());
}

// The tensors tile the data buffer, as the format's reference reader requires (its
// InvalidOffset, MetadataIncompleteBuffer): a gap or bytes after the last tensor were
// ignored, so a file joined to another, or a header that lost an entry, loaded.
TEST_F(SafeTensorsTest, EveryByteOfTheBufferBelongsToATensor) {
  EXPECT_OPEN_FAILS(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8,
                    "bytes [0, 4) of the data buffer belong to no tensor (before 'a', which starts at byte 4)");
  EXPECT_OPEN_FAILS(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                    R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                    12, "bytes [4, 8) of the data buffer belong to no tensor (after 'a' and before 'b', which starts "
                        "at byte 8)");
  EXPECT_OPEN_FAILS(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 12,
                    "the data buffer is 12 bytes, but its tensors end at byte 4: the last 8 bytes belong to no tensor "
                    "(after 'a')");
  EXPECT_OPEN_FAILS(R"({"__metadata__":{"k":"v"}})", 4, "the last 4 bytes belong to no tensor (the header lists none)");
  SafeTensorsFile::open(writeWithHeader(R"({"__metadata__":{"k":"v"}})", 0)); // no tensors, no data: fine
}

TEST_F(SafeTensorsTest, ReadsEveryCommittedFixture) {
  int count = 0;
  for (const char* dir : {"/examples", "/tests/fixtures"})
    for (const auto& entry : fs::recursive_directory_iterator(std::string(NNC_SOURCE_DIR) + dir))
      if (entry.path().extension() == ".safetensors") {
        SafeTensorsFile f = SafeTensorsFile::open(entry.path().string());
        EXPECT_FALSE(f.names().empty()) << entry.path();
        for (const std::string& name : f.names())
          EXPECT_EQ(int64_t(f.readF32(name).size()), f.info(name).elementCount()) << entry.path() << " " << name;
        ++count;
      }
  EXPECT_GT(count, 5);
}

// --- bad files ------------------------------------------------------------------------

TEST_F(SafeTensorsTest, ShorterThanEightBytes) {
  std::string path = writeFile("abc");
  EXPECT_TRUE(test::throwsUserError([&] { SafeTensorsFile::open(path); }, {path, "3 bytes", "needs 8"}));
}

TEST_F(SafeTensorsTest, HeaderLengthPastEnd) {
  std::string path = writeFile(std::string("\x00\x01\x00\x00\x00\x00\x00\x00{}", 10));
  EXPECT_TRUE(test::throwsUserError([&] { SafeTensorsFile::open(path); },
                                    {path, "header length 256", "10 bytes", "at most 2"}));
  std::string huge = writeFile(std::string(8, '\xff') + "{}");
  EXPECT_TRUE(test::throwsUserError([&] { SafeTensorsFile::open(huge); },
                                    {huge, "header length 18446744073709551615", "10 bytes"}));
}

TEST_F(SafeTensorsTest, HeaderNotJsonOrNotObject) {
  EXPECT_OPEN_FAILS(R"({"a": {"dtype": "F32",)", 0, "22-byte header is not valid JSON", "parse error");
  EXPECT_OPEN_FAILS("[1, 2]", 0, "header is a JSON array, expected an object");
  EXPECT_OPEN_FAILS(std::string("{}\0\0", 4), 0, "not valid JSON", "NUL byte at offset 2");
}

TEST_F(SafeTensorsTest, EntryMissingFieldsOrWrongTypes) {
  EXPECT_OPEN_FAILS(R"({"w":{"shape":[1],"data_offsets":[0,4]}})", 4, "tensor 'w'", "no \"dtype\"");
  EXPECT_OPEN_FAILS(R"({"w":{"dtype":"F32","data_offsets":[0,4]}})", 4, "tensor 'w'", "no \"shape\"");
  EXPECT_OPEN_FAILS(R"({"w":{"dtype":"F32","shape":[1]}})", 4, "tensor 'w'", "no \"data_offsets\"");
  EXPECT_OPEN_FAILS(R"({"w":[1,2]})", 4, "tensor 'w'", "expected an object", "[1,2]");
  EXPECT_OPEN_FAILS(R"({"w":{"dtype":32,"shape":[1],"data_offsets":[0,4]}})", 4, "tensor 'w'",
                    "\"dtype\" must be a string, found 32");
  EXPECT_OPEN_FAILS(R"({"w":{"dtype":"F32","shape":"1","data_offsets":[0,4]}})", 4, "tensor 'w'",
                    "\"shape\" must be an array");
  EXPECT_OPEN_FAILS(R"({"w":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})", 4, "tensor 'w'",
                    "must hold integers, found 1.5");
  EXPECT_OPEN_FAILS(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", 4, "tensor 'w'",
                    "\"data_offsets\" must be [begin, end]", "[0]");
  EXPECT_OPEN_FAILS(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[-4,4]}})", 4, "tensor 'w'", "non-negative");
  EXPECT_OPEN_FAILS(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"offset":0}})", 4, "tensor 'w'",
                    "unexpected field \"offset\"");
  EXPECT_OPEN_FAILS(R"({"__metadata__":{"format":1}})", 0, "\"__metadata__\" value for \"format\" must be a string");
  EXPECT_OPEN_FAILS(R"({"__metadata__":[]})", 0, "\"__metadata__\" must be an object");
}

TEST_F(SafeTensorsTest, UnsupportedDtypeIsNamed) {
  EXPECT_OPEN_FAILS(R"({"w":{"dtype":"F4","shape":[2],"data_offsets":[0,1]}})", 1, "tensor 'w'",
                    "unsupported dtype \"F4\"", "F32, F16, BF16");
}

TEST_F(SafeTensorsTest, OffsetsOutOfOrderOrPastTheBuffer) {
  EXPECT_OPEN_FAILS(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}})", 8, "tensor 'w'", "[8, 4]",
                    "end before they begin");
  EXPECT_OPEN_FAILS(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,12]}})", 10, "tensor 'w'",
                    "end at byte 12", "data buffer is 10 bytes");
}

TEST_F(SafeTensorsTest, ByteSizeDisagreesWithShape) {
  EXPECT_OPEN_FAILS(R"({"w":{"dtype":"F16","shape":[2,3],"data_offsets":[0,24]}})", 24, "tensor 'w'",
                    "hold 24 bytes", "shape [2, 3] of F16 needs 12 bytes");
}

TEST_F(SafeTensorsTest, OverlappingTensorsAreBothNamed) {
  EXPECT_OPEN_FAILS(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
                    R"("b":{"dtype":"F32","shape":[1],"data_offsets":[20,24]},)"
                    R"("c":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
                    24, "'a'", "[0, 16)", "'c'", "[8, 16)", "overlap");
  // A long tensor overlapping one that is not its neighbour in offset order.
  EXPECT_OPEN_FAILS(R"({"big":{"dtype":"F32","shape":[6],"data_offsets":[0,24]},)"
                    R"("x":{"dtype":"F32","shape":[1],"data_offsets":[4,8]},)"
                    R"("y":{"dtype":"F32","shape":[1],"data_offsets":[16,20]}})",
                    24, "'big'", "overlap");
}

TEST_F(SafeTensorsTest, NegativeOrOverflowingShapes) {
  EXPECT_OPEN_FAILS(R"({"w":{"dtype":"F32","shape":[2,-3],"data_offsets":[0,0]}})", 0, "tensor 'w'",
                    "negative dimension -3");
  EXPECT_OPEN_FAILS(R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}})", 0,
                    "tensor 'w'", "[4294967296, 4294967296]", "64 bits");
  EXPECT_OPEN_FAILS(R"({"w":{"dtype":"F32","shape":[18446744073709551615],"data_offsets":[0,0]}})", 0,
                    "tensor 'w'", "18446744073709551615", "does not fit in 64 bits");
}

TEST_F(SafeTensorsTest, DuplicateNames) {
  EXPECT_OPEN_FAILS(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                    R"("w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                    8, "'w' more than once");
}

// A field repeated within an entry, or within __metadata__, is refused as a repeated
// tensor name is (JSON parsing keeps one of the two; the format's reference reader
// refuses both), and so is a byte order mark before the JSON.
TEST_F(SafeTensorsTest, RepeatedFieldsAndAByteOrderMark) {
  EXPECT_OPEN_FAILS(R"({"w":{"dtype":"F32","shape":[2],"shape":[1],"data_offsets":[0,4]}})", 4, "tensor 'w'",
                    "its entry lists 'shape' more than once");
  EXPECT_OPEN_FAILS(R"({"w":{"dtype":"F16","shape":[1],"data_offsets":[0,4],"dtype":"F32"}})", 4, "tensor 'w'",
                    "lists 'dtype' more than once");
  EXPECT_OPEN_FAILS(R"({"__metadata__":{"format":"pt","format":"np"}})", 0,
                    "__metadata__ lists 'format' more than once");
  EXPECT_OPEN_FAILS("\xEF\xBB\xBF{}", 0, "byte order mark");
  // the same fields in two entries are not repeats
  const std::string path = writeWithHeader(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                                           R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8);
  EXPECT_EQ(SafeTensorsFile::open(path).names().size(), 2u);
}

// A header of 200,000 tensors opens, each in its place. (Its check for repeated names
// once rescanned the header after each entry: 40,000 tensors took 13 s, this many hours.)
TEST_F(SafeTensorsTest, AHeaderOfManyTensorsOpens) {
  const int n = 200000;
  std::string header = "{";
  for (int i = 0; i < n; ++i)
    header += fmt::format("{}\"t{}\":{{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[{},{}]}}", i ? "," : "", i,
                          4 * i, 4 * i + 4);
  const SafeTensorsFile file = SafeTensorsFile::open(writeWithHeader(header + "}", 4 * size_t(n)));
  ASSERT_EQ(file.names().size(), size_t(n));
  EXPECT_EQ(file.info("t123456").begin, 4 * 123456);
}

TEST_F(SafeTensorsTest, MissingFile) {
  std::string path = dir_ + "/none.safetensors";
  EXPECT_TRUE(
      test::throwsUserError([&] { SafeTensorsFile::open(path); }, {path, "cannot open weights file", "No such file"}));
}

// --- robustness -----------------------------------------------------------------------

// Every proper prefix of a valid file, and thousands of random corruptions of its
// header, end in a UserError or a successful open — never a crash or another exception.
TEST_F(SafeTensorsTest, EveryTruncationAndRandomCorruptionIsHandled) {
  std::string path = dir_ + "/good.safetensors";
  writeSafeTensors(path, {{"a.weight", {2, 2}, {1, 2, 3, 4}}, {"a.bias", {2}, {5, 6}}});
  std::ifstream in(path, std::ios::binary);
  const std::string good((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t headerEnd = good.size() - 24;
  for (size_t n = 0; n < good.size(); ++n)
    EXPECT_THROW(SafeTensorsFile::open(writeFile(good.substr(0, n))), UserError) << "prefix " << n;
  uint32_t seed = 777;
  auto next = [&] { return seed = seed * 1664525u + 1013904223u; };
  const char alphabet[] = "{}[]\":,0123456789-eE. FIBU\x01\xff";
  for (int trial = 0; trial < 3000; ++trial) {
    std::string bad = good;
    for (int k = 0; k < 1 + int(next() % 3); ++k)
      bad[next() % headerEnd] = alphabet[next() % (sizeof alphabet - 1)];
    try {
      SafeTensorsFile f = SafeTensorsFile::open(writeFile(bad));
      for (const std::string& name : f.names())
        if (f.info(name).floatDType) f.readF32(name);
    } catch (const UserError&) {
    }
  }
}

// PyTorch's state_dict() of a batchnorm holds num_batches_tracked, an I64 count of
// training steps: a file saved so loads (inference does not read it); the same name
// for a layer that is no batchnorm is still a tensor the model does not have.
TEST_F(SafeTensorsTest, ABatchnormsTrainingCounterIsNotAnExtraTensor) {
  using ir::ParamTensor;
  const std::vector<ParamTensor> model = {{"bn.weight", {2}},
                                          {"bn.bias", {2}, ParamTensor::Role::Bias},
                                          {"bn.running_mean", {2}, ParamTensor::Role::Buffer},
                                          {"bn.running_var", {2}, ParamTensor::Role::Buffer}};
  std::string header;
  int64_t at = 0;
  for (const char* name : {"bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"}) {
    header += fmt::format(R"("{}":{{"dtype":"F32","shape":[2],"data_offsets":[{},{}]}},)", name, at, at + 8);
    at += 8;
  }
  const std::string counter = fmt::format(R"({{{}"bn.num_batches_tracked":{{"dtype":"I64","shape":[],)"
                                          R"("data_offsets":[{},{}]}}}})",
                                          header, at, at + 8);
  const std::string path = writeWithHeader(counter, size_t(at + 8));
  EXPECT_EQ(runtime::WeightStore::fromSafeTensors(model, path, "m").get("bn.running_var").values().size(), 2u);

  const std::string stray = fmt::format(R"({{{}"fc.num_batches_tracked":{{"dtype":"I64","shape":[],)"
                                        R"("data_offsets":[{},{}]}}}})",
                                        header, at, at + 8);
  const std::string strayPath = writeWithHeader(stray, size_t(at + 8));
  EXPECT_TRUE(test::throwsUserError([&] { runtime::WeightStore::fromSafeTensors(model, strayPath, "m"); },
                                    {"1 tensor the model does not have: 'fc.num_batches_tracked'"}));
}
