// ooo_cpu.h cannot be included with CHAMPSIM_MODULE defined at this commit (address.h
// restores the macro inside it); these modules read the core, so build without it.
#undef CHAMPSIM_MODULE

#include "oracle.h"

#include <cassert>

#include "ooo_cpu.h"

bool oracle::predict_branch(champsim::address ip)
{
  assert(!std::empty(intern_->input_queue));
  const auto& head = intern_->input_queue.front();
  assert(head.ip == ip);
  return head.is_branch && head.branch_taken;
}

void oracle::last_branch_result(champsim::address, champsim::address, bool, uint8_t) {}
