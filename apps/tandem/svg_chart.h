// A minimal SVG line chart for benchmark sweeps: one x axis, up to a few series
// each on its own y scale (drawn left and right), no dependencies.
#pragma once
#include <string>
#include <vector>

namespace tandem::cli {

struct ChartSeries {
  std::string name;
  std::string color;  // CSS colour
  std::vector<double> y;
  bool right_axis = false;
};

// Writes the chart to `path` (throws tandem::Error on I/O failure).
void write_svg_chart(const std::string& path, const std::string& title, const std::string& x_label,
                     const std::vector<double>& x, const std::vector<ChartSeries>& series);

}  // namespace tandem::cli
