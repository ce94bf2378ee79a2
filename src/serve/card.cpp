// --predict-card: the card-side time and power of the tokens a server computes.
#include <map>
#include <mutex>

#include <fmt/format.h>

#include "hw/device.hpp"
#include "perf/perf.hpp"
#include "serve/serve.hpp"
#include "sim/simulate.hpp"
#include "util/error.hpp"

namespace serve {

CardModel card_model(const model::Config& config, const arch::Design& design, const std::string& design_source) {
  if (design.device.empty())
    throw fpgallm::InputError(design_source, "--predict-card needs a design that names its device (from fpgallm plan)");
  if (design.parallel.cards != 1) throw fpgallm::InputError(design_source, "--predict-card predicts one-card designs");
  const hw::Device* found = hw::lookup_device(design.device);
  if (!found)
    throw fpgallm::InputError(design_source, fmt::format("its device '{}' is not a known device (`fpgallm devices` "
                                                         "lists them)",
                                                         design.device));
  const hw::Device& device = *found;
  struct Cache {
    std::mutex mutex;
    std::map<int, CardStep> steps;
  };
  auto cache = std::make_shared<Cache>();
  auto figure = [config, design, &device](int context) {
    sim::Options o;
    o.stage = arch::Stage::decode;
    o.context = context;
    CardStep s;
    s.seconds = sim::simulate(config, design, device, o).seconds;
    const perf::Prediction p = perf::predict(
        design, device, perf::lower(config, perf::design_precision(design), perf::Scenario{1, 1, context}));
    s.watts = p.watts;
    return s;
  };
  figure(1);  // the simulator's and the model's refusals, at start rather than at the first request
  return [cache, figure](int context) {
    std::lock_guard lk(cache->mutex);
    auto it = cache->steps.find(context);
    if (it == cache->steps.end()) it = cache->steps.emplace(context, figure(context)).first;
    return it->second;
  };
}

}  // namespace serve
