#ifndef BRANCH_ORACLE_H
#define BRANCH_ORACLE_H

// Oracle direction predictor: the traced direction of the branch being predicted,
// which is the instruction at the head of the core's input queue when
// O3_CPU::do_predict_branch runs (zero mispredictions).

#include <cstdint>

#include "address.h"
#include "modules.h"

class oracle : champsim::modules::branch_predictor
{
public:
  using branch_predictor::branch_predictor;

  bool predict_branch(champsim::address ip);
  void last_branch_result(champsim::address ip, champsim::address branch_target, bool taken, uint8_t branch_type);
};

#endif
