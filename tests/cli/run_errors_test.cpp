// --run with bad inputs and weights: every case is exit code 1 with a message that
// names the file and the problem (both sizes / shapes). Files are made in a temp dir.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "NncProcess.h"

namespace {
namespace fs = std::filesystem;

struct Result {
  int exitCode = -1;
  std::string out, err;
};

std::string slurp(const fs::path &p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

class RunErrors : public ::testing::Test {
protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("nnc_run_errors_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    write("m.nn", "model m {\n  input x: [4]\n  fc1 = dense(3) relu\n  fc2 = dense(2)\n}\n");
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string &name) const { return (dir_ / name).string(); }
  void write(const std::string &name, const std::string &bytes) {
    std::ofstream(dir_ / name, std::ios::binary) << bytes;
  }
  // A float32 .npy of the given shape (values 0.1, 0.2, ...).
  void writeNpy(const std::string &name, const std::vector<int64_t> &shape, const char *descr = "<f4") {
    std::string dims;
    int64_t n = 1;
    for (int64_t d : shape) dims += std::to_string(d) + ",", n *= d;
    std::string header = "{'descr': '" + std::string(descr) + "', 'fortran_order': False, 'shape': (" + dims + "), }";
    while ((10 + header.size() + 1) % 64) header += ' ';
    header += '\n';
    std::string bytes("\x93NUMPY\x01\x00", 8);
    bytes += char(header.size() & 0xff);
    bytes += char(header.size() >> 8);
    bytes += header;
    int width = descr[2] == '4' ? 4 : 8;
    for (int64_t i = 0; i < n; ++i) {
      float v = 0.1f * float(i + 1);
      char buf[8] = {0};
      std::memcpy(buf, &v, 4);
      bytes.append(buf, size_t(width));
    }
    write(name, bytes);
  }
  // A safetensors file with f32 tensors of the given shapes (zeros).
  // An integer .npy ('<i4' or '<i8') of the given shape and values (token ids).
  void writeIds(const std::string &name, const std::vector<int64_t> &shape, const std::vector<int64_t> &values,
                const char *descr = "<i4") {
    write(name, nnc_cli_test::npyIntegers(shape, values, descr));
  }
  void writeWeights(const std::string &name, const std::vector<std::pair<std::string, std::vector<int64_t>>> &ts) {
    std::string header = "{";
    int64_t offset = 0;
    for (size_t i = 0; i < ts.size(); ++i) {
      int64_t n = 1;
      std::string dims;
      for (size_t k = 0; k < ts[i].second.size(); ++k) dims += (k ? "," : "") + std::to_string(ts[i].second[k]), n *= ts[i].second[k];
      header += (i ? "," : "") + std::string("\"") + ts[i].first + "\":{\"dtype\":\"F32\",\"shape\":[" + dims +
                "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(offset + 4 * n) + "]}";
      offset += 4 * n;
    }
    header += "}";
    std::string bytes(8, '\0');
    uint64_t len = header.size();
    std::memcpy(bytes.data(), &len, 8);
    write(name, bytes + header + std::string(size_t(offset), '\0'));
  }
  void writeGoodWeights(const std::string &name) {
    writeWeights(name, {{"fc1.weight", {3, 4}}, {"fc1.bias", {3}}, {"fc2.weight", {2, 3}}, {"fc2.bias", {2}}});
  }
  // env: "NAME=VALUE ..." for the command's environment, or "".
  Result nnc(const std::string &args, const std::string &env = "") {
    std::string cmd = (env.empty() ? "" : "env " + env + " ") + std::string("timeout 60 ") + NNC_BINARY + " " + args +
                      " >" + path("out.txt") + " 2>" + path("err.txt");
    int status = std::system(cmd.c_str());
    Result r;
    r.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = slurp(path("out.txt"));
    r.err = slurp(path("err.txt"));
    return r;
  }
  fs::path dir_;
};

#define EXPECT_CONTAINS(haystack, needle) EXPECT_NE((haystack).find(needle), std::string::npos) << (haystack)

TEST_F(RunErrors, GoodRunPrintsASummary) {
  writeNpy("in.npy", {5, 4});
  writeGoodWeights("w.safetensors");
  Result r = nnc(path("m.nn") + " --run " + path("in.npy") + " --weights " + path("w.safetensors"));
  EXPECT_EQ(r.exitCode, 0) << r.err;
  EXPECT_CONTAINS(r.out, "output f32[5, 2]"); // the batch came from the .npy
  EXPECT_CONTAINS(r.out, "argmax per row");
}

TEST_F(RunErrors, NoWeightsOptionIsUsageError) {
  writeNpy("in.npy", {1, 4});
  Result r = nnc(path("m.nn") + " --run " + path("in.npy"));
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_CONTAINS(r.err, "--weights");
  EXPECT_CONTAINS(r.err, "--random-weights");
}

TEST_F(RunErrors, RawInputOfWrongSizeStatesBothSizesAndAFittingBatch) {
  write("in.raw", std::string(4 * 12, '\0')); // 12 floats: a batch of 3, not 1
  writeGoodWeights("w.safetensors");
  Result r = nnc(path("m.nn") + " --run " + path("in.raw") + " --weights " + path("w.safetensors"));
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_CONTAINS(r.err, "in.raw");
  EXPECT_CONTAINS(r.err, "12");
  EXPECT_CONTAINS(r.err, "batch 1 × 4 = 4 elements");
  EXPECT_CONTAINS(r.err, "--batch 3");
  write("empty.raw", ""); // said "not a multiple of 4 elements"; 0 is one
  r = nnc(path("m.nn") + " --run " + path("empty.raw") + " --weights " + path("w.safetensors"));
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_CONTAINS(r.err, "raw input has 0 bytes (0 f32 elements), expected batch 1 × 4 = 4 elements (16 bytes); the "
                         "file is empty");
}

TEST_F(RunErrors, NpyOfWrongShapeOrDtype) {
  writeGoodWeights("w.safetensors");
  writeNpy("shape.npy", {2, 5});
  Result r = nnc(path("m.nn") + " --run " + path("shape.npy") + " --weights " + path("w.safetensors"));
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_CONTAINS(r.err, "shape.npy");
  EXPECT_CONTAINS(r.err, "[2, 5]");
  EXPECT_CONTAINS(r.err, "does not fit model 'm': expected [batch, 4] or [4]"); // the model, not the file
  writeNpy("none.npy", {0, 4}); // the right example shape, no example
  r = nnc(path("m.nn") + " --run " + path("none.npy") + " --weights " + path("w.safetensors"));
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_CONTAINS(r.err, "input shape [0, 4] holds no example (a batch of 0); model 'm' runs a batch of at least 1");
  writeNpy("rank.npy", {2, 2, 4});
  r = nnc(path("m.nn") + " --run " + path("rank.npy") + " --weights " + path("w.safetensors"));
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_CONTAINS(r.err, "[2, 2, 4]");
  writeNpy("dtype.npy", {1, 4}, "|u1");
  r = nnc(path("m.nn") + " --run " + path("dtype.npy") + " --weights " + path("w.safetensors"));
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_CONTAINS(r.err, "dtype.npy");
}

// The file's leading axis sets the batch; a --batch that says otherwise was dropped.
TEST_F(RunErrors, BatchThatContradictsTheNpyIsAnError) {
  writeGoodWeights("w.safetensors");
  writeNpy("two.npy", {2, 4});
  Result r = nnc(path("m.nn") + " --run " + path("two.npy") + " --weights " + path("w.safetensors") + " --batch 3");
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_CONTAINS(r.err, "the file holds a batch of 2 (shape [2, 4]), but --batch 3 was given");
  r = nnc(path("m.nn") + " --run " + path("two.npy") + " --weights " + path("w.safetensors") + " --batch 2");
  EXPECT_EQ(r.exitCode, 0) << r.err;
}

// Streams: /dev/zero was read until memory ran out (weights) or forever (a raw
// input); weights from a named pipe hung about half the time (opened twice).
TEST_F(RunErrors, EndlessStreamsAndNamedPipes) {
  writeGoodWeights("w.safetensors");
  writeNpy("x.npy", {1, 4});
  Result r = nnc(path("m.nn") + " --run " + path("x.npy") + " --weights /dev/zero");
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_CONTAINS(r.err, "/dev/zero: the 0-byte header is not valid JSON");
  r = nnc(path("m.nn") + " --run /dev/zero --weights " + path("w.safetensors"));
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_CONTAINS(r.err, "expected 4 f32 elements (16 bytes), found more than");
  for (int i = 0; i < 3; ++i) {
    fs::remove(path("w.fifo"));
    ASSERT_EQ(::mkfifo(path("w.fifo").c_str(), 0600), 0);
    ASSERT_EQ(std::system(("cat " + path("w.safetensors") + " > " + path("w.fifo") + " 2>/dev/null &").c_str()), 0);
    r = nnc(path("m.nn") + " --run " + path("x.npy") + " --weights " + path("w.fifo"));
    EXPECT_EQ(r.exitCode, 0) << "round " << i << ": " << r.err;
  }
  // Bytes after the tensors (a file joined to another) are refused from a pipe as from
  // a file, as the format's reference reader refuses them; they were ignored.
  write("joined.safetensors", slurp(path("w.safetensors")) + "junk");
  r = nnc(path("m.nn") + " --run " + path("x.npy") + " --weights " + path("joined.safetensors"));
  EXPECT_EQ(r.exitCode, 1) << r.err;
  EXPECT_CONTAINS(r.err, "but its tensors end at byte");
  EXPECT_CONTAINS(r.err, ": the last 4 bytes belong to no tensor (after '");
  fs::remove(path("w.fifo"));
  ASSERT_EQ(::mkfifo(path("w.fifo").c_str(), 0600), 0);
  ASSERT_EQ(std::system(("cat " + path("joined.safetensors") + " > " + path("w.fifo") + " 2>/dev/null &").c_str()), 0);
  r = nnc(path("m.nn") + " --run " + path("x.npy") + " --weights " + path("w.fifo"));
  EXPECT_EQ(r.exitCode, 1) << r.err;
  EXPECT_CONTAINS(r.err, "w.fifo: 4 bytes follow the tensors' data, belonging to no tensor");
}

TEST_F(RunErrors, MissingExtraAndMisShapedTensorsAreNamed) {
  writeNpy("in.npy", {1, 4});
  writeWeights("missing.safetensors", {{"fc1.weight", {3, 4}}, {"fc1.bias", {3}}, {"fc2.weight", {2, 3}}});
  Result r = nnc(path("m.nn") + " --run " + path("in.npy") + " --weights " + path("missing.safetensors"));
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_CONTAINS(r.err, "missing.safetensors");
  EXPECT_CONTAINS(r.err, "missing tensor 'fc2.bias'");
  writeWeights("extra.safetensors", {{"fc1.weight", {3, 4}}, {"fc1.bias", {3}}, {"fc2.weight", {2, 3}},
                                     {"fc2.bias", {2}}, {"fc3.weight", {1, 2}}});
  r = nnc(path("m.nn") + " --run " + path("in.npy") + " --weights " + path("extra.safetensors"));
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_CONTAINS(r.err, "fc3.weight");
  EXPECT_EQ(r.err.find("did you mean"), std::string::npos) << r.err; // every name the model has is there
  writeWeights("typo.safetensors", {{"fc1.weight", {3, 4}}, {"fc1.bias", {3}}, {"fc2.weight", {2, 3}}, {"fc2.bais", {2}}});
  r = nnc(path("m.nn") + " --run " + path("in.npy") + " --weights " + path("typo.safetensors"));
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_CONTAINS(r.err, "'fc2.bais' (did you mean 'fc2.bias'?)");
  writeWeights("shape.safetensors", {{"fc1.weight", {4, 3}}, {"fc1.bias", {3}}, {"fc2.weight", {2, 3}}, {"fc2.bias", {2}}});
  r = nnc(path("m.nn") + " --run " + path("in.npy") + " --weights " + path("shape.safetensors"));
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_CONTAINS(r.err, "'fc1.weight' has shape [4, 3], expected [3, 4] (transposed: PyTorch's layout is [out, in]; a weight map's rule ending in 'transposed' reads a tensor stored [in, out])");
  // A shape that is not the transpose gets no layout hint (a bias is not "dense [out, in]").
  writeWeights("bias.safetensors", {{"fc1.weight", {3, 4}}, {"fc1.bias", {5}}, {"fc2.weight", {2, 3}}, {"fc2.bias", {2}}});
  r = nnc(path("m.nn") + " --run " + path("in.npy") + " --weights " + path("bias.safetensors"));
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_CONTAINS(r.err, "'fc1.bias' has shape [5], expected [3]\n");
}

TEST_F(RunErrors, CorruptSafetensorsFiles) {
  writeNpy("in.npy", {1, 4});
  writeGoodWeights("good.safetensors");
  std::string good = slurp(path("good.safetensors"));
  write("truncated.safetensors", good.substr(0, good.size() - 8));
  std::string huge = good;
  uint64_t big = 1ull << 40;
  std::memcpy(huge.data(), &big, 8);
  write("hugeheader.safetensors", huge);
  write("tiny.safetensors", "abc");
  for (const char *f : {"truncated.safetensors", "hugeheader.safetensors", "tiny.safetensors"}) {
    Result r = nnc(path("m.nn") + " --run " + path("in.npy") + " --weights " + path(f));
    EXPECT_EQ(r.exitCode, 1) << f << "\n" << r.err;
    EXPECT_CONTAINS(r.err, f);
    EXPECT_EQ(r.err.find("internal error"), std::string::npos) << r.err;
  }
}

// A grouped conv's weight as [out, in, kh, kw] (what a groups=1 conv would have) instead
// of PyTorch's [out, in/groups, kh, kw]: refused at load, naming the tensor and both shapes.
// Token inputs: .npy of int32 or int64 and raw int32 give the same output; an id outside
// the vocabulary names the layer, the batch row, the position and the id.
const char *kTokenModel = "model t {\n  input ids: i32[5]\n  tok = embedding(10, 8)\n  pos_embedding(6)\n"
                          "  residual { mlp(16) }\n  dense(10, bias=false, tie=tok)\n}\n";

TEST_F(RunErrors, TokenInputsRunFromInt32Int64AndRaw) {
  nnc_cli_test::SharedKernelCache oneRow; // the three outputs are compared bit for bit
  write("t.nn", kTokenModel);
  const std::vector<int64_t> ids = {0, 9, 3, 3, 7, 1, 2, 8, 4, 5};
  writeIds("ids32.npy", {2, 5}, ids);
  writeIds("ids64.npy", {2, 5}, ids, "<i8");
  std::string raw;
  for (int64_t v : ids) {
    int32_t i = int32_t(v);
    raw.append(reinterpret_cast<const char *>(&i), 4);
  }
  write("ids.bin", raw);
  Result a = nnc(path("t.nn") + " --run " + path("ids32.npy") + " --random-weights 3");
  Result b = nnc(path("t.nn") + " --run " + path("ids64.npy") + " --random-weights 3");
  Result c = nnc(path("t.nn") + " --batch 2 --run " + path("ids.bin") + " --random-weights 3");
  ASSERT_EQ(a.exitCode, 0) << a.err;
  EXPECT_CONTAINS(a.out, "output f32[2, 5, 10]");
  EXPECT_EQ(a.out, b.out);
  ASSERT_EQ(c.exitCode, 0) << c.err;
  EXPECT_EQ(a.out, c.out);
}

TEST_F(RunErrors, TokenIdOutsideTheVocabularyIsNamed) {
  write("t.nn", kTokenModel);
  writeIds("bad.npy", {2, 5}, {0, 1, 2, 3, 4, 5, 6, 7, 10, 9});
  Result r = nnc(path("t.nn") + " --run " + path("bad.npy") + " --random-weights 3");
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_CONTAINS(r.err, "layer 'tok' (embedding, line 3): token id 10 at batch row 1, position 3 is outside the "
                         "vocabulary [0, 10)");
  writeIds("neg.npy", {5}, {0, 1, -2, 3, 4});
  r = nnc(path("t.nn") + " --run " + path("neg.npy") + " --random-weights 3");
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_CONTAINS(r.err, "token id -2 at batch row 0, position 2");
  writeIds("huge.npy", {5}, {0, 1, 2, int64_t(1) << 33, 4}, "<i8");
  r = nnc(path("t.nn") + " --run " + path("huge.npy") + " --random-weights 3");
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_CONTAINS(r.err, "outside the i32 range");
  writeNpy("f.npy", {1, 5});
  r = nnc(path("t.nn") + " --run " + path("f.npy") + " --random-weights 3");
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_CONTAINS(r.err, "an i32 input was expected");
  write("short.bin", std::string(12, '\0'));
  r = nnc(path("t.nn") + " --run " + path("short.bin") + " --random-weights 3");
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_CONTAINS(r.err, "i32 elements");
  EXPECT_EQ(r.err.find("internal error"), std::string::npos) << r.err;
}

TEST_F(RunErrors, GroupedConvWeightWithoutGroupsIsRefused) {
  write("g.nn", "model g {\n  input x: [4, 6, 6]\n  conv = conv2d(8, kernel=3, groups=2)\n}\n");
  writeNpy("img.npy", {1, 4, 6, 6});
  writeWeights("g.safetensors", {{"conv.weight", {8, 4, 3, 3}}, {"conv.bias", {8}}});
  Result r = nnc(path("g.nn") + " --run " + path("img.npy") + " --weights " + path("g.safetensors"));
  EXPECT_EQ(r.exitCode, 1) << r.err;
  EXPECT_CONTAINS(r.err, "tensor 'conv.weight' has shape [8, 4, 3, 3], expected [8, 2, 3, 3]");
  EXPECT_EQ(r.err.find("internal error"), std::string::npos) << r.err;
}

TEST_F(RunErrors, ImageOfAnotherSizeIsRefused) {
  write("c.nn", "model c {\n  input x: [3, 8, 8]\n  conv = conv2d(4, kernel=3)\n}\n");
  writeNpy("img.npy", {1, 3, 9, 8});
  Result r = nnc(path("c.nn") + " --run " + path("img.npy") + " --random-weights 1");
  EXPECT_EQ(r.exitCode, 1) << r.err;
  EXPECT_CONTAINS(r.err, "img.npy");
  EXPECT_EQ(r.err.find("internal error"), std::string::npos) << r.err;
}

// Dense, layernorm and depthwise weights run in every storage dtype, and the output
// really changes with it (not silently run at f32).
TEST_F(RunErrors, LowPrecisionStorageRuns) {
  writeNpy("in.npy", {1, 4});
  write("norm.nn", "model n {\n  input x: [4]\n  fc1 = dense(3)\n  ln = layernorm\n}\n");
  for (const char *dtype : {"f16", "bf16", "i8", "i4"}) {
    Result r = nnc(path("m.nn") + " --run " + path("in.npy") + " --random-weights 1 --dtype " + dtype);
    EXPECT_EQ(r.exitCode, 0) << dtype << ": " << r.err;
    r = nnc(path("norm.nn") + " --run " + path("in.npy") + " --random-weights 1 --dtype " + dtype);
    EXPECT_EQ(r.exitCode, 0) << dtype << ": " << r.err;
  }
  write("dw.nn", "model d {\n  input x: [2, 4, 4]\n  dw = depthwise(3, pad=1)\n}\n");
  writeNpy("img.npy", {1, 2, 4, 4});
  Result f32 = nnc(path("dw.nn") + " --run " + path("img.npy") + " --random-weights 1");
  ASSERT_EQ(f32.exitCode, 0) << f32.err;
  for (const char *dtype : {"f16", "bf16", "i8", "i4"}) {
    Result r = nnc(path("dw.nn") + " --run " + path("img.npy") + " --random-weights 1 --dtype " + dtype);
    EXPECT_EQ(r.exitCode, 0) << dtype << ": " << r.err;
    if (std::string(dtype) != "f16") { EXPECT_NE(r.out, f32.out) << dtype; } // f16 may round to the same 6 digits
  }
}

// The environment's kernel switches: a bad value is a usage error (exit 2) naming the
// variable, the value and what it takes; a good one is reported by --bench.
TEST_F(RunErrors, KernelEnvironmentVariables) {
  writeNpy("in.npy", {2, 4});
  struct Case {
    const char *env, *args, *expected; // args after the model; expected: in stderr (bad) or stdout (good)
  };
  const std::string run = " --run " + path("in.npy") + " --random-weights 1";
  const std::string bench = " --bench --random-weights 1 --format json";
  for (const Case &bad : {Case{"NNC_ISA=avx1024", "", "NNC_ISA=avx1024: no such kernel row (avx512, avx2, avx, sse2)"},
                          Case{"NNC_PREFETCH_16BIT=maybe", " --dtype f16", "NNC_PREFETCH_16BIT=maybe: expected on or off"},
                          Case{"NNC_DIGIT_PRODUCTS=maybe", " --dtype i4", "NNC_DIGIT_PRODUCTS=maybe: expected on or off"},
                          Case{"NNC_PERF_MAP=maybe", "", "NNC_PERF_MAP=maybe: expected on or off"},
                          // read at start, even where this run would not read them (it
                          // took "maybe" as on, or never looked)
                          Case{"NNC_CACHE=maybe", "", "NNC_CACHE=maybe: expected on or off"},
                          Case{"NNC_WEIGHT_CACHE=maybe", "", "NNC_WEIGHT_CACHE=maybe: expected on or off"},
                          Case{"NNC_WEIGHTS_WHILE_RUNNING=maybe", "", "NNC_WEIGHTS_WHILE_RUNNING=maybe: expected on or off"},
                          Case{"NNC_PAIRED_PANELS=maybe", "", "NNC_PAIRED_PANELS=maybe: expected on or off"},
                          Case{"NNC_PREFETCH_DOT=maybe", "", "NNC_PREFETCH_DOT=maybe: expected on or off"},
                          Case{"NNC_PREFETCH_16BIT=maybe", "", "NNC_PREFETCH_16BIT=maybe: expected on or off"},
                          Case{"NNC_PREFETCH_16BIT=2048", "", "or the bytes ahead, 1024 or 4096"},
                          Case{"NNC_WEIGHT_CACHE_MAX=abc", "", "NNC_WEIGHT_CACHE_MAX=abc: expected a size in bytes"}}) {
    Result r = nnc(path("m.nn") + run + bad.args, bad.env);
    EXPECT_EQ(r.exitCode, 2) << bad.env << ": " << r.err;
    EXPECT_CONTAINS(r.err, bad.expected);
  }
  for (const Case &good :
       {Case{"NNC_PREFETCH_16BIT=off", " --dtype bf16", "\"weight_prefetch_16bit\": \"software prefetch off (NNC_PREFETCH_16BIT)\""},
        Case{"NNC_PREFETCH_16BIT=off", "", "\"weight_prefetch_16bit\": null"},
        Case{"NNC_PREFETCH_16BIT=1024", " --dtype f16",
             "\"weight_prefetch_16bit\": \"software prefetch on, 1 KiB ahead (NNC_PREFETCH_16BIT)\""},
        Case{"NNC_PREFETCH_16BIT=on", " --dtype f16", "\"weight_prefetch_dot\": null"},
        Case{"NNC_DIGIT_PRODUCTS=off", " --dtype i4", "\"products\": \"f32 FMA\""},
        Case{"NNC_DIGIT_PRODUCTS=NO", " --dtype i4", "\"products\": \"f32 FMA\""}, // any case, as NNC_CACHE
        Case{"NNC_ISA=SSE2", "", "\"kernel_row\": \"sse2\""}}) {
    Result r = nnc(path("m.nn") + bench + good.args, good.env);
    EXPECT_EQ(r.exitCode, 0) << good.env << good.args << ": " << r.err;
    EXPECT_CONTAINS(r.out, good.expected);
  }
  // The dot kernels' own choice, where the row multiplies i8 activations at all.
  for (const char *dot : {"off", "on"}) {
    Result r = nnc(path("m.nn") + bench + " --dtype i4 --activations i8", std::string("NNC_PREFETCH_DOT=") + dot);
    if (r.exitCode != 0 && r.err.find("i8 activations need") != std::string::npos) {
      std::printf("NNC_PREFETCH_DOT not checked: %s\n", r.err.c_str());
      break;
    }
    EXPECT_EQ(r.exitCode, 0) << r.err;
    EXPECT_CONTAINS(r.out, std::string("\"weight_prefetch_dot\": \"software prefetch ") + dot + " (NNC_PREFETCH_DOT)\"");
  }
}

// --activations bf16|i8: runs where the kernel row has the dot-product instructions and
// is a clear error where it does not (the AVX2 row never has vdpbf16ps); bad values,
// a --dtype it cannot multiply and a model with no layer in that dtype are refused.
TEST_F(RunErrors, LowPrecisionActivations) {
  writeNpy("in.npy", {2, 4});
  for (const char *mode : {"bf16", "i8"}) {
    Result r = nnc(path("m.nn") + " --run " + path("in.npy") + " --random-weights 1 --activations " + mode);
    if (r.exitCode != 0) {
      EXPECT_EQ(r.exitCode, 1) << r.err;
      EXPECT_CONTAINS(r.err, std::string(mode) + " activations need");
    }
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    Result r = nnc("--activations bf16 --run " + path("in.npy") + " --random-weights 1 " + path("m.nn"), "NNC_ISA=avx2");
    EXPECT_EQ(r.exitCode, 1) << r.err;
    EXPECT_CONTAINS(r.err, "bf16 activations need AVX512_BF16 (vdpbf16ps) on the AVX-512 kernel row");
    EXPECT_CONTAINS(r.err, "kernel row avx2_fma");
  }
  Result bad = nnc(path("m.nn") + " --run " + path("in.npy") + " --random-weights 1 --activations f16");
  EXPECT_EQ(bad.exitCode, 2);
  EXPECT_CONTAINS(bad.err, "--activations expects f32, bf16 or i8, found 'f16'");
  bad = nnc(path("m.nn") + " --run " + path("in.npy") + " --random-weights 1 --activations i8 --dtype f16");
  EXPECT_EQ(bad.exitCode, 2);
  EXPECT_CONTAINS(bad.err, "--activations i8 multiplies i8 or i4 weights: --dtype f16 stores f16");
  // i4 weights under i8 activations: scale groups of whole 16-step dot blocks
  Result i4 = nnc(path("m.nn") + " --run " + path("in.npy") + " --random-weights 1 --activations i8 --dtype i4");
  if (i4.exitCode != 0) {
    EXPECT_CONTAINS(i4.err, "i8 activations need");
  }
  // The AVX2 row multiplies i8 activations on any AVX2 host: vpdpbusd with AVX-VNNI, else
  // vpmaddubsw pairs (DotGemmEmitter.h: bytePairProducts), over i8 and i4 weights.
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    const std::string run = path("m.nn") + " --run " + path("in.npy") + " --random-weights 1 --activations i8";
    for (const char *dtype : {"", " --dtype i4"}) {
      Result r = nnc(run + dtype, "NNC_ISA=avx2");
      EXPECT_EQ(r.exitCode, 0) << dtype << ": " << r.err;
    }
  }
  bad = nnc(path("m.nn") + " --run " + path("in.npy") + " --random-weights 1 --activations i8 --dtype i4 --quant-group 8");
  EXPECT_EQ(bad.exitCode, 1) << bad.err;
  EXPECT_CONTAINS(bad.err, "--activations i8 multiplies i4 weights in scale groups of a multiple of 16 weights along K; "
                           "layer 'fc1' has groups of 8");
  write("f16.nn", "model h {\n  input x: [4]\n  fc1 = dense(3, dtype=f16)\n}\n");
  bad = nnc(path("f16.nn") + " --run " + path("in.npy") + " --random-weights 1 --activations bf16");
  EXPECT_EQ(bad.exitCode, 1);
  EXPECT_CONTAINS(bad.err, "model 'h' has no GEMM stored in bf16");
  // A depthwise conv stored in i8 still multiplies f32 activations: said so, not "no layer stores i8".
  write("dw.nn", "model d {\n  input x: [3, 5, 5]\n  depthwise(3)\n}\n");
  writeNpy("dw.npy", {1, 3, 5, 5});
  bad = nnc(path("dw.nn") + " --run " + path("dw.npy") + " --random-weights 1 --dtype i8 --activations i8");
  EXPECT_EQ(bad.exitCode, 1);
  EXPECT_CONTAINS(bad.err, "depthwise convs, embeddings and norms keep f32 activations), and model 'd' has no GEMM stored in i8");
}

TEST_F(RunErrors, RandomWeightsAreDeterministicAndOutputFilesAreWritten) {
  nnc_cli_test::SharedKernelCache oneRow; // a.npy and b.npy are compared bit for bit
  writeNpy("in.npy", {3, 4});
  Result a = nnc(path("m.nn") + " --run " + path("in.npy") + " --random-weights 7 --output " + path("a.npy"));
  Result b = nnc(path("m.nn") + " --run " + path("in.npy") + " --random-weights 7 --output " + path("b.npy"));
  ASSERT_EQ(a.exitCode, 0) << a.err;
  ASSERT_EQ(b.exitCode, 0) << b.err;
  std::string fa = slurp(path("a.npy")), fb = slurp(path("b.npy"));
  EXPECT_FALSE(fa.empty());
  EXPECT_EQ(fa, fb);
  Result c = nnc(path("m.nn") + " --run " + path("in.npy") + " --random-weights 8 --output " + path("c.npy"));
  ASSERT_EQ(c.exitCode, 0) << c.err;
  EXPECT_NE(fa, slurp(path("c.npy")));
  // Seeds are the API's: every unsigned 64-bit integer, and nothing else.
  Result top = nnc(path("m.nn") + " --run " + path("in.npy") + " --random-weights 18_446_744_073_709_551_615");
  EXPECT_EQ(top.exitCode, 0) << top.err;
  for (const char *bad : {"18446744073709551616", "-1", "1e3"}) {
    Result r = nnc(path("m.nn") + " --run " + path("in.npy") + " --random-weights " + bad);
    EXPECT_EQ(r.exitCode, 2) << bad;
    EXPECT_CONTAINS(r.err, "--random-weights expects an integer from 0 to 18446744073709551615 (2^64 - 1)");
  }
}

// Output files are checked before any work: an input of the run is never overwritten (a
// mapped weights file, the model), and a file that cannot be created is said at once.
TEST_F(RunErrors, OutputFilesThatWouldDestroyAnInputOrCannotBeWrittenAreRefusedFirst) {
  writeNpy("in.npy", {1, 4});
  writeGoodWeights("w.safetensors");
  const std::string weights = slurp(path("w.safetensors")), model = slurp(path("m.nn"));
  const std::string run = path("m.nn") + " --run " + path("in.npy") + " --weights " + path("w.safetensors");
  Result r = nnc(run + " --output " + path("w.safetensors"));
  EXPECT_EQ(r.exitCode, 1) << r.err;
  EXPECT_CONTAINS(r.err, "is also the --weights file: writing it would destroy that input");
  EXPECT_EQ(slurp(path("w.safetensors")), weights);
  r = nnc(run + " --output " + path("in.npy"));
  EXPECT_EQ(r.exitCode, 1) << r.err;
  EXPECT_CONTAINS(r.err, "is also the --run file");
  r = nnc(path("m.nn") + " --svg " + path("m.nn"));
  EXPECT_EQ(r.exitCode, 1) << r.err;
  EXPECT_CONTAINS(r.err, "is also the model file");
  EXPECT_EQ(slurp(path("m.nn")), model);
  r = nnc(run + " --output " + path("no/such/dir/o.npy"));
  EXPECT_EQ(r.exitCode, 1) << r.err;
  EXPECT_CONTAINS(r.err, "does not exist");
  EXPECT_EQ(r.out, ""); // nothing ran
  r = nnc(run + " --output " + path("m.nn") + "/o.npy"); // a file where the directory should be
  EXPECT_EQ(r.exitCode, 1) << r.err;
  EXPECT_CONTAINS(r.err, path("m.nn") + " is not a directory");
  r = nnc(run + " --output " + dir_.string());
  EXPECT_EQ(r.exitCode, 1) << r.err;
  EXPECT_CONTAINS(r.err, "is a directory");
  // procfs and sysfs: root may "write" every directory there, yet no file can be made.
  for (const char *kernelDir : {"/proc", "/sys"}) {
    r = nnc(run + " --output " + std::string(kernelDir) + "/o.npy");
    EXPECT_EQ(r.exitCode, 1) << r.err;
    EXPECT_CONTAINS(r.err, std::string(kernelDir) + " is on " + (kernelDir[1] == 'p' ? "procfs" : "sysfs"));
    EXPECT_EQ(r.out, "");
  }
  r = nnc(run + " --output " + path("o.npy"));
  EXPECT_EQ(r.exitCode, 0) << r.err;
  EXPECT_TRUE(fs::exists(path("o.npy")));
}

// A model whose output is its input's token ids, passed on by views, computes nothing:
// refused, not printed as f32 bit patterns.
TEST_F(RunErrors, AModelThatPassesItsIdsOnDoesNotRun) {
  write("ids.nn", "model p {\n  input ids: i32[5]\n  flatten\n}\n");
  writeIds("ids.npy", {1, 5}, {1, 2, 3, 4, 5});
  Result r = nnc(path("ids.nn") + " --run " + path("ids.npy") + " --random-weights 1");
  EXPECT_EQ(r.exitCode, 1) << r.out;
  EXPECT_CONTAINS(r.err, "is i32[1, 5], the input's token ids passed on unchanged; a run computes f32 values");
  Result check = nnc(path("ids.nn") + " --check");
  EXPECT_EQ(check.exitCode, 0) << check.err; // the program itself is well formed
}

// Bytes of a user's file that are not UTF-8 are quoted as \xNN in a message.
TEST_F(RunErrors, NonUtf8BytesOfAWeightsHeaderAreQuoted) {
  writeNpy("in.npy", {1, 4});
  std::string header = "{\"\xff\xfe\":1}";
  std::string bytes(8, '\0');
  const uint64_t len = header.size();
  std::memcpy(bytes.data(), &len, 8);
  write("bad.safetensors", bytes + header);
  Result r = nnc(path("m.nn") + " --run " + path("in.npy") + " --weights " + path("bad.safetensors"));
  EXPECT_EQ(r.exitCode, 1) << r.err;
  EXPECT_CONTAINS(r.err, "\\xff");
  EXPECT_EQ(r.err.find('\xff'), std::string::npos) << r.err;
}

} // namespace
