// `--svg FILE`: the report as pictures, one panel under the other.
//  1. Where the weights and the work sit: per layer that owns parameters or does MACs,
//     its share of the model's parameters and of its MACs (repeated blocks shown once).
//  2. Weight memory per dtype (pages 001, 003) on a log scale against the devices the
//     report checks: the microcontroller's 256 kB SRAM and 1 MB flash, 8–80 GB cards.
//  3. A roofline (page 001): attainable GFLOP/s = min(peak, bandwidth × intensity) on
//     log–log axes with this host's measured f32 FMA peak and read bandwidth, and each
//     layer placed at its arithmetic intensity at the batch (FLOPs per byte moved:
//     2 × MACs over weights at their stored dtype + inputs + outputs).
#include <fmt/format.h>

#include <cmath>
#include <map>

#include "Report.h"
#include "compiler/support/Diagnostics.h"

namespace nnc::cli {

namespace {
std::string escapeXml(const std::string &s) {
  std::string out;
  for (char c : s) {
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else if (c == '"') out += "&quot;";
    else out += c;
  }
  return out;
}

// "layers.3.attention" → "layers.*.attention": repeated blocks drawn once.
std::string blockName(const std::string &name) {
  std::string out, seg;
  auto flush = [&] {
    bool digits = !seg.empty() && seg.find_first_not_of("0123456789") == std::string::npos;
    out += (out.empty() ? "" : ".") + (digits && !out.empty() ? std::string("*") : seg);
    seg.clear();
  };
  for (char c : name) {
    if (c == '.') flush();
    else seg += c;
  }
  flush();
  return out;
}

std::string text(double x, double y, const std::string &s, const char *extra = "") {
  return fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" {}>{}</text>\n", x, y, extra, escapeXml(s));
}
std::string line(double x1, double y1, double x2, double y2, const char *style) {
  return fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" {}/>\n", x1, y1, x2, y2, style);
}

// Maps log10 of a value in [lo, hi] decades onto [a, b] pixels.
struct LogAxis {
  double lo, hi, a, b;
  double at(double v) const { return a + (std::log10(std::max(v, 1e-300)) - lo) / (hi - lo) * (b - a); }
};

constexpr int kWidth = 980;

// Panel 1: shares of parameters and MACs.
std::string sharesPanel(const AnalyzedModel &m, int top, int &height) {
  const auto &g = m.graph;
  const auto &t = m.analysis.totals;
  struct Row { std::string label; int64_t params, macs; int count; };
  std::vector<Row> rows;
  std::map<std::string, size_t> seen;
  for (size_t i = 1; i < g.ops.size(); ++i) {
    const auto &c = m.analysis.ops[i];
    if (!g.ops[i].isLayer || (!c.params && !c.macs)) continue;
    std::string label = fmt::format("{} ({})", blockName(g.ops[i].name), ir::opKindName(g.ops[i].kind));
    auto [it, fresh] = seen.emplace(label, rows.size());
    if (fresh) rows.push_back({label, 0, 0, 0});
    Row &r = rows[it->second];
    r.params += c.params, r.macs += c.macs, ++r.count;
  }
  const int labelW = 280, barW = 200, rowH = 20;
  std::string s = text(10, top + 16, "Where the weights and the work sit (share of all parameters / of all MACs; "
                                     "repeated blocks summed)", "font-size=\"14\" font-weight=\"bold\"");
  s += text(labelW, top + 38, "parameters") + text(labelW + barW + 170, top + 38, "MACs (batch)");
  const int y0 = top + 46;
  for (size_t r = 0; r < rows.size(); ++r) {
    const int y = y0 + int(r) * rowH;
    const double ps = t.params ? double(rows[r].params) / double(t.params) : 0;
    const double ms = t.macs ? double(rows[r].macs) / double(t.macs) : 0;
    std::string label = rows[r].label + (rows[r].count > 1 ? fmt::format(" ×{}", rows[r].count) : "");
    s += text(10, y + 13, label);
    s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{:.1f}\" height=\"14\" fill=\"#4477aa\"/>\n", labelW, y + 2,
                     ps * barW);
    s += text(labelW + ps * barW + 4, y + 13, fmt::format("{} ({:.1f} %)", withCommas(rows[r].params), 100 * ps));
    const int x2 = labelW + barW + 170;
    s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{:.1f}\" height=\"14\" fill=\"#cc6677\"/>\n", x2, y + 2,
                     ms * barW);
    s += text(x2 + ms * barW + 4, y + 13, fmt::format("{} ({:.1f} %)", withCommas(rows[r].macs), 100 * ms));
  }
  height = 46 + rowH * int(rows.size()) + 16;
  return s;
}

// Panel 2: weight bytes per dtype against the devices.
std::string memoryPanel(const AnalyzedModel &m, int top, int &height) {
  const auto &t = m.analysis.totals;
  const LogAxis x{3, 12, 330, kWidth - 30.0}; // 1 kB … 1 TB
  const int rowH = 24, y0 = top + 64;
  std::string s = text(10, top + 16, "Weight memory per dtype (bytes, log scale) against the devices",
                       "font-size=\"14\" font-weight=\"bold\"");
  const int plotH = rowH * int(std::size(kWeightDTypes));
  // Device lines; labels above the plot on two rows so that neighbours do not overlap
  // (the cards, 0.1–0.3 decades apart, share one label).
  struct Mark { double bytes; const char *label; int row; };
  for (const Mark &mk : {Mark{256e3, "MCU SRAM 256 kB", 0}, Mark{1e6, "MCU flash 1 MB", 1}, Mark{8e9, "", 0},
                         Mark{16e9, "", 0}, Mark{24e9, "", 0}, Mark{48e9, "", 0}, Mark{80e9, "", 0}}) {
    const double px = x.at(mk.bytes);
    s += line(px, y0 - 14 + 12 * mk.row, px, y0 + plotH, "stroke=\"#888\" stroke-dasharray=\"4 3\"");
    if (*mk.label) s += text(px, y0 - 18 + 12 * mk.row, mk.label, "font-size=\"10\" text-anchor=\"middle\"");
  }
  s += text(x.at(20e9), y0 - 18, "cards: 8, 16, 24, 48, 80 GB", "font-size=\"10\" text-anchor=\"middle\"");
  for (size_t i = 0; i < std::size(kWeightDTypes); ++i) {
    const DType dt = kWeightDTypes[i];
    const double bytes = double(t.weightBytes.at(dt));
    const int y = y0 + int(i) * rowH;
    const std::string human = bytes >= 1e9 ? fmt::format("{:.2f} GB", bytes / 1e9)
                              : bytes >= 1e6 ? fmt::format("{:.2f} MB", bytes / 1e6)
                                             : fmt::format("{:.1f} kB", bytes / 1e3);
    s += text(10, y + 15, fmt::format("{:<5} {} B ({})", dtypeName(dt), withCommas(int64_t(bytes)), human),
              "font-size=\"11\" font-family=\"monospace\"");
    s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{:.1f}\" height=\"16\" fill=\"#4477aa\" opacity=\"0.7\"/>\n",
                     x.a, y + 3, std::max(0.0, x.at(std::max(bytes, 1e3)) - x.a));
  }
  const char *units[] = {"1 kB", "1 MB", "1 GB", "1 TB"};
  for (int d = 3; d <= 12; d += 3)
    s += text(x.at(std::pow(10, d)), y0 + plotH + 14, units[(d - 3) / 3], "font-size=\"10\" text-anchor=\"middle\" fill=\"#555\"");
  height = 64 + plotH + 30;
  return s;
}

// Panel 3: the roofline with each layer on it.
std::string rooflinePanel(const AnalyzedModel &m, const MachineRoof &roof, int top, int &height) {
  const auto &g = m.graph;
  const LogAxis x{-2, 4, 90, kWidth - 260.0}; // FLOP per byte
  const double yLo = std::floor(std::log10(std::max(roof.bandwidthGBs * 0.01, 0.01))) - 0.0;
  const double yHi = std::ceil(std::log10(std::max(roof.peakGflops, 1.0)) + 0.3);
  const int plotH = 300, y0 = top + 40;
  const LogAxis y{yLo, yHi, double(y0 + plotH), double(y0)};
  std::string s = text(10, top + 16,
                       fmt::format("Roofline at batch {}: this host, {} thread{}: peak {:.0f} GFLOP/s ({} FMA), read "
                                   "bandwidth {:.1f} GB/s (10^9 B/s)",
                                   g.batch, roof.threads, roof.threads == 1 ? "" : "s", roof.peakGflops, roof.isa,
                                   roof.bandwidthGBs),
                       "font-size=\"14\" font-weight=\"bold\"");
  s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{:.1f}\" height=\"{}\" fill=\"none\" stroke=\"#333\"/>\n", x.a, y0,
                   x.b - x.a, plotH);
  for (int d = int(x.lo); d <= int(x.hi); ++d) {
    s += line(x.at(std::pow(10, d)), y0, x.at(std::pow(10, d)), y0 + plotH, "stroke=\"#ddd\"");
    s += text(x.at(std::pow(10, d)) - 10, y0 + plotH + 16, fmt::format("{:g}", std::pow(10, d)), "font-size=\"10\"");
  }
  for (int d = int(yLo); d <= int(yHi); ++d) {
    s += line(x.a, y.at(std::pow(10, d)), x.b, y.at(std::pow(10, d)), "stroke=\"#ddd\"");
    s += text(40, y.at(std::pow(10, d)) + 4, fmt::format("{:g}", std::pow(10, d)), "font-size=\"10\"");
  }
  s += text((x.a + x.b) / 2 - 150, y0 + plotH + 34, "arithmetic intensity (FLOP per byte moved, log scale)");
  s += fmt::format("<text x=\"16\" y=\"{}\" transform=\"rotate(-90 16 {})\">GFLOP/s (log scale)</text>\n",
                   y0 + plotH / 2 + 40, y0 + plotH / 2 + 40);
  // The roof: bandwidth × I up to the ridge, then the peak.
  const double ridge = roof.peakGflops / std::max(roof.bandwidthGBs, 1e-9);
  const double iLo = std::pow(10, x.lo);
  s += line(x.at(iLo), y.at(roof.bandwidthGBs * iLo), x.at(ridge), y.at(roof.peakGflops),
            "stroke=\"#cc3311\" stroke-width=\"2\"");
  s += line(x.at(ridge), y.at(roof.peakGflops), x.b, y.at(roof.peakGflops), "stroke=\"#cc3311\" stroke-width=\"2\"");
  s += text(x.at(ridge) + 6, y.at(roof.peakGflops) - 6, fmt::format("ridge at {:.1f} FLOP/B", ridge),
            "font-size=\"11\" fill=\"#cc3311\"");
  // The layers, once per block name, labelled in a column on the right (joined by a
  // thin line) so that labels never overlap.
  struct Point { std::string label; double intensity; };
  std::vector<Point> points;
  std::map<std::string, bool> seen;
  for (size_t i = 1; i < g.ops.size(); ++i) {
    const auto &c = m.analysis.ops[i];
    if (!g.ops[i].isLayer || !c.macs || !c.trafficBytes) continue;
    std::string label = fmt::format("{} ({})", blockName(g.ops[i].name), ir::opKindName(g.ops[i].kind));
    if (!seen.emplace(label, true).second) continue;
    points.push_back({label, 2.0 * double(c.macs) / double(c.trafficBytes)});
  }
  std::sort(points.begin(), points.end(), [](const Point &a, const Point &b) { return a.intensity > b.intensity; });
  const size_t shown = std::min<size_t>(points.size(), 16);
  for (size_t k = 0; k < shown; ++k) {
    const double I = std::clamp(points[k].intensity, iLo, std::pow(10, x.hi));
    const double px = x.at(I), py = y.at(std::min(roof.peakGflops, roof.bandwidthGBs * I));
    const double ly = y0 + 10 + double(k) * (plotH - 10) / double(std::max<size_t>(shown, 1));
    s += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"4\" fill=\"#4477aa\"/>\n", px, py);
    s += line(px, py, x.b + 8, ly - 4, "stroke=\"#4477aa\" stroke-width=\"0.5\"");
    s += text(x.b + 10, ly, fmt::format("{} {:.1f}", points[k].label, points[k].intensity), "font-size=\"10\"");
  }
  if (points.size() > shown)
    s += text(x.b + 10, y0 + plotH + 12, fmt::format("(+{} more layers)", points.size() - shown), "font-size=\"10\"");
  height = 40 + plotH + 50;
  return s;
}
} // namespace

std::string renderSvg(const AnalyzedModel &m, const MachineRoof &roof) {
  const auto &t = m.analysis.totals;
  std::string body = text(10, 22,
                          fmt::format("{}: {} parameters, {} MACs (batch {})", m.graph.modelName, withCommas(t.params),
                                      withCommas(t.macs), m.graph.batch),
                          "font-size=\"16\" font-weight=\"bold\"");
  int y = 36, h = 0;
  body += sharesPanel(m, y, h);
  y += h;
  body += memoryPanel(m, y, h);
  y += h;
  body += rooflinePanel(m, roof, y, h);
  y += h;
  return fmt::format("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" font-family=\"sans-serif\" "
                     "font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
                     kWidth, y) +
         body + "</svg>\n";
}

} // namespace nnc::cli
