// Renders what the analysis passes computed (it computes nothing itself): the text
// report in the style of torchinfo, the Markdown table, the stable JSON of docs/cli.md,
// the --explain derivations and the --sweep table.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "compiler/driver/Driver.h"

namespace nnc::cli {

using driver::AnalyzedModel;

// expand: every layer; otherwise runs of identical repeated blocks show as one block
// (per-block and total figures), as torchinfo's depth does. JSON always lists every layer.
std::string renderText(const AnalyzedModel &m, bool expand = false);
std::string renderMarkdown(const AnalyzedModel &m, bool expand = false);
nlohmann::ordered_json renderJson(const AnalyzedModel &m);
std::string renderExplain(const AnalyzedModel &m);
// The host's roof for --svg's roofline, measured by the caller (runtime/PeakProbe.h,
// runtime/BandwidthProbe.h).
struct MachineRoof {
  double peakGflops = 0, bandwidthGBs = 0;
  int threads = 1;
  std::string isa;
};
std::string renderSvg(const AnalyzedModel &m, const MachineRoof &roof); // --svg FILE

struct SweepRow {
  int64_t value;
  AnalyzedModel model;
};
std::string renderSweep(const std::string &name, const std::vector<SweepRow> &rows, bool markdown);
nlohmann::ordered_json renderSweepJson(const std::string &name, const std::vector<SweepRow> &rows);

// Devices the report checks (pages 001 and 004): a microcontroller with 1 MB of flash
// for weights and 256 kB of SRAM for activations; cards of 8/16/24/48/80 GB.
struct Device {
  const char *name;
  int64_t weightBytes;     // capacity for weights
  int64_t activationBytes; // capacity for activations (0: shares weightBytes)
};
const std::vector<Device> &devices();

// Units, stated: "940,584 B (0.94 MB, 0.00 GiB)" with MB = 10^6 and GiB = 2^30.
std::string bytesWithUnits(int64_t bytes);

} // namespace nnc::cli
