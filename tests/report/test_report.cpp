// Numbers for people (report/format.hpp) against hand-written expectations, and plot labels
// that do not overlap (report/svg.hpp): a cluster of points at one spot, the roofline's own
// labels, and bar charts.
#include <gtest/gtest.h>

#include <regex>
#include <string>
#include <vector>

#include "arch/design.hpp"
#include "hw/device.hpp"
#include "model/presets.hpp"
#include "perf/perf.hpp"
#include "report/format.hpp"
#include "report/svg.hpp"
#include "util/paths.hpp"

namespace {

TEST(Format, CountsAndNumbersNeverUseExponents) {
  EXPECT_EQ(report::whole(1163520), "1,163,520");
  EXPECT_EQ(report::whole(6039.4), "6,039");
  EXPECT_EQ(report::whole(-1234567.6), "-1,234,568");
  EXPECT_EQ(report::whole(999), "999");
  EXPECT_EQ(report::whole(0), "0");
  EXPECT_EQ(report::number(1381.4), "1,381");
  EXPECT_EQ(report::number(1634.27, 6), "1,634.27");
  EXPECT_EQ(report::number(0.0123), "0.0123");
  EXPECT_EQ(report::number(5.5), "5.5");
  EXPECT_EQ(report::number(2.0e7), "20,000,000");
  EXPECT_EQ(report::number(999.96), "1,000");
  EXPECT_EQ(report::fixed(1234.5678, 2), "1,234.57");
  EXPECT_EQ(report::fixed(-0.0001, 2), "0.00");
  EXPECT_EQ(report::whole(1.0 / 0.0), "n/a");
}

TEST(Format, UnitsAndShares) {
  EXPECT_EQ(report::seconds(0.000612), "612 us");
  EXPECT_EQ(report::seconds(0.0881), "88.1 ms");
  EXPECT_EQ(report::seconds(2.5), "2.5 s");
  EXPECT_EQ(report::seconds(4.2e-8), "42 ns");
  EXPECT_EQ(report::bytes(131072), "128 KiB");
  EXPECT_EQ(report::bytes(1000), "1,000 B");
  EXPECT_EQ(report::bytes(3.5 * 1024 * 1024 * 1024), "3.5 GiB");
  EXPECT_EQ(report::percent(0.1234), "12.3%");
  EXPECT_EQ(report::percent(1), "100.0%");
  EXPECT_EQ(report::percent(0), "0.0%");
  EXPECT_EQ(report::percent(0.000123), "0.012%");  // nonzero never reads as 0
}

struct TextBox {
  double x0, y0, x1, y1;
  std::string text;
};

// The <text> elements of an SVG without a transform, as boxes of 0.55 em per character
// (Helvetica's average advance) and one em high above the baseline.
std::vector<TextBox> text_boxes(const std::string& svg) {
  std::vector<TextBox> out;
  const std::regex re("<text x=\"([-0-9.]+)\" y=\"([-0-9.]+)\"([^>]*)>([^<]*)</text>");
  for (std::sregex_iterator it(svg.begin(), svg.end(), re), end; it != end; ++it) {
    const std::string attrs = (*it)[3];
    if (attrs.find("transform") != std::string::npos) continue;
    double font = 12;
    std::smatch m;
    if (std::regex_search(attrs, m, std::regex("font-size=\"([0-9.]+)\""))) font = std::stod(m[1]);
    const double x = std::stod((*it)[1]), y = std::stod((*it)[2]);
    const std::string text = (*it)[4];
    const double w = 0.55 * font * double(text.size());
    double x0 = x;
    if (attrs.find("text-anchor=\"end\"") != std::string::npos) x0 = x - w;
    if (attrs.find("text-anchor=\"middle\"") != std::string::npos) x0 = x - w / 2;
    out.push_back({x0, y - 0.8 * font, x0 + w, y + 0.2 * font, text});
  }
  return out;
}

void expect_no_overlap(const std::string& svg) {
  const auto boxes = text_boxes(svg);
  for (std::size_t i = 0; i < boxes.size(); ++i)
    for (std::size_t j = i + 1; j < boxes.size(); ++j) {
      const auto &a = boxes[i], &b = boxes[j];
      const bool overlap = a.x0 < b.x1 && b.x0 < a.x1 && a.y0 < b.y1 && b.y0 < a.y1;
      EXPECT_FALSE(overlap) << "'" << a.text << "' overlaps '" << b.text << "'";
    }
}

TEST(Svg, ClusteredPointsGetNonOverlappingLabels) {
  std::vector<report::Point> pts;
  for (int i = 0; i < 12; ++i)  // twelve front points almost on top of each other
    pts.push_back({"design-" + std::to_string(i), 100 * (1 + 0.01 * i), 0.5 * (1 + 0.01 * i), true, false});
  pts.push_back({"h100-sxm", 101, 0.51, false, true});
  pts.push_back({"a100-80gb", 3000, 0.2, false, true});
  const std::string svg = report::scatter_svg(pts, "designs", "tokens/s", "J/token");
  expect_no_overlap(svg);
  // The isolated GPU and some of the cluster are labelled; every point keeps a tooltip.
  EXPECT_NE(svg.find(">a100-80gb</text>"), std::string::npos);
  EXPECT_NE(svg.find(">h100-sxm</text>"), std::string::npos);
  int labelled = 0;
  for (int i = 0; i < 12; ++i) labelled += svg.find(">design-" + std::to_string(i) + "</text>") != std::string::npos;
  EXPECT_GE(labelled, 2) << "the cluster (a few pixels wide) lost its labels";
  EXPECT_NE(svg.find("<title>design-11</title>"), std::string::npos);
}

TEST(Svg, RooflineLabelsDoNotOverlap) {
  const arch::Design d = arch::load(fpgallm::data_dir() + "/designs/u280-overlay-64x64.json");
  for (const char* preset : {"stories15m", "llama2-7b"}) {
    const auto w = perf::lower(model::find_preset(preset).value(), graph::parse_scheme("int8"), {1, 128, 512});
    const std::string svg = report::roofline_svg(perf::predict(d, hw::find_device("u280"), w), preset);
    expect_no_overlap(svg);
    // The weight matmuls (wq, wk, wv, wo, w1, w2, w3) sit at (nearly) one point in a
    // bandwidth-bound decode: the cluster carries at least one of their labels.
    bool matmul_labelled = false;
    for (const char* op : {">wq</text>", ">wk</text>", ">wv</text>", ">wo</text>", ">w1</text>", ">w2</text>", ">w3</text>"})
      matmul_labelled = matmul_labelled || svg.find(op) != std::string::npos;
    EXPECT_TRUE(matmul_labelled) << preset << ": no weight matmul has a label";
  }
}

TEST(Svg, BarChartRowsDoNotOverlap) {
  std::vector<report::BarRow> rows;
  for (int l = 0; l < 6; ++l) rows.push_back({"layer " + std::to_string(l), {10.0 + l, 12.5 + l}});
  rows.push_back({"outside the layers", {40, 38}});
  const std::string svg = report::bar_chart_svg("per layer", {"predicted", "simulated"}, rows, "us");
  expect_no_overlap(svg);
  EXPECT_NE(svg.find(">40 us</text>"), std::string::npos) << "the longest bar has no plain value label";
  EXPECT_EQ(svg.find("e+"), std::string::npos);
}

}  // namespace
