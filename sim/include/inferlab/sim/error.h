#pragma once
// The one exception type for bad input: a message that names the problem, meant for the user.
// The CLI prints it and exits non-zero; library code never prints.
#include <stdexcept>
#include <string>

namespace inferlab {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace inferlab
