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

// Two plots side by side in one SVG.
std::string side_by_side(const std::string& left, const std::string& right);

}  // namespace report
