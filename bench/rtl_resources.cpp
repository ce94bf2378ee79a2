// The resource table of docs/rtl.md: Yosys's mapping of the RTL matrix unit
// (rtl/fpgallm_matrix_unit.v, synth_xilinx -family xcup) on a set of shapes, beside
// hw::matrix_unit_resources, with the error; and the least-squares fit of the model's
// LUT constants over the fit set (`--fit`), the values resources.cpp carries.
//
//   rtl_resources [--yosys PATH] [--cache DIR] [--fit] [--csv FILE]
// The yosys `stat` of each shape is cached in DIR under a name that includes a hash of
// the RTL sources (FNV-1a), so an edited RTL is synthesized again.
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "hw/resources.hpp"
#include "hw/yosys_stat.hpp"
#include "util/paths.hpp"

namespace {

struct Shape {
  hw::RtlMatrixUnitParams p;
  bool fit;  // in the fit set; otherwise held out
};

// Tiles of the design default (128 x 256) except one shape with 64 x 64 tiles. Yosys's
// run time grows fast with the unit (16x32: about 10 minutes on a busy 2-core machine),
// so the biggest shape is 16x32; the two smallest held-out shapes are also synthesized
// by the held-out test in tests/rtl.
const Shape kShapes[] = {
    {{4, 8, 8, 128, 256, 0}, true},    {{8, 16, 8, 128, 256, 0}, true},  {{16, 16, 8, 128, 256, 0}, true},
    {{8, 32, 8, 128, 256, 0}, true},   {{16, 32, 8, 128, 256, 0}, false}, {{4, 8, 4, 128, 256, 64}, false},
    {{8, 8, 8, 64, 64, 0}, false},     {{4, 16, 4, 128, 256, 64}, false},
};

std::string read(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string name_of(const hw::RtlMatrixUnitParams& p) {
  return std::to_string(p.pe) + "x" + std::to_string(p.simd) + " w" + std::to_string(p.wbits) + " t" +
         std::to_string(p.tile_rows) + "x" + std::to_string(p.tile_cols);
}

hw::YosysCounts measure(const hw::RtlMatrixUnitParams& p, const std::string& yosys, const std::string& rtl,
                        const std::string& cache) {
  const std::string src = read(rtl + "/fpgallm_matrix_unit.v") + read(rtl + "/fpgallm_dsp_pair.v");
  std::uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a 64 of the RTL sources
  for (unsigned char ch : src) h = (h ^ ch) * 0x100000001b3ull;
  char key[160];
  std::snprintf(key, sizeof key, "mu_%d_%d_%d_%d_%d_%d_%016llx.stat", p.pe, p.simd, p.wbits, p.tile_rows, p.tile_cols,
                p.group_cols, static_cast<unsigned long long>(h));
  const std::string stat = cache + "/" + key;
  if (!std::filesystem::exists(stat)) {
    std::fprintf(stderr, "yosys %s ...\n", name_of(p).c_str());
    const std::string cmd = hw::yosys_matrix_unit_command(yosys, rtl, p, stat + ".tmp") + " > " + stat + ".log 2>&1";
    if (std::system(cmd.c_str()) != 0) {
      std::fprintf(stderr, "rtl_resources: yosys failed, see %s.log\n", stat.c_str());
      std::exit(2);
    }
    std::filesystem::rename(stat + ".tmp", stat);
  }
  return hw::parse_yosys_stat(read(stat), stat);
}

arch::MatrixUnit unit(const hw::RtlMatrixUnitParams& p);

hw::Resources estimate(const hw::RtlMatrixUnitParams& p) {
  const arch::MatrixUnit mu = unit(p);
  arch::Tiling t;
  t.tile_rows = p.tile_rows;
  t.tile_cols = p.tile_cols;
  return hw::matrix_unit_resources(mu, t);
}

arch::MatrixUnit unit(const hw::RtlMatrixUnitParams& p) {
  arch::MatrixUnit mu;
  mu.rows = p.pe;
  mu.cols = p.simd;
  mu.weight_bits = p.wbits;
  return mu;
}

double err(double model, double measured) { return measured == 0 ? 0 : 100.0 * (model - measured) / measured; }

}  // namespace

int main(int argc, char** argv) {
  std::string yosys = "yosys", cache = "bench/rtl_cache", csv;
  bool fit = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--yosys" && i + 1 < argc)
      yosys = argv[++i];
    else if (a == "--cache" && i + 1 < argc)
      cache = argv[++i];
    else if (a == "--csv" && i + 1 < argc)
      csv = argv[++i];
    else if (a == "--fit")
      fit = true;
    else {
      std::fprintf(stderr, "rtl_resources: unknown option '%s' (--yosys PATH, --cache DIR, --fit, --csv FILE)\n", a.c_str());
      return 2;
    }
  }
  std::filesystem::create_directories(cache);
  const std::string rtl = fpgallm::source_dir() + "/rtl";

  std::vector<hw::YosysCounts> y;
  for (const auto& s : kShapes) y.push_back(measure(s.p, yosys, rtl, cache));

  if (fit) {  // least squares of the logic LUTs (LUTRAM excluded) on the adder bits, fit set only
    double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (std::size_t i = 0; i < std::size(kShapes); ++i) {
      if (!kShapes[i].fit) continue;
      const double x = hw::matrix_unit_adder_bits(unit(kShapes[i].p)), yv = double(y[i].lut_logic);
      n += 1;
      sx += x;
      sy += yv;
      sxx += x * x;
      sxy += x * yv;
    }
    const double a = (n * sxy - sx * sy) / (n * sxx - sx * sx), c = (sy - a * sx) / n;
    std::printf("fit over %g shapes: logic LUTs = %.4f x adder bits + %.1f\n\n", n, a, c);
  }

  std::FILE* out = csv.empty() ? nullptr : std::fopen(csv.c_str(), "w");
  if (out) std::fprintf(out, "shape,set,dsp,lut,lut_memory,ff,carry,muxf,bram36,model_dsp,model_lut,model_ff,model_bram36\n");
  std::printf("| shape (PE x SIMD, weight bits, tile) | set | DSP48E2 | LUT (of which LUTRAM) | FF | CARRY4 | BRAM36 | "
              "model DSP | model LUT | model FF | DSP err | LUT err | FF err |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (std::size_t i = 0; i < std::size(kShapes); ++i) {
    const auto& p = kShapes[i].p;
    const hw::Resources m = estimate(p);
    const auto& c = y[i];
    std::printf("| %s | %s | %ld | %ld (%ld) | %ld | %ld | %.1f | %.0f | %.0f | %.0f | %+.1f%% | %+.1f%% | %+.1f%% |\n",
                name_of(p).c_str(), kShapes[i].fit ? "fit" : "held out", c.dsp, c.lut(), c.lut_memory, c.ff, c.carry,
                c.bram36, m.dsp, m.lut, m.ff, err(m.dsp, c.dsp), err(m.lut, c.lut()), err(m.ff, c.ff));
    if (out)
      std::fprintf(out, "%s,%s,%ld,%ld,%ld,%ld,%ld,%ld,%.1f,%.0f,%.0f,%.0f,%.1f\n", name_of(p).c_str(),
                   kShapes[i].fit ? "fit" : "held-out", c.dsp, c.lut(), c.lut_memory, c.ff, c.carry, c.muxf, c.bram36,
                   m.dsp, m.lut, m.ff, m.bram36);
  }
  if (out) std::fclose(out);
  return 0;
}
