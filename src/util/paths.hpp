#pragma once
#include <string>

namespace fpgallm {

// The project's data/ folder: $FPGALLM_DATA if set, else the source tree's data/.
std::string data_dir();
// The project's source tree (kernels are read from here by the code generator).
std::string source_dir();

// Writes a whole file atomically through OutputFile (util/output.hpp): readers never see it
// half-written, and nothing fpgallm may not replace is replaced. Throws InputError naming path.
void write_file_atomic(const std::string& path, const std::string& contents);

}  // namespace fpgallm
