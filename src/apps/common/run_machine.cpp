#include "common/run_machine.hpp"

#include "common/config_dir.hpp"

namespace dmuon::apps {

::dmuon::project::Machine load_run_machine(const RunOptions& o) {
  const std::string dir = config_dir().empty() ? std::string() : config_dir() + "/machines";
  return ::dmuon::project::with_attention_kernel(
      ::dmuon::project::load_machine(o.projection.machine, dir), o.workload.attention_kernel);
}

}  // namespace dmuon::apps
