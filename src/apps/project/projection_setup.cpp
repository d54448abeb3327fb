#include "project/projection_setup.hpp"

#include "bench/step_work_setup.hpp"

#include <fmt/format.h>

#include "dmuon/project/compute_contention.hpp"
#include "dmuon/project/op_cost.hpp"
#include "dmuon/work/flop_convention.hpp"
#include "dmuon/work/throughput.hpp"

namespace dmuon::apps::project {

ProjectionSetup make_projection_setup(RunOptions& b, const model::Topology& topo,
                                      const dmuon::project::Machine& machine,
                                      dmuon::project::Symmetry symmetry) {
  ProjectionSetup s;
  // --seq-len: the model's activation work, in the machine's compute type, and the FLOPs MFU
  // and HFU count.
  const kernels::Dtype compute = dmuon::project::compute_type(machine, b.engine.step);
  s.step_work = bench::attach_step_work(b, topo, compute);
  if (!b.workload.seq_len_note.empty()) s.notes.push_back(b.workload.seq_len_note);
  auto& po = s.options;
  po.engine = b.engine;
  po.symmetry = symmetry;
  // On a GPU machine, said once: whether compute slows while collectives run (docs/
  // PROJECTION.md "Compute under communication"), either way, and what the FSDP groups are.
  if (machine.device == dmuon::project::DeviceKind::gpu) {
    s.machine_notes.push_back(
        dmuon::project::reference_held_sms(machine) > 0
            ? fmt::format("compute under communication: a running collective holds {} (NVLink) / "
                          "{} (network) of the {} SMs; compute runs on the rest",
                          machine.intra.collective_sms, machine.inter.collective_sms,
                          machine.compute.sm_count)
            : fmt::format("not modelled: compute slowed by running collectives (machine '{}' "
                          "gives no network collective_sms)",
                          machine.name));
    // StepSpec::fsdp2, which project() sets on a GPU machine.
    s.machine_notes.push_back(
        "FSDP groups as torchtitan's FSDP2: its all-gather copy-out and reduce-scatter copy-in "
        "priced, one reduce-scatter input in flight");
    s.notes.insert(s.notes.end(), s.machine_notes.begin(), s.machine_notes.end());
  }
  if (!s.step_work) return s;
  if (!s.step_work->note.empty()) s.notes.push_back(s.step_work->note);
  for (const auto& n : s.step_work->not_modelled) s.notes.push_back("not modelled: " + n);
  if (b.plan.tp > 1) {
    s.tp_note = fmt::format(
        "not modelled: sequence parallelism under --tp {}: each TP rank runs its DP group's whole "
        "activation work (attention, norms, loss), unsplit; MFU is understated by that much",
        b.plan.tp);
    s.notes.push_back(s.tp_note);
  }
  const auto convention = b.workload.flops;
  const auto flops = work::model_flops_per_token(topo, b.workload.seq_len);
  if (flops.has_geometry || convention == work::FlopConvention::six_n)
    po.model_flops_per_token = flops.of(convention);
  else
    s.flops_note = fmt::format("--flops {} needs a model geometry: MFU counts 6N",
                               work::flop_convention_name(convention));
  po.hardware_flops_per_token = work::hardware_flops_per_token(*s.step_work);
  po.activations = dmuon::project::activation_memory(*s.step_work);
  if (!s.flops_note.empty()) s.notes.push_back(s.flops_note);
  return s;
}

}  // namespace dmuon::apps::project
