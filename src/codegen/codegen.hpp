#pragma once
// The code generator: writes a self-contained Vitis project for one design and one
// quantized model (docs: README.md of the emitted project). The overlay kernel executes
// the arch::Program instruction list of a decode step through the src/kernels templates,
// instantiated with the design's shapes; weights, norms and the RoPE table are laid out in
// bank-grouped binary blobs the host moves to the card once.
#include <string>
#include <vector>

#include "arch/design.hpp"
#include "model/model.hpp"
#include "quant/quant.hpp"

namespace codegen {

struct EmitOptions {
  // Decode steps recorded as golden vectors (tokens fed greedily from token 1 = BOS).
  int golden_steps = 4;
  // Golden prompt calls (prompt lengths; those beyond the golden model's context are left
  // out): the logits and the KV cache of one call of the top's prompt mode.
  std::vector<int> prompt_lengths = {1, 17, 64};
};

struct EmitResult {
  std::string dir;                 // the project folder written
  std::vector<std::string> files;  // paths relative to dir, sorted
  std::int64_t weight_bytes = 0;   // int8 weight codes of all matrices (before padding)
  std::int64_t param_floats = 0;   // floats of params.bin (embedding, norms, RoPE; rows padded to 16)
  int weight_channels = 0;         // 512-bit weight bundles (data/weights_chNN.bin)
  double schedule_cycles = 0;      // one decode step of the kernel's model per schedule.md
  int instructions = 0;            // instructions of one decode step
  int golden_steps = 0;
  std::vector<std::string> notes;  // where the project departs from the design (also in README.md)
};

// The design the accelerator backend (engine::AccelTransformer) runs for `design`'s golden
// vectors: the same units and tiles (emit refuses shapes outside arch/instances.hpp), as
// the overlay.
arch::Design backend_design(const arch::Design& design);

// Writes the project to out_dir (atomically: out_dir.tmp-<pid>, then renamed; an existing
// out_dir is replaced only when it is empty or an earlier emitted project). Throws fpgallm::InputError("design", ...) when the design or the
// model cannot run on the overlay (engine::accel_problems with the golden run's shapes),
// InputError(out_dir, ...) on I/O.
EmitResult emit(const model::Model& base, const quant::QuantModel& qm, const arch::Design& design,
                const std::string& out_dir, const EmitOptions& options = {});
// The project of a kernel sized for `kernel_config` (a preset may have no weights): its
// interfaces, configuration and schedule are those of kernel_config on `design`; data/
// and golden/ are those of (base, qm), a smaller model that runs on the same kernel (every
// size within kernel_config's) — `golden_source` says where it comes from (README.md).
EmitResult emit(const model::Config& kernel_config, const model::Model& base, const quant::QuantModel& qm,
                const arch::Design& design, const std::string& out_dir, const EmitOptions& options,
                const std::string& golden_source);

}  // namespace codegen
