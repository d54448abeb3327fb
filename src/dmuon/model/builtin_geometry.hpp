#pragma once
// The geometry of each built-in topology (topology.cpp), from its resolved dimensions. Real
// presets take their values from the models' published configs (cited in topology.cpp's preset
// table); the toy topologies use fixed rules stated here. A dimension combination that cannot
// form a geometry (a width not a multiple of the head width) is an InputError naming both.

#include <cstdint>
#include <functional>
#include <string_view>

#include "dmuon/model/geometry.hpp"

namespace dmuon::model::builtin {

/// Value of a resolved dimension of the topology being built.
using DimLookup = std::function<std::int64_t(std::string_view)>;

ModelGeometry sequential_geometry(const DimLookup& d);
ModelGeometry vla_geometry(const DimLookup& d);
ModelGeometry moe_geometry(const DimLookup& d);
ModelGeometry nested_geometry(const DimLookup& d);
ModelGeometry llm_geometry(const DimLookup& d);
ModelGeometry moe_llm_geometry(const DimLookup& d);

/// Heads of `width` split into heads of `head_dim` (InputError unless it divides).
std::int64_t heads_of(std::int64_t width, std::int64_t head_dim, const char* width_key,
                      const char* topology);

}  // namespace dmuon::model::builtin
