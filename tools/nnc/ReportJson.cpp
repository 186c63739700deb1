// `--format json`: the stable keys of docs/cli.md ("model", "batch", "totals" {params,
// weights, macs, macs_per_example, flops, attention_macs, weight_bytes{f32,f16,bf16,
// i8,i4}, weight_bytes_stored}, "layers" [{name, op, output_shape, params, macs,
// dtype}]) — never renamed — plus further keys for memory, traffic and devices.
#include "Report.h"

namespace nnc::cli {
using nlohmann::ordered_json;

ordered_json renderJson(const AnalyzedModel &m) {
  const auto &g = m.graph;
  const auto &an = m.analysis;
  const auto &t = an.totals;
  ordered_json j;
  j["model"] = g.modelName;
  j["batch"] = g.batch;
  ordered_json totals;
  totals["params"] = t.params;
  totals["weights"] = t.weights;
  totals["macs"] = t.macs;
  totals["macs_per_example"] = t.macsPerExample;
  totals["flops"] = 2 * t.macs;
  totals["attention_macs"] = t.attentionMacs;
  ordered_json wb;
  for (DType dt : kWeightDTypes) wb[std::string(dtypeName(dt))] = t.weightBytes.at(dt);
  totals["weight_bytes"] = wb;
  totals["weight_bytes_stored"] = t.weightBytesStored;
  totals["biases"] = t.params - t.weights;
  totals["trainable_params"] = t.params;
  totals["buffers"] = t.buffers;
  totals["matrix_params"] = t.matrixParams;
  totals["other_ops"] = t.otherOps;
  j["totals"] = totals;

  ordered_json layers = ordered_json::array();
  for (size_t i = 1; i < g.ops.size(); ++i) {
    const ir::Op &op = g.ops[i];
    if (!op.isLayer) continue;
    const auto &c = an.ops[i];
    ordered_json l;
    l["name"] = op.name;
    l["op"] = ir::opKindName(op.kind);
    l["output_shape"] = op.type.shape;
    l["params"] = c.params;
    l["macs"] = c.macs;
    l["dtype"] = dtypeName(op.weightDType);
    l["weights"] = c.weights;
    l["macs_per_example"] = c.macsPerExample;
    l["attention_macs"] = c.attentionMacs;
    l["weight_bytes_stored"] = c.weightBytesStored;
    l["output_bytes"] = c.outputBytes;
    l["traffic_numbers"] = c.trafficNumbers;
    l["traffic_bytes"] = c.trafficBytes;
    l["macs_per_number"] = c.intensity;
    l["line"] = op.loc.begin.line;
    ordered_json tensors = ordered_json::array();
    for (const auto &p : op.params)
      tensors.push_back({{"name", p.name}, {"shape", p.shape},
                         {"role", p.role == ir::ParamTensor::Role::Bias ? "bias"
                                  : p.role == ir::ParamTensor::Role::Buffer ? "buffer" : "weight"}});
    l["tensors"] = tensors;
    layers.push_back(l);
  }
  j["layers"] = layers;

  const auto &mem = an.memory;
  ordered_json memory;
  memory["input_bytes"] = mem.inputBytes;
  memory["output_bytes"] = mem.outputBytes;
  memory["activation_bytes_all_layers"] = mem.activationBytesAll;
  memory["activation_peak_bytes"] = mem.activationPeakBytes;
  memory["runtime_arena_bytes"] = m.program.arenaBytes(); // as nnc runs it (--emit plan; --bench's arena_bytes)
  memory["attention_scores_at_peak_bytes"] = mem.scoresPeakBytes;
  ordered_json kv;
  kv["context"] = mem.kvCacheContext;
  kv["elements_per_token"] = mem.kvCacheElementsPerToken;
  kv["dtype"] = std::string(dtypeName(m.program.kvType)); // --kv-dtype: what --generate allocates
  for (DType dt : kKvCacheDTypes) {
    const int64_t perToken = mem.kvCacheBytesPerToken.count(dt) ? mem.kvCacheBytesPerToken.at(dt) : 0;
    kv["bytes_per_token"][std::string(dtypeName(dt))] = perToken;
    kv["bytes_at_context"][std::string(dtypeName(dt))] = mulChecked(perToken, mem.kvCacheContext, m.graph.batch);
  }
  memory["kv_cache"] = kv;
  memory["activation_training_bytes"] = mem.activationTrainingBytes;
  ordered_json training = ordered_json::array();
  for (const auto &tr : mem.training)
    training.push_back({{"optimizer", tr.optimizer}, {"weights_bytes", tr.weightsBytes},
                        {"gradient_bytes", tr.gradientBytes}, {"optimizer_bytes", tr.optimizerBytes},
                        {"activation_bytes", tr.activationBytes}, {"total_bytes", tr.totalBytes}});
  memory["training"] = training;
  j["memory"] = memory;
  j["traffic"] = {{"numbers", an.traffic.numbers}, {"weight_numbers", an.traffic.weightNumbers},
                  {"macs_per_number", an.traffic.intensity}};
  ordered_json fits = ordered_json::object();
  for (const auto &d : devices()) {
    ordered_json per = ordered_json::object();
    for (DType dt : kWeightDTypes)
      per[std::string(dtypeName(dt))] = t.weightBytes.at(dt) <= d.weightBytes &&
                                        (!d.activationBytes || mem.activationPeakBytes <= d.activationBytes);
    fits[d.name] = per;
  }
  j["devices"] = fits;
  ordered_json warnings = ordered_json::array();
  for (const auto &l : an.lints) warnings.push_back(l.message);
  j["warnings"] = warnings;
  return j;
}

ordered_json renderSweepJson(const std::string &name, const std::vector<SweepRow> &rows) {
  ordered_json out = ordered_json::array();
  for (const auto &r : rows) {
    ordered_json j = renderJson(r.model);
    j["sweep"] = {{"name", name}, {"value", r.value}};
    out.push_back(j);
  }
  return out;
}

} // namespace nnc::cli
