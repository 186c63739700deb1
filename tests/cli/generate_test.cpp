// nnc --generate: greedy continuations are the argmax chain of full runs, sampling is
// reproducible from its seed and keeps to its nucleus, stop ids end rows, --output
// writes the new ids, and every impossible request
// (a context too short, a prompt of the wrong shape, a model that is not a language
// model, a bidirectional one) is refused with the numbers before any work.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "NncProcess.h"
#include "ScopedEnv.h"

namespace {
using nnc_cli_test::runNnc;

const char *kDecoder = "model lm(seq = 12) {\n  input tokens: i32[seq]\n  tok = embedding(23, 16)\n"
                       "  residual { rmsnorm; attention(4, kv_heads=2, rope=true) }\n"
                       "  residual { rmsnorm; gated_mlp(24) }\n  rmsnorm\n  head = dense(23, bias=false)\n}\n";

std::vector<std::string> lines(const std::string &text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// Each id --generate picks is the argmax of the last row of a full run of `reference`
// over the prefix so far (its seq set to the prefix's length).
void expectGreedyChain(nnc_cli_test::TempDir &dir, const std::string &model, const std::string &reference,
                       std::vector<int64_t> ids) {
  const std::string prompt = dir.write("p.npy", nnc_cli_test::npyIntegers({1, int64_t(ids.size())}, ids));
  auto gen = runNnc({model, "--generate", "5", "--prompt", prompt, "--random-weights", "2", "--output",
                     dir.write("out.npy", "")});
  ASSERT_EQ(gen.exitCode, 0) << gen.describe();
  std::istringstream got(lines(gen.out).at(0));
  for (int step = 0; step < 5; ++step) {
    const std::string prefix = dir.write("x.npy", nnc_cli_test::npyIntegers({1, int64_t(ids.size())}, ids));
    auto run =
        runNnc({reference, "--set", "seq=" + std::to_string(ids.size()), "--run", prefix, "--random-weights", "2"});
    ASSERT_EQ(run.exitCode, 0) << run.describe();
    const std::string argmax = run.out.substr(run.out.find("argmax per row: ") + 16);
    std::istringstream rows(argmax);
    int64_t last = -1;
    for (int64_t v; rows >> v;) last = v;
    int64_t next = -1;
    ASSERT_TRUE(got >> next) << gen.out;
    EXPECT_EQ(next, last) << "step " << step << ": " << gen.out;
    ids.push_back(next);
  }
  EXPECT_NE(gen.err.find("wrote i32[1, 5] new ids"), std::string::npos) << gen.err;
}

TEST(Generate, GreedyIdsAreTheArgmaxOfFullRunsOverTheGrowingPrefix) {
  nnc_cli_test::SharedKernelCache oneRow; // an argmax near a tie must not depend on the row
  nnc_cli_test::TempDir dir;
  const std::string model = dir.write("lm.nn", kDecoder);
  ASSERT_NO_FATAL_FAILURE(expectGreedyChain(dir, model, model, {3, 17, 5, 9}));
}

// A table sized by seq keeps the context's size in the programs for the prompt and for
// one position (it was sized by their lengths): the same ids as full runs of the model
// with the table's size written as a number.
TEST(Generate, TablesSizedBySeqKeepTheContextsSize) {
  nnc_cli_test::SharedKernelCache oneRow;
  nnc_cli_test::TempDir dir;
  const char *gpt = "model g(seq = 16) {{\n  input t: i32[seq]\n  tok = embedding(23, 16)\n  pos = pos_embedding({})\n"
                    "  residual {{ layernorm; attention(4) }}\n  residual {{ layernorm; mlp(32) }}\n"
                    "  layernorm\n  head = dense(23, bias=false, tie=tok)\n}}\n";
  ASSERT_NO_FATAL_FAILURE(expectGreedyChain(dir, dir.write("g.nn", fmt::format(gpt, "seq")),
                                            dir.write("g16.nn", fmt::format(gpt, "16")), {3, 17, 5, 9}));
}

// --kv-dtype: what --generate allocates for the KV cache is the report's figure for
// that dtype at the same context and batch (i8 with its scales); f32 is the default.
// --weights-in-place (f32 GEMM weights read as rows through a table): the same greedy
// continuation as packed weights, on 1 and 2 threads.
TEST(Generate, WeightsInPlaceContinueAsPackedWeights) {
  nnc_cli_test::TempDir dir;
  const std::string model = dir.write("lm.nn", kDecoder);
  const std::string prompt = dir.write("p.npy", nnc_cli_test::npyIntegers({2, 3}, {3, 17, 5, 9, 1, 22}));
  auto packed = runNnc({model, "--batch", "2", "--generate", "6", "--prompt", prompt, "--random-weights", "4"});
  ASSERT_EQ(packed.exitCode, 0) << packed.describe();
  for (const char *threads : {"1", "2"}) {
    auto inPlace = runNnc({model, "--batch", "2", "--generate", "6", "--prompt", prompt, "--random-weights", "4",
                           "--weights-in-place", "--threads", threads});
    ASSERT_EQ(inPlace.exitCode, 0) << inPlace.describe();
    EXPECT_EQ(lines(inPlace.out).at(0), lines(packed.out).at(0)) << threads << " threads";
    EXPECT_EQ(lines(inPlace.out).at(1), lines(packed.out).at(1)) << threads << " threads";
  }
}

// In place, the prompt's program does not wait for the weight-prefetch measurement
// (JitEngine::deferWeightPrefetchChoice): --generate 1 never decides it; the decode
// program does. The same for the dot kernels' choice.
TEST(Generate, WeightsInPlaceDecideThePrefetchWithTheDecodeProgram) {
  nnc_cli_test::TempDir dir;
  const std::string model = dir.write("lm.nn", kDecoder);
  const std::string prompt = dir.write("p.npy", nnc_cli_test::npyIntegers({1, 3}, {3, 17, 5}));
  for (const char *n : {"1", "3"}) {
    auto gen = runNnc({model, "--generate", n, "--prompt", prompt, "--random-weights", "4", "--weights-in-place",
                       "--format", "json"});
    ASSERT_EQ(gen.exitCode, 0) << gen.describe();
    const nlohmann::json j = nlohmann::json::parse(gen.out);
    EXPECT_EQ(j.at("weight_prefetch_16bit").is_null(), std::string(n) == "1") << gen.out;
  }
  // So do the decode dot kernels' own choice (i4 × i8 at one row), where the row has them.
  for (const char *n : {"1", "3"}) {
    auto gen = runNnc({model, "--generate", n, "--prompt", prompt, "--random-weights", "4", "--dtype", "i4",
                       "--activations", "i8", "--format", "json"});
    if (gen.exitCode != 0 && gen.err.find("i8 activations need") != std::string::npos) {
      std::printf("i4 x i8 not checked: %s\n", gen.err.c_str());
      break;
    }
    ASSERT_EQ(gen.exitCode, 0) << gen.describe();
    const nlohmann::json j = nlohmann::json::parse(gen.out);
    EXPECT_EQ(j.at("weight_prefetch_dot").is_null(), std::string(n) == "1") << gen.out;
  }
}

// What a decoder allocates for its KV cache, layer by layer, is what the report counts,
// to the byte: also where a layer's cache is not a multiple of 64 bytes (head size 6,
// context 13), which the run's state had padded to 16 floats each.
TEST(Generate, KvCacheBytesAreTheReportsFigure) {
  nnc_cli_test::TempDir dir;
  const std::string prompt = dir.write("p.npy", nnc_cli_test::npyIntegers({2, 3}, {1, 2, 3, 4, 5, 6}));
  const std::string oddHeads = "model lm(seq = 13) {\n  input tokens: i32[seq]\n  tok = embedding(23, 24)\n"
                               "  repeat 3 { residual { rmsnorm; attention(4, kv_heads=1, rope=true) } }\n"
                               "  rmsnorm\n  head = dense(23, bias=false)\n}\n";
  for (const std::string &text : {std::string(kDecoder), oddHeads}) {
    const std::string model = dir.write("lm.nn", text);
    std::set<int64_t> sizes;
    for (const char *kv : {"f32", "f16", "bf16", "i8"}) {
      auto gen = runNnc({model, "--generate", "3", "--prompt", prompt, "--random-weights", "3", "--kv-dtype", kv,
                         "--format", "json"});
      ASSERT_EQ(gen.exitCode, 0) << gen.describe();
      auto report = runNnc({model, "--batch", "2", "--kv-dtype", kv, "--format", "json"});
      ASSERT_EQ(report.exitCode, 0) << report.describe();
      const nlohmann::json g = nlohmann::json::parse(gen.out), r = nlohmann::json::parse(report.out);
      EXPECT_EQ(g.at("kv_dtype"), kv);
      EXPECT_EQ(r["memory"]["kv_cache"]["dtype"], kv);
      EXPECT_EQ(g.at("kv_cache_bytes"), r["memory"]["kv_cache"]["bytes_at_context"][kv]) << kv << "\n" << text;
      sizes.insert(g.at("kv_cache_bytes").get<int64_t>());
    }
    if (text == kDecoder) // 2 rows × 12 positions × (key + value) × 8 columns: f32 4 B, f16 and
      // bf16 2 B, i8 1 B plus 4 f32 scales (2 kv heads × key and value)
      EXPECT_EQ(sizes, (std::set<int64_t>{2 * 12 * 16 * 4, 2 * 12 * 16 * 2, 2 * 12 * (16 + 16)}));
    else // 3 layers × 2 rows × 13 positions × (key + value) × 6 columns; i8 rows padded to 8 bytes
      EXPECT_EQ(sizes, (std::set<int64_t>{3 * 2 * 13 * 12 * 4, 3 * 2 * 13 * 12 * 2, 3 * 2 * 13 * 2 * (8 + 4)}));
  }
  const std::string model = dir.write("lm.nn", kDecoder);
  auto bad = runNnc({model, "--generate", "3", "--prompt", prompt, "--random-weights", "3", "--kv-dtype", "i4"});
  EXPECT_EQ(bad.exitCode, 2) << bad.describe();
  EXPECT_NE(bad.err.find("--kv-dtype expects f32, f16, bf16 or i8, found 'i4'"), std::string::npos) << bad.err;
  auto misplaced = runNnc({model, "--run", prompt, "--random-weights", "3", "--kv-dtype", "f16"});
  EXPECT_EQ(misplaced.exitCode, 2) << misplaced.describe();
  EXPECT_NE(misplaced.err.find("--kv-dtype goes with --generate"), std::string::npos) << misplaced.err;
}

// --output as for --run: a .npy when the name ends in .npy, else the raw int32 ids (the
// .npy's data); a name without .npy was written as a .npy.
TEST(Generate, OutputIsANpyOrRawInt32ByItsName) {
  nnc_cli_test::TempDir dir;
  const std::string model = dir.write("lm.nn", kDecoder);
  const std::string prompt = dir.write("p.npy", nnc_cli_test::npyIntegers({2, 3}, {1, 2, 3, 4, 5, 6}));
  auto slurp = [](const std::string &path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  const std::string npy = dir.write("ids.npy", ""), raw = dir.write("ids.bin", "");
  for (const std::string &out : {npy, raw}) {
    auto gen = runNnc({model, "--generate", "4", "--prompt", prompt, "--random-weights", "5", "--output", out});
    ASSERT_EQ(gen.exitCode, 0) << gen.describe();
  }
  const std::string header = slurp(npy), ids = slurp(raw);
  ASSERT_EQ(ids.size(), 2u * 4u * 4u); // [2, 4] int32
  EXPECT_EQ(header.substr(0, 6), "\x93NUMPY");
  EXPECT_NE(header.find("'descr': '<i4'"), std::string::npos) << header;
  EXPECT_EQ(header.substr(header.size() - ids.size()), ids);
}

// The memory bill of --generate (--max-memory) is what it allocates: the KV cache at the
// figure the run reports, the prompt's program (its output: the last position's logits)
// and the decode step's arena; not the model run whole at its context, which billed
// [batch, seq, vocab] logits and no cache.
TEST(Generate, MemoryBillCountsTheKvCacheAndThePromptsProgram) {
  nnc_cli_test::TempDir dir;
  const std::string model = dir.write("lm.nn", kDecoder);
  const std::string prompt = dir.write("p.npy", nnc_cli_test::npyIntegers({2, 3}, {1, 2, 3, 4, 5, 6}));
  const std::vector<std::string> common = {model, "--set", "seq=4000", "--generate", "3", "--prompt", prompt,
                                           "--random-weights", "3"};
  auto with = [&](std::vector<std::string> more) {
    std::vector<std::string> args = common;
    args.insert(args.end(), more.begin(), more.end());
    return runNnc(args);
  };
  auto gen = with({"--format", "json"});
  ASSERT_EQ(gen.exitCode, 0) << gen.describe();
  const int64_t kv = nlohmann::json::parse(gen.out).at("kv_cache_bytes").get<int64_t>();
  EXPECT_EQ(kv, 2 * 4000 * 16 * 4);
  auto tight = with({"--max-memory", "1000"});
  ASSERT_EQ(tight.exitCode, 1) << tight.describe();
  auto line = [&](const std::string &part) {
    const size_t at = tight.err.find("\n  " + part + ":");
    return at == std::string::npos ? std::string() : tight.err.substr(at + 1, tight.err.find('\n', at + 1) - at - 1);
  };
  EXPECT_NE(line("KV cache").find(" 512,000 bytes"), std::string::npos) << tight.err;
  EXPECT_NE(line("output").find(" 184 bytes"), std::string::npos) << tight.err; // 2 rows × 23 logits × 4 B
  EXPECT_FALSE(line("decode step's activation arena").empty()) << tight.err;
  // The largest layer's tensors are inside a gated_mlp's: its step is that layer's.
  EXPECT_NE(tight.err.find("the largest layer is '4.down' (gated_mlp, line 5)"), std::string::npos) << tight.err;
}

// --format json: the same ids as the text output, and timings and streaming figures
// that are consistent with each other.
TEST(Generate, JsonCarriesTheIdsAndTheFigures) {
  nnc_cli_test::SharedKernelCache oneRow; // the two runs' ids are compared
  nnc_cli_test::TempDir dir;
  const std::string model = dir.write("lm.nn", kDecoder);
  const std::string prompt = dir.write("p.npy", nnc_cli_test::npyIntegers({2, 3}, {1, 2, 3, 4, 5, 6}));
  std::vector<std::string> args{model, "--generate", "4", "--prompt", prompt, "--random-weights", "3"};
  auto text = runNnc(args);
  ASSERT_EQ(text.exitCode, 0) << text.describe();
  // a tiny model's weights stay in the caches: no share of a read rate is given
  EXPECT_NE(text.err.find(" of GEMM weights per token: "), std::string::npos) << text.err;
  EXPECT_NE(text.err.find("GB/s, from the caches (they fit in the "), std::string::npos) << text.err;
  EXPECT_EQ(text.err.find("read probe"), std::string::npos) << text.err;
  EXPECT_NE(text.err.find(" ms (compile "), std::string::npos) << text.err; // ready's two parts
  args.insert(args.end(), {"--format", "json"});
  auto js = runNnc(args);
  ASSERT_EQ(js.exitCode, 0) << js.describe();
  const nlohmann::json j = nlohmann::json::parse(js.out);
  const std::vector<std::string> rows = lines(text.out);
  ASSERT_EQ(j.at("ids").size(), 2u);
  for (size_t b = 0; b < 2; ++b) {
    std::ostringstream row;
    row << "[" << b << "]";
    for (int64_t id : j.at("ids")[b].get<std::vector<int64_t>>()) row << " " << id;
    EXPECT_EQ(row.str(), rows.at(b));
  }
  EXPECT_EQ(j.at("prompt"), 3);
  EXPECT_EQ(j.at("new_tokens"), 4);
  EXPECT_EQ(j.at("context"), 12);
  // 23×16 embedding gathered; q/k/v 16×(16+2·8), o 16×16, gate/up 2·24×16, down 16×24, head 23×16: packed, > 0.
  EXPECT_GT(j.at("weight_bytes").get<int64_t>(), 4 * (16 * 32 + 16 * 16 + 3 * 24 * 16 + 23 * 16) - 1);
  const double gbps = j.at("weight_bytes").get<double>() * 3 / (j.at("decode_ms").get<double>() * 1e-3) / 1e9;
  EXPECT_NEAR(j.at("decode_weight_gbps").get<double>(), gbps, 1e-9 + 1e-9 * gbps);
  EXPECT_GT(j.at("read_probe_gbps").get<double>(), 0.0);
  EXPECT_NEAR(j.at("decode_tokens_per_s").get<double>(), 2 * 3 / (j.at("decode_ms").get<double>() * 1e-3),
              1e-6 * j.at("decode_tokens_per_s").get<double>());
  EXPECT_GT(j.at("step_ready_ms").get<double>(), 0.0); // the one-position program, after the first token
  // Ready = compiling the prompt's program + loading the weights + a little around them.
  const double compileMs = j.at("compile_ms").get<double>(), loadMs = j.at("load_ms").get<double>();
  EXPECT_GT(compileMs, 0.0);
  EXPECT_GT(loadMs, 0.0);
  EXPECT_LE(compileMs + loadMs, j.at("ready_ms").get<double>());
  EXPECT_EQ(j.at("weights_while_prompt"), false); // a thread on every core: none left free

  // On one thread, a host with another core makes the weights there as the prompt runs
  // (CompiledModel::setWeightsWhileRunning): the same ids; the weights are then ready
  // after compiling and before the prompt's last step, not before its first.
  std::vector<std::string> oneThread = args;
  oneThread.insert(oneThread.end(), {"--threads", "1"});
  auto single = runNnc(oneThread);
  ASSERT_EQ(single.exitCode, 0) << single.describe();
  const nlohmann::json s = nlohmann::json::parse(single.out);
  EXPECT_EQ(s.at("ids"), j.at("ids"));
  EXPECT_EQ(s.at("weights_while_prompt"), std::thread::hardware_concurrency() > 1);
  const double soloCompileMs = s.at("compile_ms").get<double>(), soloLoadMs = s.at("load_ms").get<double>();
  EXPECT_GT(soloLoadMs, 0.0);
  EXPECT_LE(soloCompileMs + soloLoadMs, s.at("ready_ms").get<double>() + s.at("prefill_ms").get<double>());
  { // NNC_WEIGHTS_WHILE_RUNNING=off: packed before the first step, as on a thread per CPU
    nnc::test::ScopedEnv off("NNC_WEIGHTS_WHILE_RUNNING", "off");
    auto first = runNnc(oneThread);
    ASSERT_EQ(first.exitCode, 0) << first.describe();
    const nlohmann::json f = nlohmann::json::parse(first.out);
    EXPECT_EQ(f.at("weights_while_prompt"), false);
    EXPECT_EQ(f.at("ids"), j.at("ids"));
    EXPECT_LE(f.at("compile_ms").get<double>() + f.at("load_ms").get<double>(), f.at("ready_ms").get<double>());
  }
  if (s.at("weights_while_prompt") == true) {
    std::vector<std::string> textArgs(args.begin(), args.end() - 2); // without --format json
    textArgs.insert(textArgs.end(), {"--threads", "1"});
    auto text1 = runNnc(textArgs);
    ASSERT_EQ(text1.exitCode, 0) << text1.describe();
    EXPECT_NE(text1.err.find("made on the free cores as the prompt ran"), std::string::npos) << text1.err;
  }

  // One token: the prefill gives it and the one-position program is never compiled;
  // the same first ids, and the same GEMM weights counted (the prefill's).
  args[2] = "1";
  auto one = runNnc(args);
  ASSERT_EQ(one.exitCode, 0) << one.describe();
  const nlohmann::json k = nlohmann::json::parse(one.out);
  EXPECT_EQ(k.at("step_ready_ms").get<double>(), 0.0);
  EXPECT_EQ(k.at("weight_bytes"), j.at("weight_bytes"));
  for (size_t b = 0; b < 2; ++b) EXPECT_EQ(k.at("ids")[b][0], j.at("ids")[b][0]) << "batch row " << b;
}

// --profile: the prompt's run and the decode steps' mean, per layer kind and kernel; the
// steps' times fit in the run's own time; the prompt's program has the last-position
// cut, the one-position program does not; --profile elsewhere is a usage error.
// One new token runs no decode step: said so, with 0 ms of decoding in JSON (it gave
// "decode 0.00 ms = 0.00 tokens/s" and 2e-5 ms); one new token, not "1 new ones".
TEST(Generate, OneNewTokenSaysThatNoDecodeStepRan) {
  nnc_cli_test::TempDir dir;
  const std::string model = dir.write("lm.nn", kDecoder);
  const std::string prompt = dir.write("p.npy", nnc_cli_test::npyIntegers({1, 3}, {1, 2, 3}));
  auto text = runNnc({model, "--generate", "1", "--prompt", prompt, "--random-weights", "3"});
  ASSERT_EQ(text.exitCode, 0) << text.describe();
  EXPECT_NE(text.err.find("; no decode step (the first token was the last)"), std::string::npos) << text.err;
  EXPECT_EQ(text.err.find("decode 0.00 ms"), std::string::npos) << text.err;
  auto js = runNnc({model, "--generate", "1", "--prompt", prompt, "--random-weights", "3", "--format", "json"});
  ASSERT_EQ(js.exitCode, 0) << js.describe();
  EXPECT_EQ(nlohmann::json::parse(js.out).at("decode_ms"), 0.0);
  const std::string long11 = dir.write("l.npy", nnc_cli_test::npyIntegers({1, 12}, std::vector<int64_t>(12, 1)));
  auto full = runNnc({model, "--generate", "1", "--prompt", long11, "--random-weights", "3"});
  EXPECT_EQ(full.exitCode, 1);
  EXPECT_NE(full.err.find("a prompt of 12 tokens and 1 new one need 13 positions"), std::string::npos) << full.err;
  const std::string empty = dir.write("e.npy", nnc_cli_test::npyIntegers({1, 0}, {}));
  auto none = runNnc({model, "--generate", "2", "--prompt", empty, "--random-weights", "3"});
  EXPECT_EQ(none.exitCode, 1);
  EXPECT_NE(none.err.find("found [1, 0] (an empty prompt: at least one token is needed)"), std::string::npos)
      << none.err;
  // A temperature too small for a double read as 0 (greedy), then --seed was refused.
  auto tiny = runNnc({model, "--generate", "2", "--prompt", prompt, "--random-weights", "3", "--temperature", "1e-400",
                      "--seed", "3"});
  EXPECT_EQ(tiny.exitCode, 2) << tiny.describe();
  EXPECT_NE(tiny.err.find("--temperature 1e-400 is below the smallest double"), std::string::npos) << tiny.err;
}

TEST(Generate, ProfileTimesThePromptAndTheDecodeSteps) {
  nnc_cli_test::TempDir dir;
  const std::string model = dir.write("lm.nn", kDecoder);
  const std::string prompt = dir.write("p.npy", nnc_cli_test::npyIntegers({2, 3}, {1, 2, 3, 4, 5, 6}));
  std::vector<std::string> args{model, "--generate", "4", "--prompt", prompt, "--random-weights", "3", "--profile"};
  auto text = runNnc(args);
  ASSERT_EQ(text.exitCode, 0) << text.describe();
  EXPECT_NE(text.err.find("prefill: time per layer kind and kernel (3 positions, one run"), std::string::npos)
      << text.err;
  EXPECT_NE(text.err.find("decode: time per layer kind and kernel (a step's mean over 3 steps"), std::string::npos)
      << text.err;
  args.insert(args.end(), {"--format", "json"});
  auto js = runNnc(args);
  ASSERT_EQ(js.exitCode, 0) << js.describe();
  const nlohmann::json j = nlohmann::json::parse(js.out);
  auto kinds = [&](const char *key, double runMillis) {
    std::set<std::string> seen;
    double share = 0, micros = 0;
    for (const auto &row : j.at(key)) {
      seen.insert(row.at("layer_kind").get<std::string>() + " " + row.at("kernel").get<std::string>());
      EXPECT_GE(row.at("steps").get<int>(), 1) << row;
      share += row.at("share").get<double>();
      micros += row.at("us_per_run").get<double>();
    }
    EXPECT_NEAR(share, 1.0, 1e-9) << key;
    EXPECT_LE(micros, runMillis * 1e3) << key << ": the steps are inside the run";
    return seen;
  };
  const std::set<std::string> prefill = kinds("prefill_profile", j.at("prefill_ms").get<double>());
  const std::set<std::string> decode = kinds("decode_profile", j.at("decode_ms").get<double>() / 3);
  for (const char *kind : {"attention attn", "attention kvappend", "attention rope", "gated_mlp gemm", "dense argmax"}) {
    EXPECT_TRUE(prefill.count(kind)) << kind;
    EXPECT_TRUE(decode.count(kind)) << kind;
  }
  EXPECT_TRUE(prefill.count("attention lastpos"));
  EXPECT_FALSE(decode.count("attention lastpos"));
  for (const char *key : {"prefill_slowest_layers", "decode_slowest_layers"}) {
    const auto &layers = j.at(key);
    ASSERT_EQ(layers.size(), 7u) << key << ": the model's 7 layers, fewer than 8"; // tok, 3 norms, attention, mlp, head
    for (size_t i = 1; i < layers.size(); ++i)
      EXPECT_GE(layers[i - 1].at("us_per_run").get<double>(), layers[i].at("us_per_run").get<double>()) << key;
  }

  auto run = runNnc({model, "--run", prompt, "--random-weights", "3", "--profile"});
  EXPECT_EQ(run.exitCode, 2);
  EXPECT_NE(run.err.find("--profile goes with --bench or --generate"), std::string::npos) << run.err;
}

// `nnc MODEL --generate 8 --prompt PROMPT --random-weights SEED` and `extra`, which must succeed.
nnc_cli_test::Result generate8(const std::string &model, const std::string &prompt, const std::string &seed,
                               const std::vector<std::string> &extra) {
  std::vector<std::string> args = {model, "--generate", "8", "--prompt", prompt, "--random-weights", seed};
  args.insert(args.end(), extra.begin(), extra.end());
  auto r = runNnc(args);
  EXPECT_EQ(r.exitCode, 0) << r.describe();
  return r;
}

TEST(Generate, SamplingIsReproducibleFromItsSeed) {
  nnc_cli_test::SharedKernelCache oneRow; // a draw near a boundary must not depend on the row
  nnc_cli_test::TempDir dir;
  const std::string model = dir.write("lm.nn", kDecoder);
  const std::string prompt = dir.write("p.npy", nnc_cli_test::npyIntegers({2, 3}, {1, 2, 3, 4, 5, 6}));
  auto sample = [&](const char *seed) {
    auto r = generate8(model, prompt, "1", {"--temperature", "1.5", "--top-k", "10", "--seed", seed});
    EXPECT_EQ(lines(r.out).size(), 2u) << r.out; // one line per batch row
    return r.out;
  };
  EXPECT_EQ(sample("7"), sample("7"));
  EXPECT_NE(sample("7"), sample("8")); // 16 draws from 10 ids at temperature 1.5
}

TEST(Generate, TopPNarrowsTheDrawToTheNucleus) {
  nnc_cli_test::SharedKernelCache oneRow;
  nnc_cli_test::TempDir dir;
  const std::string model = dir.write("lm.nn", kDecoder);
  const std::string prompt = dir.write("p.npy", nnc_cli_test::npyIntegers({2, 3}, {1, 2, 3, 4, 5, 6}));
  auto generate = [&](const std::vector<std::string> &extra) { return generate8(model, prompt, "1", extra).out; };
  // A nucleus this small is the most probable id alone: the greedy continuation, whatever the seed.
  const std::string greedy = generate({});
  EXPECT_EQ(generate({"--temperature", "1.5", "--top-p", "1e-9", "--seed", "3"}), greedy);
  EXPECT_EQ(generate({"--temperature", "1.5", "--top-p", "1e-9", "--seed", "4"}), greedy);
  const std::vector<std::string> wide = {"--temperature", "1.5", "--top-p", "0.9", "--seed", "7"};
  EXPECT_EQ(generate(wide), generate(wide));
  EXPECT_NE(generate(wide), greedy); // 16 draws from the nucleus of 10 ids at temperature 1.5

  auto json = runNnc({model, "--generate", "2", "--prompt", prompt, "--random-weights", "1", "--temperature", "1",
                      "--top-p", "0.5", "--format", "json"});
  ASSERT_EQ(json.exitCode, 0) << json.describe();
  EXPECT_EQ(nlohmann::json::parse(json.out).at("sampling"), "sampled: temperature 1, top-k all, top-p 0.5, seed 0");

  for (const char *bad : {"0", "1.5", "-0.5", "0x1", "nan"}) {
    auto r = runNnc({model, "--generate", "2", "--prompt", prompt, "--random-weights", "1", "--top-p", bad});
    EXPECT_EQ(r.exitCode, 2) << bad;
    EXPECT_NE(r.err.find("--top-p expects a number in (0, 1], found"), std::string::npos) << r.err;
  }
  auto stray = runNnc({model, "--top-p", "0.5"});
  EXPECT_EQ(stray.exitCode, 2);
  EXPECT_NE(stray.err.find("--top-p, --seed and --stop go with --generate"), std::string::npos) << stray.err;
  // Given at their defaults they are as unused (they were taken in silence).
  for (const std::vector<std::string> &unused : {std::vector<std::string>{"--check", "--seed", "0"},
                                                 {"--check", "--temperature", "0"}, {"--top-p", "1"}}) {
    std::vector<std::string> args = {model};
    args.insert(args.end(), unused.begin(), unused.end());
    auto r = runNnc(args);
    EXPECT_EQ(r.exitCode, 2) << r.describe();
    EXPECT_NE(r.err.find("go with --generate"), std::string::npos) << r.err;
  }
  auto kvDefault = runNnc({model, "--check", "--kv-dtype", "f32"});
  EXPECT_EQ(kvDefault.exitCode, 2) << kvDefault.describe();
  EXPECT_NE(kvDefault.err.find("--kv-dtype goes with --generate or --report"), std::string::npos) << kvDefault.err;
}

// The ids of each printed row ("[b] " prefixed for a batch).
std::vector<std::vector<int>> idRows(const std::string &out) {
  std::vector<std::vector<int>> rows;
  for (const std::string &line : lines(out)) {
    std::istringstream in(line.substr(line.rfind(']') == std::string::npos ? 0 : line.rfind(']') + 1));
    rows.emplace_back();
    for (int id; in >> id;) rows.back().push_back(id);
  }
  return rows;
}

TEST(Generate, StopIdsEndEachRowAndThenTheGeneration) {
  nnc_cli_test::SharedKernelCache oneRow;
  nnc_cli_test::TempDir dir;
  const std::string model = dir.write("lm.nn", kDecoder);
  const std::string prompt = dir.write("p.npy", nnc_cli_test::npyIntegers({2, 3}, {1, 2, 3, 4, 5, 6}));
  auto run = [&](const std::vector<std::string> &extra) { return generate8(model, prompt, "5", extra); };
  const std::vector<std::vector<int>> all = idRows(run({}).out);
  ASSERT_EQ(all.size(), 2u);
  ASSERT_EQ(all[0].size(), 8u);
  // What a stop id does to the greedy rows: each ends at its first one, then repeats it;
  // the columns end with the last row to end (all 8 when a row never meets one).
  auto expected = [&](const std::vector<int> &stop) {
    std::vector<std::vector<int>> rows = all;
    size_t columns = 0;
    for (auto &row : rows) {
      size_t end = row.size();
      for (size_t i = 0; i < row.size(); ++i)
        if (std::find(stop.begin(), stop.end(), row[i]) != stop.end()) {
          end = i + 1;
          break;
        }
      std::fill(row.begin() + long(end), row.end(), row[end - 1]);
      columns = std::max(columns, end);
    }
    for (auto &row : rows) row.resize(columns);
    return rows;
  };
  const int early = all[0][2], other = all[1][1];
  for (const std::vector<int> &stop : std::vector<std::vector<int>>{{early}, {early, other}, {all[0][0], all[1][0]}}) {
    std::vector<std::string> args;
    for (int id : stop) args.insert(args.end(), {"--stop", std::to_string(id)});
    const std::string out = dir.write("out.npy", "");
    args.insert(args.end(), {"--output", out, "--format", "json"});
    auto r = run(args);
    const auto want = expected(stop);
    const nlohmann::json j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j.at("ids").get<std::vector<std::vector<int>>>(), want) << r.out;
    EXPECT_EQ(j.at("new_tokens").get<size_t>(), want[0].size());
    if (want[0].size() == 1) { // the one-position program was never compiled
      EXPECT_EQ(j.at("step_ready_ms").get<double>(), 0.0);
    }
    EXPECT_NE(r.err.find(fmt::format("wrote i32[2, {}] new ids", want[0].size())), std::string::npos) << r.err;
  }

  auto outside = runNnc({model, "--generate", "2", "--prompt", prompt, "--random-weights", "5", "--stop", "23"});
  EXPECT_EQ(outside.exitCode, 1);
  EXPECT_NE(outside.err.find("--stop 23 is outside the vocabulary [0, 23) of model 'lm'"), std::string::npos)
      << outside.err;
  auto negative = runNnc({model, "--generate", "2", "--prompt", prompt, "--random-weights", "5", "--stop", "-1"});
  EXPECT_EQ(negative.exitCode, 2) << negative.err;
  auto stray = runNnc({model, "--stop", "2"});
  EXPECT_EQ(stray.exitCode, 2);
  EXPECT_NE(stray.err.find("--seed and --stop go with --generate"), std::string::npos) << stray.err;
}

// Weights of NaN give logits of NaN, from which no id can be picked: exit 1 naming the
// row and the new token (greedy and sampled), not an id made up.
TEST(Generate, NaNLogitsAreAnError) {
  const std::string fixture = std::string(NNC_SOURCE_DIR) + "/tests/fixtures/hf_gpt2/";
  std::ifstream in(fixture + "model.safetensors", std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  uint64_t headerBytes = 0;
  std::memcpy(&headerBytes, bytes.data(), 8);
  const float nan = std::nanf("");
  for (size_t at = 8 + headerBytes; at + 4 <= bytes.size(); at += 4) std::memcpy(&bytes[at], &nan, 4); // all F32
  nnc_cli_test::TempDir dir;
  const std::string weights = dir.write("nan.safetensors", bytes);
  for (const std::vector<std::string> &sampling : {std::vector<std::string>{}, {"--temperature", "1"}}) {
    std::vector<std::string> args{fixture + "model.nn", "--generate", "3", "--prompt", fixture + "prompt.npy",
                                  "--weights", weights, "--weight-map",
                                  std::string(NNC_SOURCE_DIR) + "/examples/gpt2.weightmap", "--set", "seq=16"};
    args.insert(args.end(), sampling.begin(), sampling.end());
    auto r = runNnc(args);
    EXPECT_EQ(r.exitCode, 1) << r.describe();
    EXPECT_NE(r.err.find("the logits of batch row 0 for new token 0 hold NaN ("), std::string::npos) << r.err;
    EXPECT_EQ(r.out, "");
  }
}

TEST(Generate, ImpossibleRequestsAreRefusedWithTheNumbers) {
  nnc_cli_test::TempDir dir;
  const std::string model = dir.write("lm.nn", kDecoder);
  const std::string prompt = dir.write("p.npy", nnc_cli_test::npyIntegers({1, 4}, {1, 2, 3, 4}));
  auto tooLong = runNnc({model, "--generate", "9", "--prompt", prompt, "--random-weights", "1"});
  EXPECT_EQ(tooLong.exitCode, 1);
  EXPECT_NE(tooLong.err.find("a prompt of 4 tokens and 9 new ones need 13 positions, but model 'lm' has a context "
                             "of 12 (its seq; --set seq=13 makes it longer)"),
            std::string::npos)
      << tooLong.err;
  auto longer = runNnc({model, "--set", "seq=13", "--generate", "9", "--prompt", prompt, "--random-weights", "1"});
  EXPECT_EQ(longer.exitCode, 0) << longer.describe();
  // How the message says the context is set: a number (no parameter to set: not
  // "--set seq="), the parameter it is whatever its name, or an expression of a
  // parameter (which one to set, not to what).
  struct ContextCase {
    const char *header, *input, *clause, *set;
  };
  const ContextCase contexts[] = {
      {"model f", "i32[12]", "(its input's length, a number in the model)", nullptr},
      {"model n(ctx = 12)", "i32[ctx]", "(its ctx; --set ctx=13 makes it longer)", "ctx=13"},
      {"model s(n = 4)", "i32[3*n]", "(its input's length, written with n; a larger --set n=N makes it longer)", "n=5"},
  };
  for (const ContextCase &c : contexts) {
    const std::string path = dir.write("ctx.nn", std::string(c.header) + " {\n  input t: " + c.input +
                                                     "\n  e = embedding(23, 8)\n  a = attention(2)\n  head = dense(23)\n}\n");
    auto tooShort = runNnc({path, "--generate", "9", "--prompt", prompt, "--random-weights", "1"});
    EXPECT_EQ(tooShort.exitCode, 1) << c.input;
    EXPECT_NE(tooShort.err.find(std::string("has a context of 12 ") + c.clause), std::string::npos) << tooShort.err;
    if (c.set) {
      EXPECT_EQ(runNnc({path, "--set", c.set, "--generate", "9", "--prompt", prompt, "--random-weights", "1"}).exitCode,
                0)
          << c.input;
    }
  }
  // A pos_embedding table of 12 positions: no --set makes the context longer, so the
  // message names the table (it said "--set seq=13", which then failed on the table).
  const std::string table = dir.write("gpt.nn", "model g(seq = 12) {\n  input t: i32[seq]\n  e = embedding(23, 8)\n"
                                                "  pos = pos_embedding(12)\n  a = attention(2)\n  head = dense(23)\n}\n");
  auto tableShort = runNnc({table, "--generate", "9", "--prompt", prompt, "--random-weights", "1"});
  EXPECT_EQ(tableShort.exitCode, 1) << tableShort.describe();
  EXPECT_NE(tableShort.err.find("has a context of 12 (its pos_embedding 'pos' (line 4) holds 12 positions: a longer "
                                "context needs a larger table (max_len) and weights for it)"),
            std::string::npos)
      << tableShort.err;

  const std::string cube = dir.write("c.npy", nnc_cli_test::npyIntegers({1, 1, 2}, {1, 2}));
  auto shape = runNnc({model, "--generate", "2", "--prompt", cube, "--random-weights", "1"});
  EXPECT_EQ(shape.exitCode, 1);
  EXPECT_NE(shape.err.find("token ids of shape [length] or [batch, length], found [1, 1, 2]"), std::string::npos)
      << shape.err;

  const std::string mlp = dir.write("mlp.nn", "model m {\n  input x: [4]\n  dense(3)\n}\n");
  auto notLm = runNnc({mlp, "--generate", "2", "--prompt", prompt, "--random-weights", "1"});
  EXPECT_EQ(notLm.exitCode, 1);
  EXPECT_NE(notLm.err.find("--generate needs a language model"), std::string::npos) << notLm.err;

  const std::string bert = dir.write("b.nn", "model b(seq = 8) {\n  input t: i32[seq]\n  tok = embedding(23, 16)\n"
                                             "  enc = attention(2, causal=false)\n  head = dense(23)\n}\n");
  auto bidirectional = runNnc({bert, "--generate", "2", "--prompt", prompt, "--random-weights", "1"});
  EXPECT_EQ(bidirectional.exitCode, 1);
  EXPECT_NE(bidirectional.err.find("layer 'enc' (attention, line 4) attends to later positions (causal=false)"),
            std::string::npos)
      << bidirectional.err;

  // lrn and batchnorm over [seq, d] normalise across positions: refused naming the layer
  // (a batchnorm's [seq] weights differ between the prompt's and a step's program, which
  // was an internal error before the layer was looked at).
  for (const char *norm : {"batchnorm", "lrn(3)"}) {
    const std::string across = dir.write("n.nn", std::string("model n(seq = 8) {\n  input t: i32[seq]\n  tok = "
                                                             "embedding(23, 16)\n  bn = ") +
                                                     norm + "\n  a = attention(2)\n  head = dense(23)\n}\n");
    auto refused = runNnc({across, "--generate", "2", "--prompt", prompt, "--random-weights", "1"});
    EXPECT_EQ(refused.exitCode, 1) << refused.describe();
    EXPECT_NE(refused.err.find("layer 'bn' (" + std::string(norm).substr(0, 3)), std::string::npos) << refused.err;
    EXPECT_NE(refused.err.find("normalises across the sequence axis"), std::string::npos) << refused.err;
  }

  // --max-memory holds for --generate too (it was accepted and had no effect)
  auto tight = runNnc({model, "--generate", "2", "--prompt", prompt, "--random-weights", "1", "--max-memory", "1000"});
  EXPECT_EQ(tight.exitCode, 1);
  EXPECT_NE(tight.err.find("more than the limit given (1,000 bytes); nothing was allocated"), std::string::npos)
      << tight.err;
  // Greedy decoding draws nothing: sampling's options without a temperature did nothing,
  // also at their defaults (--seed 0 and --top-p 1 were taken in silence).
  for (const std::vector<std::string> &draw :
       {std::vector<std::string>{"--top-k", "3"}, {"--top-p", "0.5"}, {"--seed", "4"}, {"--temperature", "0", "--seed", "4"},
        {"--seed", "0"}, {"--top-p", "1"}, {"--temperature", "0", "--seed", "0"}}) {
    std::vector<std::string> args = {model, "--generate", "2", "--prompt", prompt, "--random-weights", "1"};
    args.insert(args.end(), draw.begin(), draw.end());
    auto greedyDraw = runNnc(args);
    EXPECT_EQ(greedyDraw.exitCode, 2) << greedyDraw.describe();
    EXPECT_NE(greedyDraw.err.find("--top-k, --top-p and --seed shape sampling, which --temperature T > 0 turns on"),
              std::string::npos)
        << greedyDraw.err;
  }
  // Sizes as NNC_WEIGHT_CACHE_MAX takes them (1G was refused).
  auto sized = runNnc({model, "--generate", "2", "--prompt", prompt, "--random-weights", "1", "--max-memory", "1K"});
  EXPECT_EQ(sized.exitCode, 1) << sized.describe();
  EXPECT_NE(sized.err.find("more than the limit given (1,024 bytes (1.00 KiB))"), std::string::npos) << sized.err;
  EXPECT_EQ(runNnc({model, "--generate", "2", "--prompt", prompt, "--random-weights", "1", "--max-memory", "1G"})
                .exitCode,
            0);
  auto hex = runNnc({model, "--generate", "2", "--prompt", prompt, "--random-weights", "1", "--temperature", "0x10"});
  EXPECT_EQ(hex.exitCode, 2) << hex.err;

  // A --batch the prompt contradicts is refused, as for --run; one that agrees is fine.
  auto batch = runNnc({model, "--generate", "2", "--prompt", prompt, "--random-weights", "1", "--batch", "3"});
  EXPECT_EQ(batch.exitCode, 1) << batch.describe();
  EXPECT_NE(batch.err.find("the prompt holds a batch of 1 (shape [1, 4]), but --batch 3 was given"), std::string::npos)
      << batch.err;
  EXPECT_EQ(runNnc({model, "--generate", "2", "--prompt", prompt, "--random-weights", "1", "--batch", "1"}).exitCode, 0);

  // Ids the embedding cannot take (head vocab 500, embedding 10) could be generated and
  // fed back: refused before any work (it failed at the first such id, by chance of the
  // weights and the seed, with the ids made so far thrown away).
  const std::string wide = dir.write("w.nn", "model w(seq = 16) {\n  input t: i32[seq]\n  tok = embedding(10, 16)\n"
                                             "  attn = attention(2)\n  head = dense(500)\n}\n");
  auto outside = runNnc({wide, "--generate", "5", "--prompt", dir.write("p5.npy", nnc_cli_test::npyIntegers({1, 5}, {1, 2, 3, 4, 5})),
                         "--random-weights", "1"});
  EXPECT_EQ(outside.exitCode, 1) << outside.describe();
  EXPECT_NE(outside.err.find("--generate feeds each new id back in, but model 'w' gives logits over 500 ids and its "
                             "embedding 'tok' (line 3) takes ids in [0, 10): ids 10 to 499 could not be fed back"),
            std::string::npos)
      << outside.err;
  EXPECT_EQ(outside.out, ""); // before any work


  auto noPrompt = runNnc({model, "--generate", "2", "--random-weights", "1"});
  EXPECT_EQ(noPrompt.exitCode, 2);
  auto stray = runNnc({model, "--temperature", "1"});
  EXPECT_EQ(stray.exitCode, 2);
}

} // namespace
