// inferlab_collectives: the collectives a parallel step uses, measured over NCCL on every GPU of this host
// (one process driving all of them, ncclCommInitAll), and the alpha-beta model of sim/parallel.h fitted to
// them (sim/alpha_beta.h, least squares):
//   all-reduce  bf16 sums of 4 KiB .. 256 MiB over all ranks (tensor parallelism's two per layer)
//   send        rank 0 -> rank 1, the same sizes (pipeline parallelism's activations)
// Timing: CUDA events on rank 0's stream around each call (all ranks launched inside one NCCL group),
// 5 warm-up calls, the median of 20. Writes OUT/collectives.csv (collective, ranks, bytes, median_s, p10_s,
// p90_s, bus_gb_s) and OUT/collectives_fit.json (alpha, per-direction bandwidth and the worst residual of
// each fit, the datasheet alpha-beta of the hardware file beside them, provenance).
//   inferlab_collectives --out DIR [--hardware h200-sxm] [--min-bytes 4096] [--max-bytes 268435456]
// Needs at least two GPUs; keep NCCL_NVLS_ENABLE as the machine sets it.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <cuda_runtime.h>
#include <nccl.h>
#include <nlohmann/json.hpp>

#include "inferlab/sim/alpha_beta.h"
#include "inferlab_build_commit.h"
#include "inferlab/sim/hardware.h"
#include "inferlab/sim/parallel.h"

namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "inferlab_collectives: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}
void check(ncclResult_t e, const char* what) {
  if (e != ncclSuccess) {
    std::fprintf(stderr, "inferlab_collectives: %s: %s\n", what, ncclGetErrorString(e));
    std::exit(1);
  }
}

struct Stat {
  double median = 0, p10 = 0, p90 = 0;
};
Stat stat(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  auto at = [&](double q) { return v[std::size_t(q * double(v.size() - 1) + 0.5)]; };
  return {at(0.5), at(0.1), at(0.9)};
}

}  // namespace

int main(int argc, char** argv) {
  std::string out, hw_name = "h200-sxm";
  std::size_t min_bytes = 4096, max_bytes = std::size_t(256) << 20;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "inferlab_collectives: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--out") out = next();
    else if (a == "--hardware") hw_name = next();
    else if (a == "--min-bytes") min_bytes = std::stoull(next());
    else if (a == "--max-bytes") max_bytes = std::stoull(next());
    else {
      std::fprintf(stderr, "usage: inferlab_collectives --out DIR [--hardware ID] [--min-bytes N] [--max-bytes N]\n");
      return 2;
    }
  }
  if (out.empty()) {
    std::fprintf(stderr, "inferlab_collectives: --out DIR is required\n");
    return 2;
  }
  int ranks = 0;
  check(cudaGetDeviceCount(&ranks), "cudaGetDeviceCount");
  if (ranks < 2) {
    std::fprintf(stderr, "inferlab_collectives: %d GPU(s) here; the collectives need at least 2\n", ranks);
    return 1;
  }
  std::vector<int> devs(static_cast<std::size_t>(ranks));
  for (int r = 0; r < ranks; ++r) devs[std::size_t(r)] = r;
  std::vector<ncclComm_t> comms(static_cast<std::size_t>(ranks));
  check(ncclCommInitAll(comms.data(), ranks, devs.data()), "ncclCommInitAll");
  std::vector<cudaStream_t> streams(static_cast<std::size_t>(ranks));
  std::vector<void*> send(static_cast<std::size_t>(ranks)), recv(static_cast<std::size_t>(ranks));
  for (int r = 0; r < ranks; ++r) {
    check(cudaSetDevice(r), "cudaSetDevice");
    check(cudaStreamCreateWithFlags(&streams[std::size_t(r)], cudaStreamNonBlocking), "cudaStreamCreate");
    check(cudaMalloc(&send[std::size_t(r)], max_bytes), "cudaMalloc");
    check(cudaMalloc(&recv[std::size_t(r)], max_bytes), "cudaMalloc");
    check(cudaMemset(send[std::size_t(r)], 0, max_bytes), "cudaMemset");
  }
  check(cudaSetDevice(0), "cudaSetDevice");
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");

  auto time_call = [&](auto&& call) {
    std::vector<double> v;
    for (int rep = 0; rep < 25; ++rep) {
      check(cudaSetDevice(0), "cudaSetDevice");
      check(cudaEventRecord(start, streams[0]), "cudaEventRecord");
      call();
      check(cudaSetDevice(0), "cudaSetDevice");
      check(cudaEventRecord(stop, streams[0]), "cudaEventRecord");
      for (int r = 0; r < ranks; ++r) {
        check(cudaSetDevice(r), "cudaSetDevice");
        check(cudaStreamSynchronize(streams[std::size_t(r)]), "cudaStreamSynchronize");
      }
      float ms = 0;
      check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
      if (rep >= 5) v.push_back(double(ms) * 1e-3);
    }
    return stat(v);
  };

  std::vector<nlohmann::json> rows;
  std::vector<std::pair<double, double>> ar_pts, send_pts;
  std::string csv = "collective,ranks,bytes,median_s,p10_s,p90_s,bus_gb_s\n";
  for (std::size_t bytes = min_bytes; bytes <= max_bytes; bytes *= 4) {
    const std::size_t count = bytes / 2;  // bf16
    const Stat ar = time_call([&] {
      check(ncclGroupStart(), "ncclGroupStart");
      for (int r = 0; r < ranks; ++r)
        check(ncclAllReduce(send[std::size_t(r)], recv[std::size_t(r)], count, ncclBfloat16, ncclSum, comms[std::size_t(r)],
                            streams[std::size_t(r)]),
              "ncclAllReduce");
      check(ncclGroupEnd(), "ncclGroupEnd");
    });
    const Stat sd = time_call([&] {
      check(ncclGroupStart(), "ncclGroupStart");
      check(ncclSend(send[0], count, ncclBfloat16, 1, comms[0], streams[0]), "ncclSend");
      check(ncclRecv(recv[1], count, ncclBfloat16, 0, comms[1], streams[1]), "ncclRecv");
      check(ncclGroupEnd(), "ncclGroupEnd");
    });
    const double p = ranks;
    char line[256];
    std::snprintf(line, sizeof line, "all_reduce,%d,%zu,%.9g,%.9g,%.9g,%.6g\n", ranks, bytes, ar.median, ar.p10, ar.p90,
                  2 * (p - 1) / p * double(bytes) / ar.median / 1e9);
    csv += line;
    std::snprintf(line, sizeof line, "send,2,%zu,%.9g,%.9g,%.9g,%.6g\n", bytes, sd.median, sd.p10, sd.p90,
                  double(bytes) / sd.median / 1e9);
    csv += line;
    ar_pts.push_back({double(bytes), ar.median});
    send_pts.push_back({double(bytes), sd.median});
    std::printf("%10zu B  all-reduce %9.2f us  send %9.2f us\n", bytes, ar.median * 1e6, sd.median * 1e6);
  }

  const inferlab::AlphaBetaFit far = inferlab::fit_all_reduce(ar_pts, ranks);
  const inferlab::AlphaBetaFit fsd = inferlab::fit_send(send_pts);
  nlohmann::json j;
  auto fit_json = [](const inferlab::AlphaBetaFit& f) {
    return nlohmann::json{{"alpha_us", f.alpha_s * 1e6}, {"bandwidth_gb_s_per_direction", f.bandwidth / 1e9},
                          {"worst_residual", f.worst_residual}};
  };
  j["all_reduce"] = fit_json(far);
  j["send"] = fit_json(fsd);
  j["ranks"] = ranks;
  try {
    const inferlab::Hardware hw = inferlab::load_hardware(hw_name);
    const inferlab::Link l = inferlab::interconnect(hw);
    j["datasheet"] = {{"hardware", hw.id}, {"link", l.name}, {"alpha_us", l.latency_s * 1e6},
                      {"bandwidth_gb_s_per_direction", l.bandwidth / 1e9}};
  } catch (const std::exception& e) {
    j["datasheet"] = {{"error", e.what()}};
  }
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  int driver = 0, nccl = 0;
  cudaDriverGetVersion(&driver);
  ncclGetVersion(&nccl);
  char date[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  j["provenance"] = {{"gpu", prop.name}, {"gpus", ranks}, {"cuda_driver", driver}, {"nccl", nccl}, {"date", date},
                     {"commit", INFERLAB_BUILD_COMMIT},
                     {"NCCL_NVLS_ENABLE", std::getenv("NCCL_NVLS_ENABLE") ? std::getenv("NCCL_NVLS_ENABLE") : "unset"},
                     {"method", "one process, ncclCommInitAll; CUDA events on rank 0's stream; 5 warm-up, median of 20"}};
  std::filesystem::create_directories(out);
  std::ofstream(std::filesystem::path(out) / "collectives.csv") << csv;
  std::ofstream(std::filesystem::path(out) / "collectives_fit.json") << j.dump(2) << "\n";
  std::printf("all-reduce fit: alpha %.2f us, %.0f GB/s per direction (worst residual %.0f%%)\n", far.alpha_s * 1e6,
              far.bandwidth / 1e9, 100 * far.worst_residual);
  std::printf("send fit:       alpha %.2f us, %.0f GB/s (worst residual %.0f%%)\n", fsd.alpha_s * 1e6, fsd.bandwidth / 1e9,
              100 * fsd.worst_residual);
  for (auto c : comms) ncclCommDestroy(c);
  return 0;
}
