#pragma once
// communicator.h over NCCL (library inferlab_engine_nccl, built when the CUDA toolkit has NCCL): one rank
// per GPU, every call enqueued on the given stream and capturable into CUDA graphs. all_reduce_sum_bf16 is
// ncclAllReduce (bf16, sum), all_gather ncclAllGather, send / recv ncclSend / ncclRecv. Keep
// NCCL_NVLS_ENABLE as the machine sets it. Plain C++ header.
#include <array>
#include <memory>

#include "inferlab/kernels/engine/communicator.h"

namespace inferlab {

using NcclId = std::array<char, 128>;  // ncclUniqueId's bytes
NcclId nccl_unique_id();               // once per communicator, on one thread, shared with every rank
// Joins the communicator `id` as `rank` of `size` on the current CUDA device; blocks until every rank has
// joined (call it from each rank's thread or process at once). Throws inferlab::Error naming NCCL's error.
std::unique_ptr<Communicator> nccl_communicator(const NcclId& id, int rank, int size);
std::string nccl_version();

}  // namespace inferlab
