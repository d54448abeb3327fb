#include "project/projection_setup.hpp"

#include "bench/step_work_setup.hpp"

#include <fmt/format.h>

#include <stdexcept>

#include "dmuon/base/error.hpp"
#include "dmuon/plan/tp_local_tree.hpp"
#include "dmuon/project/compute_contention.hpp"
#include "dmuon/project/op_cost.hpp"
#include "dmuon/work/flop_convention.hpp"
#include "dmuon/work/throughput.hpp"

namespace dmuon::apps::project {
namespace {

// One TP rank's work (work::TensorParallel): built on the rank's local tree, split as the
// plan's TP-sharded parameters say.
std::optional<work::StepWork> tp_step_work(RunOptions& b, const model::Topology& topo,
                                           kernels::Dtype compute, const plan::Plan& plan) {
  model::Topology local = topo;
  local.tree = plan::tp_local_tree(topo.tree, plan);
  work::TensorParallel tp;
  tp.size = plan.tp.tp;
  tp.sequence = b.workload.sequence_parallel;
  tp.sharded_dim = plan.tp.shard_dim;
  return bench::attach_step_work(b, local, compute, tp);
}

// The TP or CP activation collectives of a step (its micro-steps' forward, recompute and
// backward).
ActivationCollectives activation_collectives(const work::StepWork& w, int accum,
                                             work::OpKind kind) {
  ActivationCollectives a;
  const bool tp = kind == work::OpKind::tp_collective;
  a.size = tp                                    ? w.shape.tp.size
           : kind == work::OpKind::ep_collective ? w.shape.ep.size
                                                 : w.shape.cp.size;
  a.sequence_parallel = tp && w.shape.tp.sequence;
  for (const auto& u : w.units)
    for (const auto* ops : {&u.forward, &u.recompute, &u.backward})
      for (const auto& op : *ops)
        if (op.kind == kind) {
          a.calls += accum;
          a.bytes_per_rank += accum * op.call.bytes_per_rank();
        }
  return a;
}

std::string tp_note(const ActivationCollectives& a) {
  return fmt::format(
      "--tp {}{}: the attention's heads and the MLP's hidden units split over the TP group{}; "
      "{:.0f} TP activation collectives per rank and step ({:.4g} MB sent per rank), each "
      "waited for in the compute stream; not modelled: their overlap with compute (async TP), "
      "their sharing of the link with the DP collectives, MoE and MLA layers under TP",
      a.size, a.sequence_parallel ? " --sequence-parallel" : "",
      a.sequence_parallel ? ", the norms, residuals and embedding over the sequence" : "", a.calls,
      a.bytes_per_rank * 1e-6);
}

std::string ep_note(const ActivationCollectives& a) {
  return fmt::format(
      "--ep {}: each rank holds its 1/{} of every layer's routed experts (E = G: whole, no "
      "collective carries them; E < G: shared by an expert group of G/E ranks, the expert_* "
      "collectives) and exchanges the routed tokens with its EP group of {} consecutive ranks "
      "(torchtitan's ExpertParallel: "
      "token counts, dispatch and combine all-to-alls); {:.0f} EP all-to-alls per rank and step "
      "({:.4g} MB sent per rank), each waited for in the compute stream; routing balanced "
      "(docs/STEP-WORK.md \"Expert parallelism\"); not modelled: the host's wait for the split "
      "sizes, routing imbalance, their sharing of the link with the DP collectives",
      a.size, a.size, a.size, a.calls, a.bytes_per_rank * 1e-6);
}

std::string cp_note(const ActivationCollectives& a) {
  return fmt::format(
      "--cp {}: every sequence split over the CP group (torch's context_parallel: causal load "
      "balance, a ring attention with the all-gather rotation); {:.0f} CP collectives per rank "
      "and step ({:.4g} MB sent per rank), each hidden behind one attention sub-call where it "
      "can be; not modelled: their sharing of the link with the DP collectives; torchtitan's "
      "public CP 4 and CP 8 runs took about 1.6x the projected time (docs/STEP-WORK.md "
      "\"Validation gap\")",
      a.size, a.calls, a.bytes_per_rank * 1e-6);
}

}  // namespace

// --cp C: the CP groups are C ranks of a shard group (torchtitan shards FSDP over the
// data-parallel and context-parallel ranks together; CP next to TP in its mesh, so a CP
// group's ranks are T apart): the shard group must hold whole ones.
void check_cp_world(const RunOptions& o, int world) {
  const int C = o.workload.cp, R = o.plan.partition.replicate, T = o.plan.tp;
  if (C == 1 || world % (R * T) != 0) return;  // a world R x T does not divide: the plan says so
  const int G = world / (R * T);
  if (G % C != 0)
    throw InputError(
        fmt::format("--cp {}: world size {} gives shard groups of {} ranks, not a "
                    "multiple of {} (valid: a world size that is a multiple of {})",
                    C, world, G, C, R * T * C));
}

void require_cp_machine(int cp, const dmuon::project::Machine& machine) {
  // torch's ring attention wraps the CUDA SDPA kernels (flash, efficient, cuDNN) only.
  if (cp > 1 && machine.device == dmuon::project::DeviceKind::cpu)
    throw InputError(
        fmt::format("--cp {}: context parallelism runs on GPUs (torch's ring "
                    "attention wraps the CUDA attention kernels) and machine '{}' is "
                    "a CPU (valid: a GPU machine, or --cp 1)",
                    cp, machine.name));
}

ProjectionSetup make_projection_setup(RunOptions& b, const model::Topology& topo,
                                      const dmuon::project::Machine& machine,
                                      dmuon::project::Symmetry symmetry, const plan::Plan* tp_plan,
                                      const model::ModuleTree* rank_tree) {
  ProjectionSetup s;
  // --seq-len: the model's activation work, in the machine's compute type, and the FLOPs MFU
  // and HFU count.
  const kernels::Dtype compute = dmuon::project::compute_type(machine, b.engine.step);
  require_cp_machine(b.workload.cp, machine);
  if (b.plan.tp > 1 && b.workload.seq_len > 0) {
    if (!tp_plan) throw std::logic_error("make_projection_setup: --tp without a plan");
    if (rank_tree) throw std::logic_error("make_projection_setup: --tp with --ep");
    s.step_work = tp_step_work(b, topo, compute, *tp_plan);
  } else {
    s.step_work = bench::attach_step_work(b, topo, compute, {}, rank_tree);
  }
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
    s.tp_activation =
        activation_collectives(*s.step_work, b.engine.step.accum, work::OpKind::tp_collective);
    s.group_notes.push_back(tp_note(*s.tp_activation));
    s.notes.push_back(s.group_notes.back());
  }
  if (b.plan.ep > 1) {
    s.ep_activation =
        activation_collectives(*s.step_work, b.engine.step.accum, work::OpKind::ep_collective);
    s.group_notes.push_back(ep_note(*s.ep_activation));
    s.notes.push_back(s.group_notes.back());
  }
  if (b.workload.cp > 1) {
    s.cp_activation =
        activation_collectives(*s.step_work, b.engine.step.accum, work::OpKind::cp_collective);
    s.group_notes.push_back(cp_note(*s.cp_activation));
    s.notes.push_back(s.group_notes.back());
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
