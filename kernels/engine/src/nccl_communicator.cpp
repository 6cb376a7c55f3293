// nccl_communicator.h: communicator.h on NCCL. libnccl is opened at the first use (dlopen of
// libnccl.so.2 on the library path), not linked: the binaries that never build a communicator run where
// NCCL is absent, and the one that does says so by name.
#include "inferlab/kernels/engine/nccl_communicator.h"

#include <dlfcn.h>

#include <cstring>
#include <mutex>
#include <string>
#include <type_traits>

#include <cuda_runtime.h>
#include <nccl.h>

#include "inferlab/sim/error.h"

namespace inferlab {
namespace {

// The entry points used, resolved once from libnccl.so.2 (signatures from nccl.h).
struct Nccl {
  decltype(&ncclGetErrorString) error = nullptr;
  decltype(&ncclGetVersion) version = nullptr;
  decltype(&ncclGetUniqueId) unique_id = nullptr;
  decltype(&ncclCommInitRank) init = nullptr;
  decltype(&ncclCommDestroy) destroy = nullptr;
  decltype(&ncclAllReduce) all_reduce = nullptr;
  decltype(&ncclAllGather) all_gather = nullptr;
  decltype(&ncclSend) send = nullptr;
  decltype(&ncclRecv) recv = nullptr;
};

const Nccl& nccl() {
  static Nccl n;
  static std::string failure;
  static std::once_flag once;
  std::call_once(once, [] {
    void* lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_GLOBAL);
    if (!lib) {
      failure = std::string("NCCL is not installed where the loader looks (libnccl.so.2: ") + dlerror() +
                "); put its lib folder on LD_LIBRARY_PATH";
      return;
    }
    auto get = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
      if (!fn && failure.empty()) failure = std::string("libnccl.so.2 has no ") + name;
    };
    get(n.error, "ncclGetErrorString");
    get(n.version, "ncclGetVersion");
    get(n.unique_id, "ncclGetUniqueId");
    get(n.init, "ncclCommInitRank");
    get(n.destroy, "ncclCommDestroy");
    get(n.all_reduce, "ncclAllReduce");
    get(n.all_gather, "ncclAllGather");
    get(n.send, "ncclSend");
    get(n.recv, "ncclRecv");
  });
  if (!failure.empty()) throw Error(failure);
  return n;
}

void check(ncclResult_t r, const char* what) {
  if (r != ncclSuccess) throw Error(std::string("NCCL: ") + what + ": " + nccl().error(r));
}

static_assert(sizeof(ncclUniqueId) == sizeof(NcclId), "ncclUniqueId is 128 bytes");

class NcclCommunicator : public Communicator {
 public:
  NcclCommunicator(ncclComm_t c, int rank, int size) : comm_(c), rank_(rank), size_(size) {}
  ~NcclCommunicator() override { nccl().destroy(comm_); }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return "nccl"; }
  bool capturable() const override { return true; }
  void all_reduce_sum_bf16(void* data, int64_t count, cudaStream_t s) override {
    check(nccl().all_reduce(data, data, std::size_t(count), ncclBfloat16, ncclSum, comm_, s), "all-reduce");
  }
  void all_gather(const void* send, void* recv, int64_t bytes, cudaStream_t s) override {
    check(nccl().all_gather(send, recv, std::size_t(bytes), ncclUint8, comm_, s), "all-gather");
  }
  void send(const void* data, int64_t bytes, int peer, cudaStream_t s) override {
    check(nccl().send(data, std::size_t(bytes), ncclUint8, peer, comm_, s), "send");
  }
  void recv(void* data, int64_t bytes, int peer, cudaStream_t s) override {
    check(nccl().recv(data, std::size_t(bytes), ncclUint8, peer, comm_, s), "recv");
  }

 private:
  ncclComm_t comm_;
  int rank_, size_;
};

}  // namespace

NcclId nccl_unique_id() {
  ncclUniqueId u;
  check(nccl().unique_id(&u), "ncclGetUniqueId");
  NcclId id;
  std::memcpy(id.data(), &u, sizeof u);
  return id;
}

std::unique_ptr<Communicator> nccl_communicator(const NcclId& id, int rank, int size) {
  if (size < 1 || rank < 0 || rank >= size)
    throw Error("nccl_communicator: rank " + std::to_string(rank) + " of " + std::to_string(size));
  ncclUniqueId u;
  std::memcpy(&u, id.data(), sizeof u);
  ncclComm_t c = nullptr;
  check(nccl().init(&c, size, u, rank), "ncclCommInitRank");
  return std::make_unique<NcclCommunicator>(c, rank, size);
}

std::string nccl_version() {
  int v = 0;
  check(nccl().version(&v), "ncclGetVersion");
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
}

}  // namespace inferlab
