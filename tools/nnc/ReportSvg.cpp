// `--svg FILE`: where the weights and the work sit, as a picture. One row per layer
// that owns parameters or does MACs; two bars per row, each the layer's share of the
// model's parameters and of its MACs (the numbers from the analyses, written beside).
#include <fmt/format.h>

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
} // namespace

std::string renderSvg(const AnalyzedModel &m) {
  const auto &g = m.graph;
  const auto &t = m.analysis.totals;
  struct Row { std::string label; int64_t params, macs; };
  std::vector<Row> rows;
  for (size_t i = 1; i < g.ops.size(); ++i) {
    const auto &c = m.analysis.ops[i];
    if (!g.ops[i].isLayer || (!c.params && !c.macs)) continue;
    rows.push_back({fmt::format("{} ({})", g.ops[i].name, ir::opKindName(g.ops[i].kind)), c.params, c.macs});
  }
  const int labelW = 260, barW = 300, rowH = 22, top = 56;
  const int width = labelW + 2 * (barW + 150) + 20, height = top + rowH * int(rows.size()) + 20;
  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" font-family=\"sans-serif\" "
      "font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
      width, height);
  s += fmt::format("<text x=\"10\" y=\"20\" font-size=\"15\" font-weight=\"bold\">{}: {} parameters, {} MACs "
                   "(batch {})</text>\n",
                   escapeXml(g.modelName), withCommas(t.params), withCommas(t.macs), g.batch);
  s += fmt::format("<text x=\"{}\" y=\"44\">share of parameters</text>\n", labelW);
  s += fmt::format("<text x=\"{}\" y=\"44\">share of MACs</text>\n", labelW + barW + 150);
  for (size_t r = 0; r < rows.size(); ++r) {
    int y = top + int(r) * rowH;
    double ps = t.params ? double(rows[r].params) / double(t.params) : 0;
    double ms = t.macs ? double(rows[r].macs) / double(t.macs) : 0;
    s += fmt::format("<text x=\"10\" y=\"{}\">{}</text>\n", y + 14, escapeXml(rows[r].label));
    s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{:.1f}\" height=\"16\" fill=\"#4477aa\"/>\n", labelW, y + 2,
                     ps * barW);
    s += fmt::format("<text x=\"{:.1f}\" y=\"{}\">{} ({:.1f} %)</text>\n", labelW + ps * barW + 4, y + 14,
                     withCommas(rows[r].params), 100 * ps);
    int x2 = labelW + barW + 150;
    s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{:.1f}\" height=\"16\" fill=\"#cc6677\"/>\n", x2, y + 2,
                     ms * barW);
    s += fmt::format("<text x=\"{:.1f}\" y=\"{}\">{} ({:.1f} %)</text>\n", x2 + ms * barW + 4, y + 14,
                     withCommas(rows[r].macs), 100 * ms);
  }
  return s + "</svg>\n";
}

} // namespace nnc::cli
