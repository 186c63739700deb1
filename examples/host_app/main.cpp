// A host application embedding nnc: compile a model once, load its weights, run it
// from 8 threads at once, and check every output equals a serial run of the same input.
//   host_app MODEL.nn WEIGHTS.safetensors [BATCH]
#include <nnc/nnc.h>

#include <cstdio>
#include <cstdlib>
#include <random>
#include <thread>
#include <vector>

int main(int argc, char **argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: host_app MODEL.nn WEIGHTS.safetensors [BATCH]\n");
    return 2;
  }
  try {
    nnc::Options opts;
    opts.batch = argc > 3 ? std::atoll(argv[3]) : 4;
    nnc::Model model = nnc::Model::fromFile(argv[1], opts);
    model.loadWeights(argv[2]);

    const int kThreads = 8, kCallsPerThread = 25;
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> u(0, 16);
    std::vector<std::vector<float>> inputs(kThreads), serial(kThreads);
    for (int t = 0; t < kThreads; ++t) {
      inputs[t].resize(size_t(model.inputElements()));
      for (float &v : inputs[t]) v = u(rng);
      serial[t].resize(size_t(model.outputElements()));
      model.run(inputs[t].data(), serial[t].data());
    }
    std::vector<int> wrong(kThreads, 0);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
      threads.emplace_back([&, t] {
        std::vector<float> out(size_t(model.outputElements()));
        for (int i = 0; i < kCallsPerThread; ++i) {
          model.run(inputs[t].data(), out.data());
          wrong[t] += out != serial[t];
        }
      });
    for (auto &th : threads) th.join();
    int mismatches = 0;
    for (int w : wrong) mismatches += w;
    nnc::Report r = model.report();
    std::printf("model %s, batch %lld: %lld parameters, %lld MACs; %d threads × %d calls, %d outputs differ from "
                "the serial run\n",
                r.model.c_str(), (long long)r.batch, (long long)r.params, (long long)r.macs, kThreads,
                kCallsPerThread, mismatches);
    return mismatches == 0 ? 0 : 1;
  } catch (const nnc::Error &e) {
    std::fprintf(stderr, "host_app: %s\n", e.what());
    for (const auto &d : e.diagnostics())
      std::fprintf(stderr, "  %s:%d:%d: %s\n", d.file.c_str(), d.line, d.column, d.message.c_str());
    return 1;
  }
}
