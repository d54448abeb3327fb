#pragma once
// The machine model a run's options name: --machine (a name in configs/machines or a file),
// costed with the --attention-kernel it names. Shared by dmuon_project and dmuon_advise so both
// price the same step.

#include "dmuon/project/machine_model.hpp"
#include "options/run_options.hpp"

namespace dmuon::apps {

/// InputError on an unknown machine, a bad file, or a kernel the machine gives no rates for.
::dmuon::project::Machine load_run_machine(const RunOptions& o);

}  // namespace dmuon::apps
