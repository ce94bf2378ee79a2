#pragma once
// `eval --quant` and `eval --schemes` (the quantization side of the eval command; the
// code lives beside `quantize` in cmd_quantize.cpp).
#include <memory>
#include <string>
#include <vector>

#include "engine/transformer.hpp"
#include "model/model.hpp"
#include "quant/quant.hpp"

namespace cli {

// A quantized model ready to run: the file, its dequantized fp32 weights and the
// simulated-quantization transformer over them. Throws InputError when the file does
// not match `m`'s shape.
struct LoadedQuant {
  quant::QuantModel qm;
  model::Model base;
  std::unique_ptr<engine::Transformer> transformer;
};
std::unique_ptr<LoadedQuant> load_quant(const model::Model& m, const std::string& qfile);

// eval MODEL --text FILE --quant QFILE: perplexity of the quantized model; when FILE is
// the model's calibration text, only its held-out half.
// batched false: both passes one token at a time (eval --no-batch).
void eval_quantized(const model::Model& m, const model::StoryEncoder& tok, const std::string& text_file,
                    const std::string& qfile, bool json, bool batched = true);
// eval MODEL --text FILE --schemes a,b,...: each scheme quantized with FILE's first half
// and evaluated on its held-out half, side by side.
void eval_schemes(const model::Model& m, const model::StoryEncoder& tok, const std::string& text_file,
                  const std::string& schemes, int group, bool json);

}  // namespace cli
