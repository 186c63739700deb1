// The hostile corpus (issue 14): weight files, .npy files and raw inputs written to
// attack the readers, each with its expected outcome. Every case is generated here in
// a temporary directory. A case either loads (and its values are checked: NaN and
// infinity arrive as IEEE says) or fails with a UserError holding every fragment and
// a message of bounded length; none may crash, hang, echo its input whole, or take
// the memory a header claims before the file is checked.
#include <sys/resource.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <gtest/gtest.h>
#include <string>
#include <vector>

#include "compiler/support/Error.h"
#include "runtime/io/Npy.h"
#include "runtime/io/SafeTensors.h"

using namespace nnc;
namespace fs = std::filesystem;

namespace {

enum class Reader { SafeTensors, Npy, Raw };

struct HostileCase {
  const char* name;
  Reader reader;
  std::function<std::string()> bytes;     // the file
  std::vector<std::string> fragments;     // empty: it must load
  std::function<void(const std::string&)> check = {}; // on success: what was read (path given)
  int64_t rawElements = 4;                // Raw: the expected size, f32 elements
  int64_t sparseSize = 0;                 // > 0: the file is extended (sparse) to this size
};

std::string le64(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = char(v >> (8 * i) & 0xff);
  return s;
}
std::string st(const std::string& header, const std::string& data = "") { return le64(header.size()) + header + data; }
std::string f32s(std::initializer_list<float> v) {
  std::string s(v.size() * 4, '\0');
  std::memcpy(s.data(), std::data(v), s.size());
  return s;
}
// One F32 tensor "w" with this shape and offsets; `data` bytes of zeros after.
std::string stEntry(const std::string& shape, const std::string& offsets, size_t data, const std::string& dtype = "\"F32\"") {
  return st("{\"w\":{\"dtype\":" + dtype + ",\"shape\":" + shape + ",\"data_offsets\":" + offsets + "}}",
            std::string(data, '\0'));
}
std::string repeat(const std::string& s, size_t n) {
  std::string out;
  out.reserve(s.size() * n);
  for (size_t i = 0; i < n; ++i) out += s;
  return out;
}
std::string npy(const std::string& dict, const std::string& data, int major = 1) {
  std::string d = dict;
  size_t pre = major == 1 ? 10 : 12;
  d.append((64 - (pre + d.size() + 1) % 64) % 64, ' ');
  d += '\n';
  std::string s = "\x93NUMPY";
  s += char(major);
  s += '\0';
  for (size_t i = 0; i < pre - 8; ++i) s += char(d.size() >> (8 * i) & 0xff);
  return s + d + data;
}
std::string dict(const std::string& descr, const std::string& shape, const std::string& order = "False") {
  return "{'descr': '" + descr + "', 'fortran_order': " + order + ", 'shape': " + shape + ", }";
}

// Peak resident memory of this process so far, bytes.
int64_t peakRss() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return int64_t(u.ru_maxrss) * 1024;
}

const float kNaN = std::nanf(""), kInf = INFINITY;
const std::string kMiB(1 << 20, 'x');
const std::string kHalfMiB(1 << 19, 'x'); // under the .npy header limit

std::vector<HostileCase> cases() {
  std::vector<HostileCase> c;
  auto S = [&](const char* name, std::function<std::string()> bytes, std::vector<std::string> fragments) {
    c.push_back({name, Reader::SafeTensors, std::move(bytes), std::move(fragments)});
  };
  auto N = [&](const char* name, std::function<std::string()> bytes, std::vector<std::string> fragments) {
    c.push_back({name, Reader::Npy, std::move(bytes), std::move(fragments)});
  };
  // --- safetensors: numbers ----------------------------------------------------------
  S("number_too_large_for_double", [] { return st("{\"a\":1e400}"); }, {"not valid JSON", "too large for a double"});
  S("negative_number_too_large", [] { return st("{\"a\":-1e400}"); }, {"too large for a double"});
  S("huge_number_in_shape", [] { return stEntry("[1e400]", "[0,4]", 4); }, {"too large for a double"});
  S("thousand_digit_number", [] { return st("{\"a\":1" + std::string(1000, '0') + "}"); }, {"too large for a double"});
  S("shape_as_string", [] { return stEntry("\"[2]\"", "[0,8]", 8); }, {"tensor 'w'", "\"shape\" must be an array"});
  S("shape_dimension_as_string", [] { return stEntry("[\"2\"]", "[0,8]", 8); }, {"must hold integers", "\"2\""});
  S("negative_shape", [] { return stEntry("[-2]", "[0,8]", 8); }, {"negative dimension -2"});
  S("fractional_shape", [] { return stEntry("[2.5]", "[0,8]", 8); }, {"must hold integers", "2.5"});
  S("exponent_shape", [] { return stEntry("[2e0]", "[0,8]", 8); }, {"must hold integers"});
  S("shape_past_64_bits", [] { return stEntry("[18446744073709551616]", "[0,8]", 8); }, {"does not fit in 64 bits"});
  S("shape_bytes_overflow", [] { return stEntry("[4294967296,4294967296]", "[0,8]", 8); }, {"more bytes than fit in 64 bits"});
  S("offsets_as_strings", [] { return stEntry("[2]", "[\"0\",\"8\"]", 8); }, {"\"data_offsets\" must be [begin, end]"});
  S("negative_offset", [] { return stEntry("[2]", "[-8,0]", 8); }, {"non-negative integers"});
  S("fractional_offset", [] { return stEntry("[2]", "[0,8.0]", 8); }, {"non-negative integers"});
  S("three_offsets", [] { return stEntry("[2]", "[0,4,8]", 8); }, {"[begin, end]"});
  S("offsets_reversed", [] { return stEntry("[2]", "[8,0]", 8); }, {"end before they begin"});
  S("offset_past_the_file", [] { return stEntry("[2]", "[0,8]", 4); }, {"end at byte 8", "data buffer is 4 bytes"});
  S("offset_at_2_63", [] { return stEntry("[2]", "[9223372036854775800,9223372036854775807]", 8); }, {"data buffer is 8 bytes"});
  S("offset_past_2_63", [] { return stEntry("[2]", "[0,9223372036854775808]", 8); }, {"non-negative integers"});
  S("overlapping_offsets", [] {
    return st("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
              "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", std::string(12, '\0'));
  }, {"'a'", "'b'", "overlap"});
  S("duplicate_tensor_names", [] {
    return st("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
              "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", std::string(8, '\0'));
  }, {"lists 'a' more than once"});
  S("duplicate_megabyte_name", [] {
    const std::string e = "{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]}";
    return st("{\"" + kMiB + "\":" + e + ",\"" + kMiB + "\":" + e + "}");
  }, {"more than once", "(1,048,576 bytes)"});
  S("dtype_as_number", [] { return stEntry("[2]", "[0,8]", 8, "4"); }, {"\"dtype\" must be a string"});
  S("megabyte_dtype", [] { return stEntry("[2]", "[0,8]", 8, "\"" + kMiB + "\""); }, {"unsupported dtype", "(1,048,576 bytes)"});
  S("megabyte_unknown_field", [] {
    return st("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"" + kMiB + "\":1}}", std::string(4, '\0'));
  }, {"unexpected field", "(1,048,576 bytes)"});
  S("megabyte_tensor_name_bad_entry", [] { return st("{\"" + kMiB + "\":7}"); }, {"expected an object", "(1,048,576 bytes)"});
  // --- safetensors: nesting and size -------------------------------------------------
  S("nested_100000_arrays", [] { return st("{\"a\":" + repeat("[", 100000) + repeat("]", 100000) + "}"); },
    {"more than 64 levels"});
  S("nested_100000_unclosed", [] { return st("{\"a\":" + repeat("[", 100000)); }, {"more than 64 levels"});
  S("nested_objects_in_entry", [] { return st("{\"a\":" + repeat("{\"b\":", 100000) + "1" + repeat("}", 100000) + "}"); },
    {"more than 64 levels"});
  S("nested_shape", [] { return stEntry(repeat("[", 5000) + repeat("]", 5000), "[0,4]", 4); }, {"more than 64 levels"});
  S("nested_metadata", [] { return st("{\"__metadata__\":{\"k\":" + repeat("[", 70) + repeat("]", 70) + "}}"); },
    {"more than 64 levels"});
  S("nested_60_echoed_bounded", [] { return st("{\"__metadata__\":{\"k\":" + repeat("[", 60) + repeat("]", 60) + "}}"); },
    {"\"__metadata__\" value for \"k\" must be a string"});
  S("brackets_inside_strings_are_not_nesting", [] {
    return st("{\"__metadata__\":{\"k\":\"" + repeat("[", 1000) + "\\\"" + repeat("{", 1000) + "\"}}");
  }, {});
  S("megabyte_array_echoed_bounded", [] { return st("{\"__metadata__\":{\"k\":[" + repeat("1,", 500000) + "1]}}"); },
    {"must be a string", "[1,1,1"});
  S("megabyte_string_in_shape", [] { return stEntry("[\"" + kMiB + "\"]", "[0,4]", 4); }, {"must hold integers"});
  S("megabyte_token_in_syntax_error", [] { return st("{\"a\":" + repeat("t", 1 << 20) + "}"); }, {"not valid JSON"});
  // A 100 MB header in a file that has it (a hole): refused on the length, unread.
  c.push_back({"header_claim_100_mb", Reader::SafeTensors, [] { return le64(100'000'001) + "{}"; },
               {"over the format's limit of 100,000,000 bytes"}, {}, 0, 100'000'100});
  S("header_claim_2_64", [] { return le64(~uint64_t(0)) + "{}"; }, {"past the end of the file"});
  S("header_claim_past_file", [] { return le64(1000) + "{}"; }, {"past the end of the file"});
  S("header_json_array", [] { return st("[]"); }, {"expected an object"});
  S("header_invalid_utf8", [] { return st("{\"\xff\xfe\":{}}"); }, {"not valid JSON"});
  S("header_nan_literal", [] { return st("{\"a\":NaN}"); }, {"not valid JSON"});
  S("header_nul_byte", [] { return st(std::string("{\"a\0\":1}", 8)); }, {"NUL byte"});
  S("empty_header_object", [] { return st("{}"); }, {});
  c.push_back({"nan_and_inf_weights_load_as_ieee", Reader::SafeTensors,
               [] { return stEntry("[4]", "[0,16]", 0) + f32s({kNaN, kInf, -kInf, 1.5f}); }, {},
               [](const std::string& path) {
                 auto v = SafeTensorsFile::open(path).readF32("w");
                 ASSERT_EQ(v.size(), 4u);
                 EXPECT_TRUE(std::isnan(v[0]));
                 EXPECT_EQ(v[1], INFINITY);
                 EXPECT_EQ(v[2], -INFINITY);
                 EXPECT_EQ(v[3], 1.5f);
               }});
  // --- .npy ---------------------------------------------------------------------------
  N("npy_lying_header_5_by_400m", [] { return npy(dict("<f4", "(5, 400000000)"), ""); },
    {"8000000000 bytes", "is truncated"});
  N("npy_lying_header_5_by_int_max", [] { return npy(dict("<f4", "(5, 2147483647)"), f32s({1, 2})); },
    {"42949672940 bytes", "is truncated"});
  N("npy_lying_header_f8", [] { return npy(dict("<f8", "(1000000000000,)"), ""); }, {"is truncated"});
  N("npy_header_claims_less", [] { return npy(dict("<f4", "(1,)"), f32s({1, 2})); }, {"extra bytes"});
  N("npy_fortran_order", [] { return npy(dict("<f4", "(2, 2)", "True"), f32s({1, 2, 3, 4})); }, {"Fortran"});
  N("npy_big_endian", [] { return npy(dict(">f4", "(1,)"), f32s({1})); }, {"big-endian", "'<f4'"});
  N("npy_object_dtype", [] { return npy(dict("|O", "(1,)"), "12345678"); }, {"unsupported .npy dtype '|O'"});
  N("npy_half_megabyte_descr", [] { return npy(dict(kHalfMiB, "(1,)"), "1234", 2); },
    {"unsupported .npy dtype", "(524,288 bytes)"});
  N("npy_half_megabyte_key", [] { return npy("{'" + kHalfMiB + "': 1}", "", 2); }, {"key '", "(524,288 bytes)"});
  N("npy_header_over_the_limit", [] { return npy("{" + std::string(2 << 20, ' ') + "}", "", 2); },
    {"header length", "over the 1,048,576-byte limit"});
  N("npy_header_length_4gb_claim", [] { return std::string("\x93NUMPY\x02\x00\xff\xff\xff\xff{}", 14); },
    {"runs past the end of the file"});
  N("npy_fractional_shape", [] { return npy(dict("<f4", "(2.5,)"), ""); }, {"malformed .npy header"});
  N("npy_shape_as_string", [] { return npy(dict("<f4", "('2',)"), ""); }, {"an integer dimension"});
  N("npy_nested_shape", [] { return npy(dict("<f4", "((2,),)"), ""); }, {"an integer dimension"});
  N("npy_negative_shape", [] { return npy(dict("<f4", "(-4,)"), ""); }, {"non-negative dimension"});
  c.push_back({"npy_nan_and_inf_load_as_ieee", Reader::Npy,
               [] { return npy(dict("<f4", "(3,)"), f32s({kNaN, -kInf, 2})); }, {},
               [](const std::string& path) {
                 auto v = toFloats(readNpy(path));
                 ASSERT_EQ(v.size(), 3u);
                 EXPECT_TRUE(std::isnan(v[0]));
                 EXPECT_EQ(v[1], -INFINITY);
               }});
  // A finite value f32 cannot hold is refused, as an integer it cannot hold exactly (it
  // became ±inf; NumPy's astype warns of the overflow).
  N("npy_f8_too_large_for_f32_is_refused",
    [] {
      double d[2] = {1e300, -1e300};
      return npy(dict("<f8", "(2,)"), std::string(reinterpret_cast<const char*>(d), 16));
    },
    {"element 0 is 1e+300, beyond the range of f32"});
  // A sparse 8 GB file whose header is true: refused by the caller's look at the header,
  // before a byte of data is read.
  c.push_back({"npy_8gb_sparse_refused_before_data", Reader::Npy,
               [] { return npy(dict("<f4", "(2, 1073741824)"), ""); }, {"refused by the caller"},
               [](const std::string&) {}, 0, 128 + (int64_t(8) << 30)});
  // --- raw ------------------------------------------------------------------------------
  c.push_back({"raw_sparse_8gb_refused_before_reading", Reader::Raw, [] { return std::string(); },
               {"raw input has the wrong size", "16 bytes", "found 8589934592 bytes"}, {}, 4, int64_t(8) << 30});
  c.push_back({"raw_empty", Reader::Raw, [] { return std::string(); }, {"found 0 bytes"}});
  c.push_back({"raw_ragged", Reader::Raw, [] { return std::string(7, 'x'); }, {"1 whole elements and 3 bytes over"}});
  c.push_back({"raw_nan_loads_as_ieee", Reader::Raw, [] { return f32s({kNaN, kInf, 0, -0.0f}); }, {},
               [](const std::string& path) {
                 auto b = readRawInput(path, 4, DType::F32);
                 float v[4];
                 std::memcpy(v, b.data(), 16);
                 EXPECT_TRUE(std::isnan(v[0]));
                 EXPECT_EQ(v[1], INFINITY);
                 EXPECT_TRUE(std::signbit(v[3]));
               }});
  return c;
}

void PrintTo(const HostileCase& c, std::ostream* os) { *os << c.name; }

class HostileInputs : public ::testing::TestWithParam<HostileCase> {
protected:
  void SetUp() override {
    char tmpl[] = "/tmp/nnc_hostile_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_;
};

TEST_P(HostileInputs, LoadsOrFailsCleanly) {
  const HostileCase& c = GetParam();
  const char* ext = c.reader == Reader::SafeTensors ? ".safetensors" : c.reader == Reader::Npy ? ".npy" : ".bin";
  const std::string path = dir_ + "/" + c.name + ext;
  {
    std::string bytes = c.bytes();
    std::ofstream(path, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
  }
  if (c.sparseSize) fs::resize_file(path, uintmax_t(c.sparseSize)); // a hole: no disk, no memory
  const int64_t rssBefore = peakRss();
  auto read = [&] {
    switch (c.reader) {
    case Reader::SafeTensors: SafeTensorsFile::open(path); break;
    case Reader::Npy:
      readNpy(path, DType::F32, [&](const NpyHeader&) {
        if (c.sparseSize) throw UserError(path + ": refused by the caller");
      });
      break;
    case Reader::Raw: readRawInput(path, c.rawElements, DType::F32); break;
    }
  };
  if (c.fragments.empty()) {
    EXPECT_NO_THROW(read());
    if (c.check) c.check(path);
  } else {
    try {
      read();
      ADD_FAILURE() << "expected a UserError";
    } catch (const UserError& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find(path), std::string::npos) << "the message names the file: " << message.substr(0, 400);
      for (const std::string& fragment : c.fragments)
        EXPECT_NE(message.find(fragment), std::string::npos)
            << "message lacks \"" << fragment << "\": " << message.substr(0, 400);
      EXPECT_LT(message.size(), 1000u) << "the input is echoed unbounded: " << message.substr(0, 400);
    }
  }
  // Nothing read a claim or a hole into memory (the mega-byte cases read their own MBs).
  EXPECT_LT(peakRss() - rssBefore, int64_t(256) << 20) << "peak memory grew";
}

INSTANTIATE_TEST_SUITE_P(Corpus, HostileInputs, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<HostileCase>& info) { return std::string(info.param.name); });

} // namespace
