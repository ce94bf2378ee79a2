#include "report/svg.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "report/format.hpp"

namespace report {

namespace {

constexpr double kW = 680, kH = 460;                       // one panel
constexpr double kLeft = 80, kRight = 20, kTop = 40, kBottom = 60;  // plot margins

std::string escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '<') o += "&lt;";
    else if (c == '>') o += "&gt;";
    else if (c == '&') o += "&amp;";
    else o += c;
  }
  return o;
}

std::string si(double v) {
  const char* units[] = {"", "k", "M", "G", "T", "P"};
  int i = 0;
  double a = v;
  while (std::fabs(a) >= 1000 && i < 5) {
    a /= 1000;
    ++i;
  }
  if (std::fabs(v) < 1 && v != 0) return fmt::format("{:g}", v);
  return fmt::format("{:.3g}{}", a, units[i]);
}

// Log-log axes over [x0, x1] x [y0, y1] (decades).
struct Axes {
  double x0, x1, y0, y1;
  double px(double x) const { return kLeft + (std::log10(x) - x0) / (x1 - x0) * (kW - kLeft - kRight); }
  double py(double y) const { return kH - kBottom - (std::log10(y) - y0) / (y1 - y0) * (kH - kTop - kBottom); }
};

std::string header(const std::string& title) {
  return fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"Helvetica, Arial, sans-serif\" font-size=\"12\">\n"
      "<rect width=\"{0}\" height=\"{1}\" fill=\"white\"/>\n"
      "<text x=\"{2}\" y=\"24\" font-size=\"15\" font-weight=\"bold\">{3}</text>\n",
      kW, kH, kLeft, escape(title));
}

std::string frame(const Axes& a, const std::string& x_label, const std::string& y_label) {
  std::string s;
  const double l = kLeft, r = kW - kRight, t = kTop, b = kH - kBottom;
  for (int d = int(std::floor(a.x0)); d <= int(std::ceil(a.x1)); ++d) {
    const double x = a.px(std::pow(10.0, d));
    if (x < l - 0.5 || x > r + 0.5) continue;
    s += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" stroke=\"#e4e4e4\"/>\n", x, t, b);
    s += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", x, b + 16, si(std::pow(10.0, d)));
  }
  for (int d = int(std::floor(a.y0)); d <= int(std::ceil(a.y1)); ++d) {
    const double y = a.py(std::pow(10.0, d));
    if (y < t - 0.5 || y > b + 0.5) continue;
    s += fmt::format("<line x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\" stroke=\"#e4e4e4\"/>\n", l, y, r);
    s += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n", l - 6, y + 4, si(std::pow(10.0, d)));
  }
  s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#333\"/>\n", l, t, r - l, b - t);
  s += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", (l + r) / 2, kH - 20, escape(x_label));
  s += fmt::format("<text x=\"18\" y=\"{:.1f}\" text-anchor=\"middle\" transform=\"rotate(-90 18 {:.1f})\">{}</text>\n",
                   (t + b) / 2, (t + b) / 2, escape(y_label));
  return s;
}

// "blk.3.wq" -> "wq"; "blk.3.attn.score" -> "attn.score".
std::string op_family(const std::string& name) {
  if (name.rfind("blk.", 0) == 0) {
    const auto dot = name.find('.', 4);
    if (dot != std::string::npos) return name.substr(dot + 1);
  }
  return name;
}

// Places text labels beside markers without overlapping each other, the markers, or
// anything registered as taken (legend, roof labels); a label with no free spot among the
// candidates is left out (its marker keeps a <title> tooltip). Text extents are estimated
// from the font size (0.6 em per character, a little wider than Helvetica's average).
class LabelPlacer {
 public:
  struct Box {
    double x0, y0, x1, y1;
    bool overlaps(const Box& o) const { return x0 < o.x1 && o.x0 < x1 && y0 < o.y1 && o.y0 < y1; }
  };
  LabelPlacer(double left, double top, double right, double bottom) : area_{left, top, right, bottom} {}
  void take(const Box& b) { taken_.push_back(b); }
  void take_marker(double x, double y, double r) { take({x - r, y - r, x + r, y + r}); }
  // Markers are registered first, then labels placed (so that no label hides a marker).
  std::string place(double x, double y, double r, const std::string& text, double font, const std::string& color) {
    const double w = 0.6 * font * double(text.size()), h = font;
    const double gap = r + 2;
    // (dx, dy) of the text's left baseline point for: right, left, above, below, and the
    // four diagonals.
    const std::pair<double, double> candidates[] = {
        {gap, h / 3},      {-gap - w, h / 3},     {-w / 2, -gap},     {-w / 2, gap + h},
        {gap, -gap},       {gap, gap + h},        {-gap - w, -gap},   {-gap - w, gap + h}};
    for (const auto& [dx, dy] : candidates) {
      const Box b{x + dx, y + dy - h, x + dx + w, y + dy + 2};
      if (b.x0 < area_.x0 || b.x1 > area_.x1 || b.y0 < area_.y0 || b.y1 > area_.y1) continue;
      bool free = true;
      for (const auto& t : taken_) free = free && !b.overlaps(t);
      if (!free) continue;
      take(b);
      return fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"{}\" fill=\"{}\">{}</text>\n", x + dx, y + dy, font,
                         color, escape(text));
    }
    ++dropped_;
    return "";
  }
  int dropped() const { return dropped_; }

 private:
  Box area_;
  std::vector<Box> taken_;
  int dropped_ = 0;
};

}  // namespace

std::string roofline_svg(const perf::Prediction& p, const std::string& title) {
  struct Agg {
    double flops = 0, bytes = 0, seconds = 0;
  };
  // Per phase and family of operation, summed over layers.
  std::map<std::pair<int, std::string>, Agg> agg;
  int phase = 0;
  for (const perf::PhaseTime* ph : {&p.prefill, &p.decode}) {
    for (const auto& o : ph->ops) {
      if (o.flops <= 0 || o.time_s <= 0) continue;
      auto& a = agg[{phase, op_family(o.name)}];
      a.flops += o.flops;
      a.bytes += o.offchip_bytes;
      a.seconds += o.time_s;
    }
    ++phase;
  }
  const double peak = p.peak_ops_per_s, bw = p.peak_bytes_per_s;
  double max_intensity = 10, min_intensity = 0.1, min_rate = peak / 1e4;
  for (const auto& [key, a] : agg) {
    if (a.bytes > 0) {
      max_intensity = std::max(max_intensity, a.flops / a.bytes);
      min_intensity = std::min(min_intensity, a.flops / a.bytes);
    }
    min_rate = std::min(min_rate, a.flops / a.seconds);
  }
  const double on_chip_x = max_intensity * 4;  // where operations without off-chip traffic are drawn
  Axes ax{std::floor(std::log10(min_intensity)), std::ceil(std::log10(on_chip_x * 2)),
          std::floor(std::log10(std::max(min_rate, 1.0))), std::ceil(std::log10(peak * 2))};
  std::string s = header(title) + frame(ax, "arithmetic intensity (FLOP per off-chip byte)", "FLOP/s (per card set)");
  // Roofs.
  const double ridge = peak / bw;
  const double xa = std::pow(10.0, ax.x0), xb = std::pow(10.0, ax.x1);
  const double ya = std::max(bw * xa, std::pow(10.0, ax.y0));
  const double xs = ya / bw;
  s += fmt::format("<polyline fill=\"none\" stroke=\"#222\" stroke-width=\"2\" points=\"{:.1f},{:.1f} {:.1f},{:.1f} {:.1f},{:.1f}\"/>\n",
                   ax.px(xs), ax.py(ya), ax.px(ridge), ax.py(peak), ax.px(xb), ax.py(peak));
  LabelPlacer labels(kLeft, kTop, kW - kRight, kH - kBottom);
  const std::string peak_text = "peak " + si(peak) + "FLOP/s";
  s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n", kW - kRight - 4, ax.py(peak) - 6,
                   peak_text);
  labels.take({kW - kRight - 4 - 0.6 * 12 * double(peak_text.size()), ax.py(peak) - 18, kW - kRight - 4, ax.py(peak) - 2});
  // The bandwidth label just under the sloped roof, halfway (on the log axis) from the left
  // edge to the ridge: inside the frame and clear of the legend above the roof.
  const double label_x = std::sqrt(std::max(xs, xa) * ridge);
  const double bx = ax.px(label_x), by = ax.py(bw * label_x) + 16;
  const std::string bw_text = si(bw) + "B/s off-chip";
  s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" transform=\"rotate(-32 {:.1f} {:.1f})\">{}</text>\n", bx, by, bx, by,
                   bw_text);
  const double bw_len = 0.6 * 12 * double(bw_text.size());
  labels.take({bx, by - bw_len * 0.53 - 12, bx + bw_len * 0.85, by + 4});
  // Legend (top left), kept free of labels.
  const char* colors[] = {"#d95f02", "#1b6ac9"};
  s += fmt::format("<circle cx=\"{}\" cy=\"{}\" r=\"5\" fill=\"{}\"/><text x=\"{}\" y=\"{}\">prefill ({} tokens)</text>\n",
                   kLeft + 14, kTop + 16, colors[0], kLeft + 24, kTop + 20, p.scenario.prompt * p.scenario.batch);
  s += fmt::format("<circle cx=\"{}\" cy=\"{}\" r=\"5\" fill=\"{}\"/><text x=\"{}\" y=\"{}\">decode (batch {}, context {})</text>\n",
                   kLeft + 14, kTop + 34, colors[1], kLeft + 24, kTop + 38, p.scenario.batch, p.scenario.context);
  labels.take({kLeft + 6, kTop + 6, kLeft + 24 + 0.6 * 12 * 34, kTop + 44});
  s += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" stroke=\"#999\" stroke-dasharray=\"4 3\"/>\n",
                   ax.px(on_chip_x), kTop, kH - kBottom);
  s += fmt::format("<text x=\"{:.1f}\" y=\"{}\" font-size=\"10\" fill=\"#666\" text-anchor=\"end\">on chip</text>\n",
                   ax.px(on_chip_x) - 3, kTop + 12);
  labels.take({ax.px(on_chip_x) - 3 - 0.6 * 10 * 7, kTop + 2, ax.px(on_chip_x) - 3, kTop + 14});
  // Operations: markers first, then their labels where there is room.
  struct Marker {
    double x, y;
    int phase;
    std::string name;
  };
  std::vector<Marker> markers;
  for (const auto& [key, a] : agg) {
    const double x = a.bytes > 0 ? a.flops / a.bytes : on_chip_x;
    markers.push_back({ax.px(x), ax.py(a.flops / a.seconds), key.first, key.second});
  }
  for (const auto& m : markers) {
    s += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"5\" fill=\"{}\" fill-opacity=\"0.75\"><title>{} ({})</title></circle>\n",
                     m.x, m.y, colors[m.phase], escape(m.name), m.phase == 0 ? "prefill" : "decode");
    labels.take_marker(m.x, m.y, 5);
  }
  for (const auto& m : markers) s += labels.place(m.x, m.y, 5, m.name, 10, colors[m.phase]);
  s += "</svg>\n";
  return s;
}

std::string scatter_svg(const std::vector<Point>& points, const std::string& title, const std::string& x_label,
                        const std::string& y_label) {
  double x0 = 1e300, x1 = -1e300, y0 = 1e300, y1 = -1e300;
  for (const auto& p : points) {
    if (p.x <= 0 || p.y <= 0) continue;
    x0 = std::min(x0, p.x);
    x1 = std::max(x1, p.x);
    y0 = std::min(y0, p.y);
    y1 = std::max(y1, p.y);
  }
  if (x0 > x1) x0 = y0 = 1, x1 = y1 = 10;
  Axes ax{std::floor(std::log10(x0)), std::ceil(std::log10(x1 * 1.5)), std::floor(std::log10(y0)),
          std::ceil(std::log10(y1 * 1.5))};
  if (ax.x1 <= ax.x0) ax.x1 = ax.x0 + 1;
  if (ax.y1 <= ax.y0) ax.y1 = ax.y0 + 1;
  std::string s = header(title) + frame(ax, x_label, y_label);
  std::vector<Point> front;
  for (const auto& p : points)
    if (p.front && p.x > 0 && p.y > 0) front.push_back(p);
  std::sort(front.begin(), front.end(), [](const Point& a, const Point& b) { return a.x < b.x; });
  if (front.size() > 1) {
    s += "<polyline fill=\"none\" stroke=\"#1b9e77\" stroke-width=\"2\" points=\"";
    for (const auto& p : front) s += fmt::format("{:.1f},{:.1f} ", ax.px(p.x), ax.py(p.y));
    s += "\"/>\n";
  }
  LabelPlacer labels(kLeft, kTop, kW - kRight, kH - kBottom);
  s += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"11\" fill=\"#1b9e77\">green: Pareto front</text>\n", kLeft + 8, kTop + 16);
  labels.take({kLeft + 4, kTop + 4, kLeft + 8 + 0.6 * 11 * 20, kTop + 20});
  auto color_of = [](const Point& p) { return p.gpu ? "#7570b3" : (p.front ? "#1b9e77" : "#999999"); };
  for (const auto& p : points) {
    if (p.x <= 0 || p.y <= 0) continue;
    const char* color = color_of(p);
    if (p.gpu)
      s += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"9\" height=\"9\" fill=\"{}\"><title>{}</title></rect>\n",
                       ax.px(p.x) - 4.5, ax.py(p.y) - 4.5, color, escape(p.label));
    else
      s += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"{}\" fill=\"{}\" fill-opacity=\"0.8\"><title>{}</title></circle>\n",
                       ax.px(p.x), ax.py(p.y), p.front ? 5 : 3.5, color, escape(p.label));
    labels.take_marker(ax.px(p.x), ax.py(p.y), p.front || p.gpu ? 5 : 3.5);
  }
  // Labels of GPUs first, then of the front (left to right); a point at the same place
  // as one already labelled gets none.
  for (int pass = 0; pass < 2; ++pass)
    for (const auto& p : pass == 0 ? points : front)
      if (p.x > 0 && p.y > 0 && (pass == 0 ? p.gpu : true)) s += labels.place(ax.px(p.x), ax.py(p.y), 5, p.label, 10, color_of(p));
  s += "</svg>\n";
  return s;
}

std::string bar_chart_svg(const std::string& title, const std::vector<std::string>& series,
                          const std::vector<BarRow>& rows, const std::string& unit) {
  const char* colors[] = {"#1b6ac9", "#d95f02", "#1b9e77", "#7570b3"};
  constexpr double kBar = 14, kGap = 8, kFont = 12, kTitle = 40;
  const double per_row = double(std::max<std::size_t>(1, series.size())) * kBar + kGap;
  const double legend = series.size() > 1 ? 22 : 0;
  const double height = kTitle + legend + double(rows.size()) * per_row + 16;
  std::size_t longest = 1;
  for (const auto& r : rows) longest = std::max(longest, r.label.size());
  const double label_w = 0.6 * kFont * double(longest) + 12;
  double max_value = 0;
  for (const auto& r : rows)
    for (double v : r.values) max_value = std::max(max_value, v);
  // Bars use at most 70% of the width right of the labels; the rest holds the value text.
  const double x0 = 10 + label_w, span = (kW - kRight - x0) * 0.7;
  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"Helvetica, Arial, sans-serif\" font-size=\"{2}\">\n<rect width=\"{0}\" height=\"{1}\" fill=\"white\"/>\n"
      "<text x=\"10\" y=\"24\" font-size=\"15\" font-weight=\"bold\">{3}</text>\n",
      kW, height, kFont, escape(title));
  double lx = 10;
  if (series.size() > 1)
    for (std::size_t k = 0; k < series.size(); ++k) {
      s += fmt::format("<rect x=\"{:.1f}\" y=\"{}\" width=\"12\" height=\"12\" fill=\"{}\"/><text x=\"{:.1f}\" y=\"{}\">{}</text>\n", lx,
                       kTitle - 4, colors[k % 4], lx + 16, kTitle + 6, escape(series[k]));
      lx += 16 + 0.6 * kFont * double(series[k].size()) + 20;
    }
  double y = kTitle + legend;
  for (const auto& r : rows) {
    s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n", x0 - 8,
                     y + per_row / 2 - kGap / 2 + 4, escape(r.label));
    for (std::size_t k = 0; k < r.values.size(); ++k) {
      const double v = r.values[k], w = max_value > 0 ? span * v / max_value : 0;
      const double by = y + double(k) * kBar;
      s += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{}\" fill=\"{}\"><title>{}: {} {}</title></rect>\n",
                       x0, by, w, kBar - 2, colors[k % 4], escape(series.empty() ? r.label : series[k]), number(v, 4), escape(unit));
      s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"11\" fill=\"#333\">{} {}</text>\n", x0 + w + 4,
                       by + kBar - 4, number(v, 4), escape(unit));
    }
    y += per_row;
  }
  s += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" stroke=\"#333\"/>\n</svg>\n", x0, kTitle + legend - 4,
                   y - kGap + 4);
  return s;
}

std::string side_by_side(const std::string& left, const std::string& right) {
  auto strip = [](const std::string& svg) {
    const auto start = svg.find('>') + 1;
    const auto end = svg.rfind("</svg>");
    return svg.substr(start, end - start);
  };
  return fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"Helvetica, Arial, sans-serif\" font-size=\"12\">\n"
      "<g>{2}</g>\n<g transform=\"translate({3} 0)\">{4}</g>\n</svg>\n",
      2 * kW, kH, strip(left), kW, strip(right));
}

}  // namespace report
