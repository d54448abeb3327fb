#pragma once
// The weight lifetime of a step (SPEC §6): Z3 frees a site's broadcast weights after its
// forward and broadcasts them again before its backward (FSDP2 reshard_after_forward=True);
// Z2 keeps them from the forward to the site's post-backward. It changes both what a step
// communicates and where a tied parameter's hook site is (SPEC §3 rule 1 is Z3-only).

#include <string_view>

namespace dmuon::plan {

enum class Reshard { z3, z2 };
const char* reshard_name(Reshard r);
/// "z3" | "z2"; throws InputError otherwise.
Reshard parse_reshard(std::string_view s);

}  // namespace dmuon::plan
