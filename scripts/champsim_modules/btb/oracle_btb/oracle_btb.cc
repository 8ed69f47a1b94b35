// ooo_cpu.h cannot be included with CHAMPSIM_MODULE defined at this commit (address.h
// restores the macro inside it); these modules read the core, so build without it.
#undef CHAMPSIM_MODULE

#include "oracle_btb.h"

#include <cassert>

#include "ooo_cpu.h"

std::pair<champsim::address, bool> oracle_btb::btb_prediction(champsim::address ip)
{
  assert(!std::empty(intern_->input_queue));
  const auto& head = intern_->input_queue.front();
  assert(head.ip == ip);
  if (!head.is_branch)
    return {champsim::address{}, false};
  // The traced target (zero for a branch not taken); never "always taken", so the
  // direction comes from the oracle direction predictor.
  return {head.branch_target, false};
}

void oracle_btb::update_btb(champsim::address, champsim::address, bool, uint8_t) {}
