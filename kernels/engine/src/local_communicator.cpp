// communicator.h's local group: ranks that are threads of one process. Each collective synchronizes the
// caller's stream, meets the other ranks at a barrier over host copies and copies the result back:
// slow and eager, for the tests of the sharded engine on one GPU.
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>

#include "inferlab/kernels/common/check.h"
#include "inferlab/kernels/engine/communicator.h"
#include "inferlab/kernels/gemm/quant.h"
#include "inferlab/sim/error.h"

namespace inferlab {
namespace {

struct Shared {
  explicit Shared(int n) : size(n), staged(std::size_t(n)) {}
  const int size;
  std::mutex mu;
  std::condition_variable cv;
  int arrived = 0;
  uint64_t generation = 0;
  std::vector<std::vector<uint8_t>> staged;                          // per rank: its contribution
  std::map<std::pair<int, int>, std::deque<std::vector<uint8_t>>> mail;  // (from, to) -> messages in order

  void barrier() {
    std::unique_lock<std::mutex> lock(mu);
    const uint64_t g = generation;
    if (++arrived == size) {
      arrived = 0;
      ++generation;
      cv.notify_all();
      return;
    }
    cv.wait(lock, [&] { return generation != g; });
  }
};

std::vector<uint8_t> download(const void* d, int64_t bytes, cudaStream_t s) {
  std::vector<uint8_t> h(static_cast<std::size_t>(bytes));
  INFERLAB_CUDA_CHECK(cudaMemcpyAsync(h.data(), d, std::size_t(bytes), cudaMemcpyDeviceToHost, s));
  INFERLAB_CUDA_CHECK(cudaStreamSynchronize(s));
  return h;
}

void upload(void* d, const void* h, int64_t bytes, cudaStream_t s) {
  INFERLAB_CUDA_CHECK(cudaMemcpyAsync(d, h, std::size_t(bytes), cudaMemcpyHostToDevice, s));
  INFERLAB_CUDA_CHECK(cudaStreamSynchronize(s));
}

class LocalCommunicator : public Communicator {
 public:
  LocalCommunicator(std::shared_ptr<Shared> g, int rank) : g_(std::move(g)), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return g_->size; }
  std::string name() const override { return "local"; }
  bool capturable() const override { return false; }

  void all_reduce_sum_bf16(void* data, int64_t count, cudaStream_t s) override {
    g_->staged[std::size_t(rank_)] = download(data, count * 2, s);
    g_->barrier();
    std::vector<uint16_t> sum(static_cast<std::size_t>(count));
    for (int64_t i = 0; i < count; ++i) {
      float acc = 0.f;
      for (int r = 0; r < g_->size; ++r) {
        uint16_t b;
        std::memcpy(&b, g_->staged[std::size_t(r)].data() + 2 * i, 2);
        acc += bf16_value(b);
      }
      sum[std::size_t(i)] = bf16_bits(acc);
    }
    g_->barrier();  // every rank has read every contribution
    upload(data, sum.data(), count * 2, s);
  }

  void all_gather(const void* send, void* recv, int64_t bytes, cudaStream_t s) override {
    g_->staged[std::size_t(rank_)] = download(send, bytes, s);
    g_->barrier();
    for (int r = 0; r < g_->size; ++r)
      upload(static_cast<uint8_t*>(recv) + r * bytes, g_->staged[std::size_t(r)].data(), bytes, s);
    g_->barrier();
  }

  void send(const void* data, int64_t bytes, int peer, cudaStream_t s) override {
    check_peer(peer);
    std::vector<uint8_t> h = download(data, bytes, s);
    std::lock_guard<std::mutex> lock(g_->mu);
    g_->mail[{rank_, peer}].push_back(std::move(h));
    g_->cv.notify_all();
  }

  void recv(void* data, int64_t bytes, int peer, cudaStream_t s) override {
    check_peer(peer);
    std::vector<uint8_t> h;
    {
      std::unique_lock<std::mutex> lock(g_->mu);
      auto& box = g_->mail[{peer, rank_}];
      g_->cv.wait(lock, [&] { return !box.empty(); });
      h = std::move(box.front());
      box.pop_front();
    }
    if (int64_t(h.size()) != bytes)
      throw Error("local communicator: rank " + std::to_string(rank_) + " expected " + std::to_string(bytes) +
                  " bytes from rank " + std::to_string(peer) + ", got " + std::to_string(h.size()));
    upload(data, h.data(), bytes, s);
  }

 private:
  void check_peer(int peer) const {
    if (peer < 0 || peer >= g_->size || peer == rank_)
      throw Error("local communicator: rank " + std::to_string(rank_) + " has no peer " + std::to_string(peer));
  }
  std::shared_ptr<Shared> g_;
  int rank_;
};

}  // namespace

std::vector<std::unique_ptr<Communicator>> local_group(int size) {
  if (size < 1) throw Error("local_group: size must be at least 1, got " + std::to_string(size));
  auto shared = std::make_shared<Shared>(size);
  std::vector<std::unique_ptr<Communicator>> out;
  for (int r = 0; r < size; ++r) out.push_back(std::make_unique<LocalCommunicator>(shared, r));
  return out;
}

}  // namespace inferlab
