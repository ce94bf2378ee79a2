#pragma once
// The designs the search returns for a model on one card (int8, its full context, a given
// batch and objective), as `fpgallm plan` runs it: every ranked and every Pareto design.
#include <algorithm>
#include <vector>

#include "dse/dse.hpp"
#include "graph/workload.hpp"
#include "hw/device.hpp"
#include "perf/perf.hpp"

namespace dse_testing {

inline dse::Request request(const model::Config& c, int batch) {
  dse::Request req;
  req.config = c;
  req.precision = graph::parse_scheme("int8");
  req.scenario.batch = batch;
  req.scenario.prompt = std::min(128, c.seq_len);
  req.scenario.context = c.seq_len;
  req.max_cards = 1;
  return req;
}

inline std::vector<dse::Candidate> searched(const model::Config& c, const hw::Device& dev, int batch, dse::Objective obj) {
  const dse::Request req = request(c, batch);
  const dse::DeviceResult r = dse::explore_device(dev, req, obj, perf::lower(req.config, req.precision, req.scenario));
  std::vector<dse::Candidate> all = r.ranked;
  all.insert(all.end(), r.pareto.begin(), r.pareto.end());
  return all;
}

}  // namespace dse_testing
