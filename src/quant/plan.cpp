#include <nlohmann/json.hpp>
#include <stdexcept>

#include "quant/quant.hpp"
#include "util/error.hpp"

namespace quant {

namespace {
constexpr Scheme kSchemes[] = {Scheme::fp32, Scheme::w8a8, Scheme::w8a8_static, Scheme::w8a8_smooth,
                               Scheme::w4a16, Scheme::w4a8, Scheme::mixed};
}

const char* to_string(Scheme s) {
  switch (s) {
    case Scheme::fp32: return "fp32";
    case Scheme::w8a8: return "w8a8";
    case Scheme::w8a8_static: return "w8a8-static";
    case Scheme::w8a8_smooth: return "w8a8-smooth";
    case Scheme::w4a16: return "w4a16";
    case Scheme::w4a8: return "w4a8";
    case Scheme::mixed: return "mixed";
  }
  return "?";
}

Scheme scheme_from_string(const std::string& s) {
  for (Scheme k : kSchemes)
    if (s == to_string(k)) return k;
  throw fpgallm::InputError("--scheme", "unknown scheme '" + s + "' (fp32, w8a8, w8a8-static, w8a8-smooth, w4a16, w4a8, mixed)");
}

const char* to_string(Method m) {
  switch (m) {
    case Method::rtn: return "rtn";
    case Method::awq: return "awq";
    case Method::gptq: return "gptq";
    case Method::awq_gptq: return "awq+gptq";
  }
  return "?";
}

Method method_from_string(const std::string& s) {
  for (Method m : {Method::rtn, Method::awq, Method::gptq, Method::awq_gptq})
    if (s == to_string(m)) return m;
  throw fpgallm::InputError("--method", "unknown method '" + s + "' (rtn, awq, gptq, awq+gptq)");
}

std::size_t Plan::index(int n_layers, int layer, model::Linear which) {
  if (which == model::Linear::cls) return static_cast<std::size_t>(n_layers) * 7;
  return static_cast<std::size_t>(layer) * 7 + static_cast<std::size_t>(which);
}

LayerPlan& Plan::at(int layer, model::Linear which) {
  const int n_layers = static_cast<int>((layers.size() - 1) / 7);
  return layers.at(index(n_layers, layer, which));
}

const LayerPlan& Plan::at(int layer, model::Linear which) const { return const_cast<Plan*>(this)->at(layer, which); }

Plan uniform_plan(const model::Config& c, Scheme s, int group) {
  Plan p;
  p.scheme = s;
  p.group = group;
  WeightFormat w = WeightFormat::f32;
  ActFormat a = ActFormat::f32;
  switch (s) {
    case Scheme::fp32: break;
    case Scheme::w8a8:
    case Scheme::w8a8_smooth: w = WeightFormat::int8, a = ActFormat::int8_dynamic; break;
    case Scheme::w8a8_static: w = WeightFormat::int8, a = ActFormat::int8_static; break;
    case Scheme::w4a16: w = WeightFormat::int4, a = ActFormat::f16; break;
    case Scheme::w4a8: w = WeightFormat::int4, a = ActFormat::int8_dynamic; break;
    case Scheme::mixed: w = WeightFormat::f16, a = ActFormat::f16; break;
  }
  for (int l = 0; l < c.n_layers; ++l)
    for (model::Linear which : model::kBlockLinears) p.layers.push_back({l, which, w, a, 0.0f});
  p.layers.push_back({-1, model::Linear::cls, w, a, 0.0f});
  return p;
}

void to_json(nlohmann::json& j, const Plan& p) {
  nlohmann::json layers = nlohmann::json::array();
  for (const auto& l : p.layers) {
    nlohmann::json e = {{"name", model::linear_name(l.layer, l.which)},
                        {"layer", l.layer},
                        {"linear", model::to_string(l.which)},
                        {"weight", to_string(l.weight)},
                        {"act", to_string(l.act)}};
    if (l.weight == WeightFormat::int4) e["group"] = p.group;
    if (l.act == ActFormat::int8_static) e["act_scale"] = l.act_scale;
    layers.push_back(std::move(e));
  }
  j = {{"format", "fpgallm-quant-plan"},
       {"version", 1},
       {"scheme", to_string(p.scheme)},
       {"group", p.group},
       {"kv_cache", p.kv8 ? "int8" : "f32"},
       {"smoothquant_alpha", p.smooth_alpha},
       {"layers", std::move(layers)}};
}

Plan plan_from_json(const nlohmann::json& j, const model::Config& c) {
  try {
    Plan p;
    const std::string scheme = j.at("scheme").get<std::string>();
    bool known = false;
    for (Scheme k : kSchemes)
      if (scheme == to_string(k)) p.scheme = k, known = true;
    if (!known) throw std::invalid_argument("unknown scheme '" + scheme + "'");
    p.group = j.at("group").get<int>();
    if (p.group != 32 && p.group != 64 && p.group != 128) throw std::invalid_argument("group must be 32, 64 or 128");
    p.kv8 = j.at("kv_cache").get<std::string>() == "int8";
    p.smooth_alpha = j.at("smoothquant_alpha").get<float>();
    Plan shape = uniform_plan(c, Scheme::fp32, p.group);
    const auto& layers = j.at("layers");
    if (layers.size() != shape.layers.size())
      throw std::invalid_argument("plan has " + std::to_string(layers.size()) + " layers, the model " +
                                  std::to_string(shape.layers.size()));
    p.layers = shape.layers;
    for (std::size_t i = 0; i < layers.size(); ++i) {
      const auto& e = layers[i];
      auto& l = p.layers[i];
      if (e.at("name").get<std::string>() != model::linear_name(l.layer, l.which))
        throw std::invalid_argument("layer " + std::to_string(i) + " is not " + model::linear_name(l.layer, l.which));
      l.weight = weight_format_from_string(e.at("weight").get<std::string>());
      l.act = act_format_from_string(e.at("act").get<std::string>());
      l.act_scale = e.value("act_scale", 0.0f);
    }
    return p;
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(std::string("malformed plan: ") + e.what());
  }
}

std::uint64_t weight_bytes(const model::Config& c, model::Linear which, WeightFormat f, int group) {
  const auto [rows, cols] = model::linear_shape(c, which);
  const auto r = static_cast<std::uint64_t>(rows), n = r * static_cast<std::uint64_t>(cols);
  switch (f) {
    case WeightFormat::f32: return 4 * n;
    case WeightFormat::f16: return 2 * n;
    case WeightFormat::int8: return n + 4 * r;
    case WeightFormat::int4: {
      const auto row_bytes = static_cast<std::uint64_t>((cols + 31) / 32 * 16);
      const auto groups = static_cast<std::uint64_t>((cols + group - 1) / group);
      return r * (row_bytes + 2 * groups);
    }
  }
  return 0;
}

std::uint64_t linear_weight_bytes(const model::Config& c, const Plan& p) {
  std::uint64_t total = 0;
  for (const auto& l : p.layers) total += weight_bytes(c, l.which, l.weight, p.group);
  return total;
}

}  // namespace quant
