#pragma once
// SVG plots written by plan and explore --svg: the roofline of a design with its
// operations on it, and the Pareto front of tokens/s against joules/token.
#include <string>
#include <vector>

#include "perf/perf.hpp"

namespace report {

// The card's roofs (peak arithmetic, off-chip bandwidth) on log axes of FLOP per
// off-chip byte and FLOP/s, with each kind of operation of both phases as a point.
// Operations that move no off-chip bytes sit on the right edge, marked "on chip".
std::string roofline_svg(const perf::Prediction& p, const std::string& title);

struct Point {
  std::string label;
  double x = 0, y = 0;
  bool front = false;  // on the Pareto front (drawn joined and labelled)
  bool gpu = false;
};
// Scatter on log-log axes; points marked `front` are joined by a line.
std::string scatter_svg(const std::vector<Point>& points, const std::string& title, const std::string& x_label,
                        const std::string& y_label);

// Horizontal bars: one row per entry, one bar per series in each row (colours named by a
// legend when there are several series), the value printed at each bar's end in `unit`.
// Rows are laid out one below the other, so no two labels can overlap.
struct BarRow {
  std::string label;
  std::vector<double> values;  // one per series
};
std::string bar_chart_svg(const std::string& title, const std::vector<std::string>& series,
                          const std::vector<BarRow>& rows, const std::string& unit);

// Two plots side by side in one SVG.
std::string side_by_side(const std::string& left, const std::string& right);

}  // namespace report
