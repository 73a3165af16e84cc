#include "launch_plan.h"

#include <nlohmann/json.hpp>

#include "kdsl/error.h"

namespace kdsl {

using nlohmann::json;

NLOHMANN_JSON_SERIALIZE_ENUM(ParamSlot::Kind, {{ParamSlot::Kind::tensor_ptr, "tensor_ptr"},
                                               {ParamSlot::Kind::stride, "stride"},
                                               {ParamSlot::Kind::symbol, "symbol"},
                                               {ParamSlot::Kind::scalar, "scalar"},
                                               {ParamSlot::Kind::rows, "rows"},
                                               {ParamSlot::Kind::workspace, "workspace"},
                                               {ParamSlot::Kind::partials, "partials"}})

std::string LaunchPlan::to_json() const {
  json j;
  j["symbol"] = symbol;
  j["schedule"] = schedule;
  j["reasons"] = reasons;
  j["block_threads"] = block_threads;
  j["rows_per_cta"] = rows_per_cta;
  j["row_splits"] = row_splits;
  j["cluster"] = cluster;
  j["max_ctas_per_sm"] = max_ctas_per_sm;
  j["partials_per_cta"] = partials_per_cta;
  j["persistent"] = persistent;
  j["dynamic_smem"] = dynamic_smem;
  j["param_bytes"] = param_bytes;
  json slots_j = json::array();
  for (const ParamSlot& s : slots) {
    slots_j.push_back({{"kind", s.kind},
                       {"index", s.index},
                       {"axis", s.axis},
                       {"offset", s.offset},
                       {"size", s.size},
                       {"dtype", std::string(dtype_name(s.dtype))}});
  }
  j["slots"] = slots_j;
  json ws = json::array();
  for (const WorkspaceSpec& w : workspaces) {
    ws.push_back({{"bytes_per_cta", w.bytes_per_cta},
                  {"bytes_per_row", w.bytes_per_row},
                  {"bytes_fixed", w.bytes_fixed},
                  {"zeroed", w.zeroed}});
  }
  j["workspaces"] = ws;
  json fu = json::array();
  for (const FollowUp& f : follow_ups) {
    fu.push_back({{"symbol", f.symbol},
                  {"block_threads", f.block_threads},
                  {"grid_elements", f.grid_elements}});
  }
  j["follow_ups"] = fu;
  j["aligned_tensors"] = aligned_tensors;
  return j.dump();
}

LaunchPlan LaunchPlan::from_json(const std::string& text) {
  try {
    json j = json::parse(text);
    LaunchPlan p;
    p.symbol = j.at("symbol").get<std::string>();
    p.schedule = j.at("schedule").get<std::string>();
    p.reasons = j.at("reasons").get<std::vector<std::string>>();
    p.block_threads = j.at("block_threads").get<uint32_t>();
    p.rows_per_cta = j.at("rows_per_cta").get<uint32_t>();
    p.row_splits = j.value("row_splits", 1u);
    p.cluster = std::max(1u, j.value("cluster", 1u));
    p.max_ctas_per_sm = j.at("max_ctas_per_sm").get<uint32_t>();
    p.partials_per_cta = j.value("partials_per_cta", p.rows_per_cta);
    p.persistent = j.at("persistent").get<bool>();
    p.dynamic_smem = j.at("dynamic_smem").get<uint32_t>();
    p.param_bytes = j.at("param_bytes").get<uint32_t>();
    for (const json& s : j.at("slots")) {
      ParamSlot slot;
      slot.kind = s.at("kind").get<ParamSlot::Kind>();
      slot.index = s.at("index").get<int32_t>();
      slot.axis = s.at("axis").get<int32_t>();
      slot.offset = s.at("offset").get<uint32_t>();
      slot.size = s.at("size").get<uint32_t>();
      auto t = parse_dtype(s.at("dtype").get<std::string>());
      if (!t) throw Error("unknown dtype in launch plan");
      slot.dtype = *t;
      p.slots.push_back(slot);
    }
    for (const json& w : j.at("workspaces")) {
      p.workspaces.push_back({w.at("bytes_per_cta").get<uint64_t>(),
                              w.value("bytes_per_row", uint64_t{0}),
                              w.value("bytes_fixed", uint64_t{0}), w.value("zeroed", false)});
    }
    for (const json& f : j.at("follow_ups")) {
      p.follow_ups.push_back({f.at("symbol").get<std::string>(),
                              f.at("block_threads").get<uint32_t>(),
                              f.at("grid_elements").get<uint64_t>()});
    }
    p.aligned_tensors = j.at("aligned_tensors").get<std::vector<uint32_t>>();
    return p;
  } catch (const json::exception& e) {
    throw Error(std::string("malformed launch plan: ") + e.what());
  }
}

}  // namespace kdsl
