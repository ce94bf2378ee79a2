// The name the overlay template (src/codegen/templates/overlay.hpp) includes the ISA by, as
// fpgallm emit writes it into a project: here, fpgallm's own copy.
#include "arch/isa.hpp"
