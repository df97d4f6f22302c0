#include "svg_chart.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>

#include "core/error.h"

namespace tandem::cli {

void write_svg_chart(const std::string& path, const std::string& title, const std::string& x_label,
                     const std::vector<double>& x, const std::vector<ChartSeries>& series) {
  const double W = 640, H = 400, left = 60, right = 60, top = 40, bottom = 50;
  const double pw = W - left - right, ph = H - top - bottom;
  check(!x.empty(), "chart {}: no data", path);
  const double x0 = *std::min_element(x.begin(), x.end());
  const double x1 = std::max(*std::max_element(x.begin(), x.end()), x0 + 1);
  auto px = [&](double v) { return left + (v - x0) / (x1 - x0) * pw; };
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" "
      "fill=\"white\"/>\n<text x=\"{}\" y=\"22\" text-anchor=\"middle\" "
      "font-size=\"15\">{}</text>\n"
      "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#888\"/>\n",
      W, H, W / 2, title, left, top, pw, ph);
  for (double v : x)
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", px(v),
                       top + ph + 16, v);
  svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", left + pw / 2,
                     H - 10, x_label);
  for (int side = 0; side < 2; ++side) {
    double lo = 0, hi = 0;
    bool any = false;
    for (const auto& s : series)
      if (s.right_axis == (side == 1))
        for (double v : s.y) {
          hi = any ? std::max(hi, v) : v;
          lo = any ? std::min(lo, v) : std::min(0.0, v);
          any = true;
        }
    if (!any) continue;
    if (hi <= lo) hi = lo + 1;
    hi *= 1.1;
    auto py = [&](double v) { return top + ph - (v - lo) / (hi - lo) * ph; };
    for (int t = 0; t <= 4; ++t) {
      double v = lo + (hi - lo) * t / 4;
      svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"{}\">{:.2f}</text>\n",
                         side ? left + pw + 6 : left - 6, py(v) + 4, side ? "start" : "end", v);
    }
    int legend = 0;
    for (const auto& s : series) {
      if (s.right_axis != (side == 1)) continue;
      std::string pts;
      for (size_t i = 0; i < s.y.size() && i < x.size(); ++i)
        pts += fmt::format("{:.1f},{:.1f} ", px(x[i]), py(s.y[i]));
      svg +=
          fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"/>\n",
                      pts, s.color);
      for (size_t i = 0; i < s.y.size() && i < x.size(); ++i)
        svg += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" fill=\"{}\"/>\n", px(x[i]),
                           py(s.y[i]), s.color);
      svg += fmt::format(
          "<text x=\"{:.1f}\" y=\"{:.1f}\" fill=\"{}\" text-anchor=\"{}\">{}{}</text>\n",
          side ? left + pw - 8 : left + 8, top + 16 + 16 * legend++, s.color,
          side ? "end" : "start", s.name, side ? " (right axis)" : "");
    }
  }
  svg += "</svg>\n";
  std::ofstream out(path);
  check(out.good(), "{}: cannot write chart", path);
  out << svg;
  check(out.good(), "{}: write failed", path);
}

}  // namespace tandem::cli
