#pragma once
// The smallest tree with two hook sites and a parameter of each storage, hand-countable:
// layers.0 {w [4,4], b [4]}, layers.1 {w [4,4]}; ids in model order (the w's are Muon
// matrices, b a vector). Shared by the route and reduce-dtype byte tests.

#include "dmuon/model/module_tree.hpp"

namespace dmuon::test {

struct TwoLayerTree {
  model::ModuleTree tree{"M"};
  int w0 = -1, b0 = -1, w1 = -1;
  TwoLayerTree() {
    const int list = tree.add_module(0, "layers", "ModuleList");
    const int l0 = tree.add_module(list, "0", "L");
    w0 = tree.add_parameter(l0, "w", {4, 4});
    b0 = tree.add_parameter(l0, "b", {4});
    w1 = tree.add_parameter(tree.add_module(list, "1", "L"), "w", {4, 4});
    tree.finalize();
  }
};

}  // namespace dmuon::test
