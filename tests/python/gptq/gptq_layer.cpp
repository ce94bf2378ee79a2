// quant::gptq_int4 on one layer for test_gptq_reference.py:
//   fpgallm_gptq_layer IN OUT
// IN: int32 rows, cols, group, flags (1: act-order, 2: searched scales); float32 W [rows][cols]; float64 H [cols][cols].
// OUT: int8 codes [rows][cols]; uint16 fp16 scales [rows][groups].
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <vector>

#include "quant/quant.hpp"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: fpgallm_gptq_layer IN OUT\n");
    return 2;
  }
  std::ifstream in(argv[1], std::ios::binary);
  std::int32_t head[4] = {};
  in.read(reinterpret_cast<char*>(head), sizeof head);
  const int rows = head[0], cols = head[1], group = head[2];
  if (!in || rows <= 0 || cols <= 0) {
    std::fprintf(stderr, "%s: bad header\n", argv[1]);
    return 2;
  }
  std::vector<float> w(static_cast<std::size_t>(rows) * cols);
  std::vector<double> h(static_cast<std::size_t>(cols) * cols);
  in.read(reinterpret_cast<char*>(w.data()), static_cast<std::streamsize>(w.size() * sizeof(float)));
  in.read(reinterpret_cast<char*>(h.data()), static_cast<std::streamsize>(h.size() * sizeof(double)));
  if (!in) {
    std::fprintf(stderr, "%s: truncated\n", argv[1]);
    return 2;
  }
  try {
    quant::GptqOptions opt;
    opt.act_order = (head[3] & 1) != 0;
    opt.search_scales = (head[3] & 2) != 0;
    const quant::Int4Matrix q = quant::gptq_int4(w, rows, cols, group, h, opt);
    std::vector<std::int8_t> codes(w.size());
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c) codes[static_cast<std::size_t>(r) * cols + c] = static_cast<std::int8_t>(q.code(r, c));
    std::ofstream out(argv[2], std::ios::binary);
    out.write(reinterpret_cast<const char*>(codes.data()), static_cast<std::streamsize>(codes.size()));
    out.write(reinterpret_cast<const char*>(q.scale.data()), static_cast<std::streamsize>(q.scale.size() * 2));
    return out ? 0 : 1;
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "%s: %s\n", argv[1], e.what());
    return 2;
  }
}
