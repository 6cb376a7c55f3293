#pragma once
// The collectives a sharded engine (engine.h EngineOptions::parallel) issues on its stream:
//   tensor parallelism   all_reduce_sum of the activations after o_proj and down_proj (and the vocabulary-
//                        parallel embedding), all_gather of the logit slices;
//   pipeline parallelism send / recv of the residual stream between consecutive stages.
// Two implementations:
//   NCCL (nccl_communicator.h, library inferlab_engine_nccl): one rank per GPU, the calls enqueued on the
//     stream (CUDA-graph capturable);
//   local_group (below): ranks that are threads of one process, on one GPU or several, host-synchronized —
//     the tests of the sharding on a single GPU, where NCCL refuses two ranks on one device. Not
//     capturable: an engine on it runs eagerly.
// Every rank of a group must issue the same collectives in the same order (the engines' steps do).
// Plain C++ header.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

typedef struct CUstream_st* cudaStream_t;  // as cuda_runtime.h declares it: this header needs no CUDA include

namespace inferlab {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string name() const = 0;
  virtual bool capturable() const = 0;  // may be issued inside CUDA graph capture
  // data[count] bf16, summed over the ranks in place (every rank ends with the same bits).
  virtual void all_reduce_sum_bf16(void* data, int64_t count, cudaStream_t stream) = 0;
  // recv[size()][bytes]: every rank's `bytes` bytes of send, in rank order.
  virtual void all_gather(const void* send, void* recv, int64_t bytes, cudaStream_t stream) = 0;
  virtual void send(const void* data, int64_t bytes, int peer, cudaStream_t stream) = 0;
  virtual void recv(void* data, int64_t bytes, int peer, cudaStream_t stream) = 0;
};

// `size` communicators over shared host state, one per thread (member i is rank i). The group must
// outlive its members' use. Sums are taken in fp32 in rank order and rounded once to bf16.
std::vector<std::unique_ptr<Communicator>> local_group(int size);

}  // namespace inferlab
