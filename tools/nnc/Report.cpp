// Text and Markdown reports. Numbers come from passes::ModelAnalysis; this file only
// lays them out, with units stated (B, MB = 10^6 B, GB = 10^9 B, GiB = 2^30 B).
#include "Report.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "compiler/support/Diagnostics.h"

namespace nnc::cli {
using passes::OpCosts;

const std::vector<Device> &devices() {
  static const std::vector<Device> d = {
      {"microcontroller (1 MB flash, 256 kB SRAM)", 1'000'000, 256'000},
      {"8 GB card", 8'000'000'000, 0},
      {"16 GB card", 16'000'000'000, 0},
      {"24 GB card", 24'000'000'000, 0},
      {"48 GB card", 48'000'000'000, 0},
      {"80 GB card", 80'000'000'000, 0},
  };
  return d;
}

std::string bytesWithUnits(int64_t bytes) {
  return fmt::format("{} B ({:.2f} MB, {:.2f} GiB)", withCommas(bytes), double(bytes) / 1e6,
                     double(bytes) / double(1LL << 30));
}

namespace {

std::string shapeStr(const std::vector<int64_t> &s) { return fmt::format("[{}]", fmt::join(s, ", ")); }

double pct(int64_t part, int64_t whole) { return whole ? 100.0 * double(part) / double(whole) : 0.0; }

// Sequence models (token or [seq, d] inputs) also get per-token figures.
int64_t tokensPerExample(const ir::Graph &g) {
  const auto &in = g.ops[0].type;
  if (in.dtype == DType::I32 && in.shape.size() == 2) return in.shape[1];
  return 0;
}

struct Row {
  std::string name, op, shape, params, share, macs, bytes;
};

// One layer's figures, before they are laid out.
struct LayerFigures {
  std::string name, op, shape, dtype;
  int64_t params = 0, macs = 0, attentionMacs = 0, bytes = 0;
  bool sameWork(const LayerFigures &o, const std::string &rest, const std::string &otherRest) const {
    return rest == otherRest && op == o.op && shape == o.shape && dtype == o.dtype && params == o.params &&
           macs == o.macs && attentionMacs == o.attentionMacs && bytes == o.bytes;
  }
};

std::vector<LayerFigures> layerFigures(const AnalyzedModel &m) {
  std::vector<LayerFigures> out;
  const auto &g = m.graph;
  for (size_t i = 1; i < g.ops.size(); ++i) {
    const ir::Op &op = g.ops[i];
    if (!op.isLayer) continue;
    const OpCosts &c = m.analysis.ops[i];
    out.push_back({op.name, ir::opKindName(op.kind), shapeStr(op.type.shape), std::string(dtypeName(op.weightDType)),
                   c.params, c.macs, c.attentionMacs, c.weightBytesStored});
  }
  return out;
}

// The Total row's share: blank, as a layer's, when there are no parameters to share.
std::string totalShare(int64_t params) { return params ? "100.00 %" : ""; }

Row rowOf(const LayerFigures &f, const std::string &name, int64_t totalParams, int64_t times = 1) {
  Row r{name, f.op, f.shape, withCommas(f.params * times),
        f.params ? fmt::format("{:.2f} %", pct(f.params * times, totalParams)) : "", withCommas(f.macs * times),
        f.params ? fmt::format("{} {}", withCommas(f.bytes * times), f.dtype) : ""};
  if (f.attentionMacs) r.macs += fmt::format(" (+{} scores)", withCommas(f.attentionMacs * times));
  return r;
}

// "layers.3.attention" → {"layers", 3, "attention"} at the first numeric path segment.
struct Indexed {
  std::string prefix;
  int64_t index = -1;
  std::string rest;
};
Indexed splitIndex(const std::string &name) {
  size_t start = 0;
  while (start < name.size()) {
    size_t end = name.find('.', start);
    if (end == std::string::npos) end = name.size();
    const std::string seg = name.substr(start, end - start);
    if (start > 0 && !seg.empty() && seg.size() < 10 && seg.find_first_not_of("0123456789") == std::string::npos)
      return {name.substr(0, start - 1), std::stoll(seg), end < name.size() ? name.substr(end + 1) : ""};
    start = end + 1;
  }
  return {};
}

// Runs of identical repeated blocks among named entries: P.0.*, P.1.*, … whose
// entries have the same rest of the name and the same key (their figures). A group of
// count 1 is one entry shown as it is. With `expand`, every entry is its own group.
struct Group {
  size_t first, len, count;
};
std::vector<Group> repeatGroups(const std::vector<std::string> &names, const std::vector<std::string> &keys,
                                bool expand) {
  std::vector<Group> out;
  for (size_t i = 0; i < names.size();) {
    const Indexed head = splitIndex(names[i]);
    size_t len = 0;
    while (!expand && head.index == 0 && i + len < names.size()) {
      Indexed x = splitIndex(names[i + len]);
      if (x.prefix != head.prefix || x.index != 0) break;
      ++len;
    }
    size_t count = len ? 1 : 0;
    while (len && i + (count + 1) * len <= names.size()) { // does block `count` repeat block 0?
      bool same = true;
      for (size_t k = 0; k < len && same; ++k) {
        Indexed a = splitIndex(names[i + k]), b = splitIndex(names[i + count * len + k]);
        same = b.prefix == head.prefix && b.index == int64_t(count) && a.rest == b.rest &&
               keys[i + k] == keys[i + count * len + k];
      }
      if (!same) break;
      ++count;
    }
    if (count < 2) count = 1, len = 1;
    out.push_back({i, len, count});
    i += len * count;
  }
  return out;
}

// "P.0–31 (×32)" for a group, "  P.*.rest" for an entry of its block.
std::string groupName(const std::string &first, size_t count) {
  return fmt::format("{}.0–{} (×{})", splitIndex(first).prefix, count - 1, count);
}
std::string blockEntryName(const std::string &name) {
  Indexed x = splitIndex(name);
  return "  " + x.prefix + ".*." + x.rest;
}

// The layer table's rows. Unless `expand`, a run of identical repeated blocks shows as
// one block, as torchinfo's depth does: "P.0–31 (×32), per block" with the figures of
// one block, its layers, and the total of all blocks.
std::vector<Row> layerRows(const AnalyzedModel &m, bool expand) {
  const std::vector<LayerFigures> figs = layerFigures(m);
  const int64_t total = m.analysis.totals.params;
  std::vector<std::string> names, keys;
  for (const auto &f : figs) {
    names.push_back(f.name);
    keys.push_back(fmt::format("{}|{}|{}|{}|{}|{}|{}", f.op, f.shape, f.dtype, f.params, f.macs, f.attentionMacs,
                               f.bytes));
  }
  std::vector<Row> rows;
  for (const Group &gr : repeatGroups(names, keys, expand)) {
    if (gr.count == 1) {
      rows.push_back(rowOf(figs[gr.first], figs[gr.first].name, total));
      continue;
    }
    LayerFigures block{"", "block", figs[gr.first + gr.len - 1].shape, figs[gr.first].dtype};
    for (size_t k = gr.first; k < gr.first + gr.len; ++k) {
      block.params += figs[k].params, block.macs += figs[k].macs;
      block.attentionMacs += figs[k].attentionMacs, block.bytes += figs[k].bytes;
    }
    rows.push_back(rowOf(block, groupName(names[gr.first], gr.count) + ", per block", total));
    for (size_t k = gr.first; k < gr.first + gr.len; ++k) rows.push_back(rowOf(figs[k], blockEntryName(names[k]), total));
    rows.push_back(rowOf(block, fmt::format("  all {} blocks", gr.count), total, int64_t(gr.count)));
  }
  return rows;
}

} // namespace

std::string renderText(const AnalyzedModel &m, bool expand) {
  const auto &g = m.graph;
  const auto &an = m.analysis;
  const auto &t = an.totals;
  std::string s;
  s += fmt::format("model {}: batch {}, input {} {}\n\n", g.modelName, g.batch, g.ops[0].name, g.ops[0].type.str());

  // ---- per-layer table ----
  std::vector<Row> rows = layerRows(m, expand);
  Row head{"Layer", "Op", "Output shape", "Params", "Share", "MACs (batch)", "Weight bytes"};
  size_t w[7] = {0};
  auto widen = [&](const Row &r) {
    const std::string *f[7] = {&r.name, &r.op, &r.shape, &r.params, &r.share, &r.macs, &r.bytes};
    for (int i = 0; i < 7; ++i) w[i] = std::max(w[i], f[i]->size());
  };
  widen(head);
  for (const auto &r : rows) widen(r);
  Row total{"Total", "", "", withCommas(t.params), totalShare(t.params), withCommas(t.macs), withCommas(t.weightBytesStored)};
  widen(total);
  auto line = [&](const Row &r) {
    return fmt::format("{:<{}}  {:<{}}  {:<{}}  {:>{}}  {:>{}}  {:>{}}  {:>{}}\n", r.name, w[0], r.op, w[1], r.shape,
                       w[2], r.params, w[3], r.share, w[4], r.macs, w[5], r.bytes, w[6]);
  };
  s += line(head);
  size_t width = 12;
  for (size_t x : w) width += x;
  s += std::string(width, '-') + "\n";
  for (const auto &r : rows) s += line(r);
  s += std::string(width, '-') + "\n";
  s += line(total) + "\n";

  // ---- totals ----
  s += fmt::format("Parameters     {} (weights {} + biases {}); trainable {}{}\n", withCommas(t.params),
                   withCommas(t.weights), withCommas(t.params - t.weights), withCommas(t.params),
                   t.buffers ? fmt::format("; plus {} buffer values (running statistics)", withCommas(t.buffers)) : "");
  s += fmt::format("MACs           {} per example; {} for the batch of {}; FLOPs {} (2 × MACs)\n",
                   withCommas(t.macsPerExample), withCommas(t.macs), g.batch, withCommas(2 * t.macs));
  if (int64_t tokens = tokensPerExample(g))
    s += fmt::format("               {} per token ({} tokens per example)\n",
                     t.macsPerExample % tokens == 0 ? withCommas(t.macsPerExample / tokens)
                                                    : withCommas1(double(t.macsPerExample) / double(tokens)),
                     withCommas(tokens));
  if (t.attentionMacs)
    s += fmt::format("Attention      {} MACs for scores (QKᵀ and AV) for the batch, not in MACs above\n",
                     withCommas(t.attentionMacs));
  s += fmt::format("Other ops      {} elementwise operations (bias adds, activations, norms, residual adds); "
                   "matrix MACs are {:.2f} % of all operations\n",
                   withCommas(t.otherOps), pct(t.macs, t.macs + t.otherOps));

  s += "\nWeight memory (MB = 10^6 B, GiB = 2^30 B)\n";
  for (DType dt : kWeightDTypes)
    s += fmt::format("  {:<6} {}\n", dtypeName(dt), bytesWithUnits(t.weightBytes.at(dt)));
  s += fmt::format("  {:<6} {}  (as this model's dtypes store them)\n", "stored", bytesWithUnits(t.weightBytesStored));

  const auto &mem = an.memory;
  s += fmt::format("\nActivations at batch {} (f32, token ids i32)\n", g.batch);
  s += fmt::format("  input {} B; output {} B; all layer outputs {}\n", withCommas(mem.inputBytes),
                   withCommas(mem.outputBytes), bytesWithUnits(mem.activationBytesAll));
  s += fmt::format("  inference peak {} (as written: every layer writes a buffer, freed after its last reader{})\n",
                   bytesWithUnits(mem.activationPeakBytes),
                   mem.scoresPeakBytes ? fmt::format("; {} B of it attention scores, heads × seq × seq, "
                                                     "as eager attention materialises them",
                                                     withCommas(mem.scoresPeakBytes))
                                       : "");
  s += fmt::format("  as nnc runs it {} (the one arena --run allocates, after folds and fused epilogues; "
                   "--emit plan){}\n",
                   bytesWithUnits(m.program.arenaBytes()),
                   m.program.firstNotRunnable() ? "; planned, though some layers cannot run yet" : "");
  if (mem.kvCacheElementsPerToken) {
    s += fmt::format("  KV cache (keys and values of every attention layer, one sequence) per token:");
    for (DType dt : kKvCacheDTypes)
      s += fmt::format(" {} B {}{}", withCommas(mem.kvCacheBytesPerToken.at(dt)), dtypeName(dt),
                       dt == DType::I8 ? "" : ",");
    auto atContext = [&](DType dt) { return mulChecked(mem.kvCacheBytesPerToken.at(dt), mem.kvCacheContext, g.batch); };
    // Only a model --generate runs allocates one: a language model whose attention is causal.
    const bool decodes = driver::isLanguageModel(m.program) &&
                         std::none_of(g.ops.begin(), g.ops.end(), [](const ir::Op &op) {
                           return op.kind == ir::OpKind::Attention && !op.attrs.causal;
                         });
    s += fmt::format("\n    at seq {} × batch {}: {} f32, {} f16/bf16, {} i8 (scales included){}\n",
                     withCommas(mem.kvCacheContext), g.batch, bytesWithUnits(atContext(DType::F32)),
                     bytesWithUnits(atContext(DType::F16)), bytesWithUnits(atContext(DType::I8)),
                     decodes ? fmt::format("; --generate allocates the {} one (--kv-dtype)", dtypeName(m.program.kvType))
                             : std::string("; --generate does not run this model (it needs token ids in, logits "
                                           "out and causal attention)"));
  }

  s += fmt::format("\nTraining estimate at batch {} (assumes f32 weights, gradients and optimizer state, and that "
                   "the input and every layer output are kept for the backward pass)\n",
                   g.batch);
  for (const auto &tr : mem.training)
    s += fmt::format("  {:<18} weights {} + gradients {} + optimizer {} + activations {} = {}\n", tr.optimizer,
                     withCommas(tr.weightsBytes), withCommas(tr.gradientBytes), withCommas(tr.optimizerBytes),
                     withCommas(tr.activationBytes), bytesWithUnits(tr.totalBytes));

  s += fmt::format("\nTraffic at batch {} (numbers moved: weights once, biases not counted, + inputs + outputs)\n",
                   g.batch);
  std::vector<std::array<std::string, 5>> trows;
  trows.push_back({"Layer", "Numbers moved", "Per example", "MACs per number", "Weights share"});
  std::vector<size_t> shown;
  std::vector<std::string> names, keys;
  for (size_t i = 1; i < g.ops.size(); ++i) {
    const OpCosts &c = an.ops[i];
    if (!g.ops[i].isLayer || (!c.macs && !c.weights)) continue;
    shown.push_back(i);
    names.push_back(g.ops[i].name);
    keys.push_back(fmt::format("{}|{}", c.trafficNumbers, c.intensity));
  }
  auto trafficRow = [&](size_t i, std::string name) -> std::array<std::string, 5> {
    const OpCosts &c = an.ops[i];
    return {std::move(name), withCommas(c.trafficNumbers), withCommas(c.trafficNumbers / g.batch),
            withCommas1(c.intensity), fmt::format("{:.1f} %", 100 * c.weightShareOfTraffic)};
  };
  for (const Group &gr : repeatGroups(names, keys, expand)) {
    if (gr.count == 1) {
      trows.push_back(trafficRow(shown[gr.first], names[gr.first]));
      continue;
    }
    trows.push_back({groupName(names[gr.first], gr.count) + ", each block", "", "", "", ""});
    for (size_t k = gr.first; k < gr.first + gr.len; ++k) trows.push_back(trafficRow(shown[k], blockEntryName(names[k])));
  }
  trows.push_back({"Total", withCommas(an.traffic.numbers), withCommas(an.traffic.numbers / g.batch),
                   withCommas1(an.traffic.intensity),
                   fmt::format("{:.1f} %", pct(an.traffic.weightNumbers, an.traffic.numbers))});
  size_t tw[5] = {0};
  for (const auto &r : trows)
    for (int i = 0; i < 5; ++i) tw[i] = std::max(tw[i], r[i].size());
  for (const auto &r : trows)
    s += fmt::format("  {:<{}}  {:>{}}  {:>{}}  {:>{}}  {:>{}}\n", r[0], tw[0], r[1], tw[1], r[2], tw[2], r[3], tw[3],
                     r[4], tw[4]);

  s += "\nWhere it fits (weights only; the microcontroller also needs the activation peak in SRAM)\n";
  std::string hdr = fmt::format("  {:<8}", "dtype");
  for (const auto &d : devices()) hdr += fmt::format("  {:>11}", d.activationBytes ? "MCU" : std::string(d.name).substr(0, std::string(d.name).find(" card")));
  s += hdr + "\n";
  for (DType dt : kWeightDTypes) {
    std::string r = fmt::format("  {:<8}", dtypeName(dt));
    for (const auto &d : devices()) {
      bool fits = t.weightBytes.at(dt) <= d.weightBytes &&
                  (!d.activationBytes || mem.activationPeakBytes <= d.activationBytes);
      r += fmt::format("  {:>11}", fits ? "fits" : "-");
    }
    s += r + "\n";
  }
  s += fmt::format("  (MCU: 1,000,000 B flash for weights, 256,000 B SRAM for activations; activation peak {} B)\n",
                   withCommas(mem.activationPeakBytes));
  if (!an.lints.empty()) {
    s += "\nWarnings\n";
    for (const auto &l : an.lints) s += "  " + l.message + "\n";
  }
  return s;
}

std::string renderMarkdown(const AnalyzedModel &m, bool expand) {
  const auto &t = m.analysis.totals;
  std::string s = fmt::format("### model `{}` (batch {})\n\n", m.graph.modelName, m.graph.batch);
  s += "| Layer | Op | Output shape | Params | Share | MACs | Weight bytes |\n";
  s += "|---|---|---|---:|---:|---:|---:|\n";
  for (const auto &r : layerRows(m, expand))
    s += fmt::format("| `{}` | {} | {} | {} | {} | {} | {} |\n", r.name, r.op, r.shape, r.params, r.share, r.macs,
                     r.bytes);
  s += fmt::format("| **Total** | | | **{}** | {} | **{}** | **{}** |\n\n", withCommas(t.params), totalShare(t.params),
                   withCommas(t.macs), withCommas(t.weightBytesStored));
  s += "| dtype | weight bytes | MB (10^6 B) | GiB (2^30 B) |\n|---|---:|---:|---:|\n";
  for (DType dt : kWeightDTypes)
    s += fmt::format("| {} | {} | {:.2f} | {:.2f} |\n", dtypeName(dt), withCommas(t.weightBytes.at(dt)),
                     double(t.weightBytes.at(dt)) / 1e6, double(t.weightBytes.at(dt)) / double(1LL << 30));
  s += fmt::format("\nMACs per example {}, FLOPs for the batch {}, inference activation peak {} B.\n",
                   withCommas(t.macsPerExample), withCommas(2 * t.macs),
                   withCommas(m.analysis.memory.activationPeakBytes));
  return s;
}

std::string renderSweep(const std::string &name, const std::vector<SweepRow> &rows, bool markdown) {
  std::vector<std::array<std::string, 6>> cells;
  cells.push_back({name, "params", "MACs per example", "FLOPs (batch)", "f32 weights (B)", "activation peak (B)"});
  for (const auto &r : rows) {
    const auto &t = r.model.analysis.totals;
    cells.push_back({std::to_string(r.value), withCommas(t.params), withCommas(t.macsPerExample),
                     withCommas(2 * t.macs), withCommas(t.weightBytes.at(DType::F32)),
                     withCommas(r.model.analysis.memory.activationPeakBytes)});
  }
  std::string s;
  if (markdown) {
    for (size_t i = 0; i < cells.size(); ++i) {
      s += fmt::format("| {} |\n", fmt::join(cells[i], " | "));
      if (i == 0) s += "|---:|---:|---:|---:|---:|---:|\n";
    }
    return s;
  }
  size_t w[6] = {0};
  for (const auto &c : cells)
    for (int i = 0; i < 6; ++i) w[i] = std::max(w[i], c[i].size());
  for (const auto &c : cells)
    s += fmt::format("{:>{}}  {:>{}}  {:>{}}  {:>{}}  {:>{}}  {:>{}}\n", c[0], w[0], c[1], w[1], c[2], w[2], c[3], w[3],
                     c[4], w[4], c[5], w[5]);
  return s;
}

} // namespace nnc::cli
