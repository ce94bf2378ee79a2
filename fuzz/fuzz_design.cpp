// design.json: arch::load on arbitrary bytes. Anything but an InputError naming the file
// is a finding; a design it accepts must satisfy its model checks and survive a round trip
// through to_json/from_json unchanged.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "arch/design.hpp"
#include "fuzz_input.hpp"
#include "util/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = fuzz::input_file(data, size, ".json");
  try {
    const arch::Design d = arch::load(path);
    if (!d.model_problems().empty()) __builtin_trap();  // load accepts designs the kernels cannot run
    nlohmann::json j = d;
    arch::Design back;
    arch::from_json(j, back);
    nlohmann::json again = back;
    if (again != j) __builtin_trap();
  } catch (const fpgallm::InputError& e) {
    if (e.source() != path) __builtin_trap();
  }
  std::remove(path.c_str());
  return 0;
}
