#pragma once
// The RTL matrix unit in an emitted project (design matrix_unit.impl = rtl): the Verilog
// of rtl/, a top module with the design's parameters, and the Vivado/Vitis steps that
// package it as a free-running RTL kernel (.xo) and link it. None of these steps runs
// here; the README the files carry says so.
#include <string>
#include <utility>
#include <vector>

#include "arch/design.hpp"

namespace codegen {

// (path relative to the project, contents) of every file; `rtl_dir` holds the sources.
std::vector<std::pair<std::string, std::string>> rtl_kernel_files(const arch::Design& d, const std::string& rtl_dir);

}  // namespace codegen
