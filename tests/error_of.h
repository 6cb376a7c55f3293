#pragma once
// The message of the inferlab::Error that f() throws, or "" when it throws none: bad-input tests
// check that the message names the problem.
#include <string>

#include "inferlab/sim/error.h"

namespace inferlab {

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace inferlab
