#include "dmuon/model/kept_modules.hpp"

#include <algorithm>

#include "dmuon/base/error.hpp"

namespace dmuon::model {

ModuleTree kept_modules(const ModuleTree& tree, std::vector<char> kept,
                        const std::function<std::string(const std::string&)>& tie_error,
                        const std::function<void(int, int, ModuleTree&)>& on_module) {
  for (int m : tree.preorder())  // a dropped module's descendants go with it
    if (const int parent = tree.module(m).parent; parent >= 0 && !kept[parent]) kept[m] = 0;
  ModuleTree out(tree.module(ModuleTree::root).type);
  std::vector<int> to(tree.num_modules(), -1);
  to[ModuleTree::root] = ModuleTree::root;
  for (int m : tree.preorder()) {
    if (!kept[m]) continue;
    const Module& mod = tree.module(m);
    if (m != ModuleTree::root) to[m] = out.add_module(to[mod.parent], mod.name, mod.type);
    if (mod.routed_top_k > 0) out.set_routed_top_k(to[m], mod.routed_top_k);
    if (mod.ep_size > 1) out.set_ep_size(to[m], mod.ep_size);
    if (on_module) on_module(m, to[m], out);
  }
  // Holders in the original's order (a module's attributes in order): equal names and order.
  std::vector<int> param_to(tree.num_parameters(), -1);
  for (int m : tree.preorder()) {
    const Module& mod = tree.module(m);
    std::vector<std::size_t> used(tree.num_parameters(), 0);
    for (int pid : mod.params) {
      const Parameter& p = tree.parameter(pid);
      std::size_t k = used[static_cast<std::size_t>(pid)]++;
      const Holder* h = nullptr;
      for (const Holder& cand : p.holders)
        if (cand.module == m && k-- == 0) h = &cand;
      if (!kept[m]) continue;
      if (std::any_of(p.holders.begin(), p.holders.end(),
                      [&](const Holder& x) { return !kept[x.module]; }))
        throw InputError(tie_error(p.name));
      int& q = param_to[static_cast<std::size_t>(pid)];
      if (q < 0)
        q = out.add_parameter(to[m], h->attr, p.shape, p.dtype);
      else
        out.tie_parameter(to[m], h->attr, q);
    }
  }
  out.finalize();
  return out;
}

}  // namespace dmuon::model
