// Step times summed per layer kind and kernel family, and per layer (StepProfile.h).
#include "StepProfile.h"

#include <fmt/format.h>

#include <algorithm>

#include "compiler/codegen/KernelSpec.h"

namespace nnc::cli {

StepProfile summarizeSteps(const lower::KernelProgram &program, const std::vector<double> &stepMicros,
                           const std::function<int64_t(const std::string &layer)> &layerMacs) {
  const auto &steps = program.steps;
  StepProfile p;
  double total = 0;
  for (size_t s = 0; s < steps.size() && s < stepMicros.size(); ++s) {
    const double us = stepMicros[s];
    auto layer = std::find_if(p.layers.begin(), p.layers.end(),
                              [&](const LayerTime &l) { return l.layer == steps[s].layer; });
    if (layer == p.layers.end()) layer = p.layers.insert(p.layers.end(), LayerTime{steps[s].layer, steps[s].opKind});
    layer->micros += us;
    const std::string key = codegen::kernelKey(*steps[s].kernel);
    const std::string family = key.substr(0, key.find('_')); // gemm, attn, rope, norm, ew, …
    auto row = std::find_if(p.kinds.begin(), p.kinds.end(), [&](const ProfileRow &r) {
      return r.layerKind == steps[s].opKind && r.kernel == family;
    });
    if (row == p.kinds.end()) row = p.kinds.insert(p.kinds.end(), ProfileRow{steps[s].opKind, family});
    row->steps += 1;
    row->micros += us;
    total += us;
  }
  for (ProfileRow &r : p.kinds) r.share = total > 0 ? r.micros / total : 0;
  std::sort(p.kinds.begin(), p.kinds.end(), [](const ProfileRow &a, const ProfileRow &b) { return a.micros > b.micros; });
  if (layerMacs)
    for (LayerTime &l : p.layers)
      if (const int64_t macs = layerMacs(l.layer); macs > 0 && l.micros > 0)
        l.gflops = 2.0 * double(macs) / (l.micros * 1e3);
  std::sort(p.layers.begin(), p.layers.end(), [](const LayerTime &a, const LayerTime &b) { return a.micros > b.micros; });
  return p;
}

void printProfile(const StepProfile &profile, const std::string &heading, bool rates,
                  const std::function<void(const std::string &)> &print) {
  print(heading + "\n");
  for (const ProfileRow &r : profile.kinds)
    print(fmt::format("  {:<16} {:<12} {:>4} step{} {:>12.1f} us  {:>5.1f}%\n", r.layerKind, r.kernel, r.steps,
                      r.steps == 1 ? " " : "s", r.micros, 100 * r.share));
  print(rates ? "slowest layers (their steps summed; GFLOP/s of the layer's MACs):\n"
              : "slowest layers (their steps summed):\n");
  for (size_t i = 0; i < std::min(kSlowestLayers, profile.layers.size()); ++i) {
    const LayerTime &l = profile.layers[i];
    print(rates ? fmt::format("  {:<28} {:<16} {:>12.1f} us  {:>7.1f} GFLOP/s\n", l.layer, l.kind, l.micros, l.gflops)
                : fmt::format("  {:<28} {:<16} {:>12.1f} us\n", l.layer, l.kind, l.micros));
  }
}

nlohmann::ordered_json kindsJson(const StepProfile &profile) {
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const ProfileRow &r : profile.kinds)
    rows.push_back({{"layer_kind", r.layerKind}, {"kernel", r.kernel}, {"steps", r.steps}, {"us_per_run", r.micros},
                    {"share", r.share}});
  return rows;
}

nlohmann::ordered_json layersJson(const StepProfile &profile, bool rates, size_t most) {
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (size_t i = 0; i < std::min(most, profile.layers.size()); ++i) {
    const LayerTime &l = profile.layers[i];
    nlohmann::ordered_json row{{"layer", l.layer}, {"layer_kind", l.kind}, {"us_per_run", l.micros}};
    if (rates) row["gflops"] = l.gflops;
    rows.push_back(row);
  }
  return rows;
}

} // namespace nnc::cli
