#pragma once
// Writing a model in any of the three checkpoint formats (what `fpgallm convert` and
// `fpgallm synth` share).
#include <cstdint>
#include <string>

#include "model/model.hpp"
#include "model/tokenizer.hpp"

namespace model {

// `requested` ("bin", "gguf", "safetensors") wins; else from the output name: *.bin is
// llama2.c, *.gguf is GGUF, a name without extension (or ending in '/') a safetensors
// folder. Throws InputError naming the output otherwise.
Format output_format(const std::string& output, const std::string& requested);

// Matrix storage type: "f32" everywhere; "f16"/"bf16" in GGUF (matrices) and safetensors
// (every tensor, as Hugging Face stores a checkpoint); "q8_0", "q4_0" in GGUF. Throws InputError for a combination the format cannot hold.
// The tokenizer goes into GGUF metadata, or tokenizer.bin inside a safetensors folder; a
// llama2.c .bin cannot hold one (its tokenizer is a separate file) and it is ignored there.
// Returns the bytes written.
std::uint64_t save(const Model& m, const std::string& output, Format format, const std::string& type,
                   const Tokenizer* tokenizer);

// About the bytes save() writes for a model of shape c (weights at the type's bits; the
// tables and metadata are small beside them): what the output's file system must hold.
std::uint64_t expected_bytes(const Config& c, Format format, const std::string& type);

// Refuses (InputError naming `source`) a model whose fp32 weights do not fit in this
// machine's memory, with the size needed, before anything is allocated.
void require_memory_for(const Config& c, const std::string& source);

}  // namespace model
