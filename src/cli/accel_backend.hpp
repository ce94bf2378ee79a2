#pragma once
// `run|eval --backend accel`: the quantized model through the accelerator's kernels
// (engine::AccelTransformer), shared by cmd_run.cpp and cmd_eval.cpp.
#include <memory>
#include <string>

#include "cli/quant_eval.hpp"
#include "engine/accel.hpp"

namespace cli {

// The accelerator backend for the loaded quantized model `q` (null: --quant missing) on the
// design in `design_file` (empty: the default design). Throws InputError naming the flag
// or the design file and the first problem.
std::unique_ptr<engine::AccelTransformer> make_accel(const LoadedQuant* q, const std::string& design_file);

// eval --backend accel: perplexity through the kernels beside the simulated quantization
// of the same file on the same tokens (the held-out half when the text is the model's
// calibration text), and their relative difference.
void eval_accel(const model::Model& m, const model::Tokenizer& tok, const std::string& text_file,
                const std::string& qfile, const std::string& design_file, bool json);

}  // namespace cli
