#pragma once
// Warnings about input that is read with an assumption or partly counted (a model config's field
// the model does not represent, say). Library code never prints: it notes them here, once per
// distinct message, and the CLI shows them on stderr while a run records them in its provenance.
#include <string>
#include <vector>

namespace inferlab {

void note_warning(const std::string& message);
// The warnings noted since the last call, in the order first noted; the list is emptied.
std::vector<std::string> drain_warnings();

}  // namespace inferlab
