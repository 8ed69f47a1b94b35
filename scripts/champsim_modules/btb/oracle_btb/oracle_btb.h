#ifndef BTB_ORACLE_BTB_H
#define BTB_ORACLE_BTB_H

// Oracle BTB: the traced target of the branch at the head of the core's input queue.

#include <cstdint>
#include <utility>

#include "address.h"
#include "modules.h"

class oracle_btb : champsim::modules::btb
{
public:
  using btb::btb;

  std::pair<champsim::address, bool> btb_prediction(champsim::address ip);
  void update_btb(champsim::address ip, champsim::address branch_target, bool taken, uint8_t branch_type);
};

#endif
