#pragma once
// A GPU as the model sees it: peak rates per dtype and unit, memory capacity and bandwidth, caches,
// interconnect. Loaded from data/hardware/<id>.json (datasheet figures, each with its source).
//
// Tensor-core peaks are the DENSE figures. The 2:4-sparse figures NVIDIA quotes beside them (2x)
// are kept in a separate, labelled table and are only used when an operator is 2:4 sparse:
// predicting a dense GEMM from the sparse figure halves its time, a known bug in peer tools.
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "inferlab/sim/dtype.h"

namespace inferlab {

// Per-SM, per-clock ceilings of the SM's pipes and the latencies and floors the refined model
// (sim/roofline.h, FIDELITY) needs. A hardware file may give them as "pipes": {...}; missing fields
// are derived from the datasheet figures (tensor and FP32 rates over SMs x boost clock) and from
// the CUDA C++ Programming Guide's throughput table for compute capability 8.x/9.0 (MUFU 16,
// conversions 16, integer/logic 64 lanes per SM per clock; 4 warp schedulers), each labelled in
// `sources`. A measured ceilings file (`inferlab ceilings`) overrides them.
struct PipeCeilings {
  double sm_clock_hz = 0;      // SM clock of a kernel that does not saturate the tensor cores
  double tensor_clock_hz = 0;  // SM clock under sustained tensor-core load (power-limited)
  double tensor_flops_per_clk = 0;  // dense 16-bit tensor FLOP per SM per clock (fp8: twice), by mma.sync
  // The same by wgmma (Hopper's warpgroup products, the rate its datasheet peak is quoted at), and the SM clock while
  // every SM issues them back to back on random operands: power-limited, and lower than under mma.sync (the H200:
  // 4090-4100 FLOP a clock at 1.58-1.62 GHz against mma.sync's 2727 at 1.81; scripts/probes/wgmma_rate.cu).
  double wgmma_flops_per_clk = 0;
  double wgmma_clock_hz = 0;
  // The same clock against how busy the tensor pipe is (its share of the time, 0..1), measured with softmax-like
  // CUDA-core work between the products (`inferlab ceilings`; the H200: 1.74-1.82 GHz up to a share of 0.62, 1.65 at
  // 0.75, 1.57 at 0.98): (share, Hz) points by rising share. Not charged by the model: the flash kernels' own clocks
  // do not follow it (the overlapped kernel at head dim 96, 61% busy, runs at 1.58 GHz where these points hold 1.78;
  // kernels/attention/NOTES.md), so a wgmma-clocked launch runs at wgmma_clock_hz.
  std::vector<std::pair<double, double>> wgmma_clock_by_duty;
  double fp32_lanes = 0;       // FP32 FMA/ADD/MUL results per SM per clock
  double alu_lanes = 0;        // integer/logic/compare/select results per SM per clock
  double mufu_lanes = 0;       // special-function (ex2, rcp, rsqrt) results per SM per clock
  double cvt_lanes = 0;        // conversions (F2F, F2FP pack, I2F) per SM per clock
  double issue_per_clk = 0;    // warp instructions issued per SM per clock (one per scheduler)
  double dependent_issue_cycles = 0;  // a warp's issue interval when each instruction waits on the last
  double smem_latency_cycles = 0;     // a dependent shared-memory load
  double mufu_latency_cycles = 0;     // a dependent MUFU result
  double dram_latency_s = 0;   // one dependent global-memory round trip (pointer chase)
  double l2_latency_cycles = 0;  // one dependent global load that hits in L2
  double l2_atomics_per_clk = 0;  // fp32 atomic adds to distinct addresses the whole L2 completes per SM clock
  double l2_red_vector_per_clk = 0;  // red.global.add.v4.f32 (four fp32 sums each) in the Hopper weight-only kernels'
                                     // layout the whole L2 completes per SM clock
  double sm_bandwidth = 0;     // bytes/s one SM can pull from HBM
  double read_bandwidth = 0;   // bytes/s the whole GPU reads (read-only streams); 0: memory_bandwidth
  double l2_bandwidth = 0;     // bytes/s the whole GPU reads from L2 (L2-resident data)
  // bytes/s ONE thread's bulk copies (cp.async.bulk, Hopper's copy engine) pull into shared memory, from DRAM and
  // from L2: a copying thread's copies are processed one after another, so the rate is the thread's, not the SM's
  // (two blocks an SM pull twice); more copying threads in one block were not seen to raise it (the wgmma_tma
  // kernel's four producers, kernels/gemm/NOTES.md r6), so the model takes it as a block's.
  double bulk_copy_dram_bandwidth = 0;
  double bulk_copy_l2_bandwidth = 0;
  double launch_floor_eager_s = 0;  // an event-timed launch of a near-empty kernel
  double launch_floor_graph_s = 0;  // the same kernel as a node of a CUDA graph
  // An event-timed call of the library's GEMM on a tiny problem held in L2 (cuBLAS bf16; cuBLASLt fp8): what a
  // library launch costs beyond its work. Not measured: the eager floor.
  double launch_floor_library_s = 0;
  double launch_floor_library_fp8_s = 0;
  std::map<std::string, std::string> sources;  // field -> "datasheet: ...", "derived: ...", "measured: ..."
};

struct Hardware {
  std::string id;            // file stem: "h100-sxm-80gb"
  std::string name;          // "NVIDIA H100 SXM5 80GB"
  std::string architecture;  // "Hopper GH100"
  int sm_count = 0;
  double boost_clock_mhz = 0;
  std::string memory_type;
  double memory_bytes = 0;     // capacity a program can allocate into (nvidia-smi memory.total)
  std::string memory_label;    // marketing label, "80 GB"
  double memory_bandwidth = 0; // bytes/s, datasheet
  double l2_bytes = 0;
  double smem_per_sm_bytes = 0;
  std::map<std::string, double> tensor_dense;   // FLOP/s by tensor_peak_key ("bf16", "fp8", ...)
  std::map<std::string, double> tensor_sparse;  // 2:4 structured sparsity, FLOP/s; labelled apart
  std::map<std::string, double> vector;         // non-tensor FLOP/s: "fp32", "fp64" (, "fp16")
  double nvlink_bandwidth = 0;  // bytes/s, bidirectional total per GPU; 0 when absent
  double pcie_bandwidth = 0;    // bytes/s, bidirectional total
  double nvlink_latency_s = 0;  // per step of a ring collective (alpha); 0 when absent
  std::string interconnect_source = "datasheet";  // or the measured file that replaced the NVLink figures
  double pcie_latency_s = 0;
  double launch_overhead_s = 0; // per kernel launch, added to every op's roofline time
  PipeCeilings pipes;           // per-pipe ceilings, latencies and floors of the refined model
  std::vector<std::string> device_names;  // CUDA device names of this GPU
  std::string ceilings_source = "datasheet";  // or "measured <file> (<date>)": shown beside every number
  std::string ceilings_file;    // the measured-ceilings file overlaid; empty: datasheet figures
  std::string origin;           // the file it was loaded from
  nlohmann::json sources;       // where each figure comes from

  // Dense peak FLOP/s of a matrix product whose operands are of type t (tensor cores; fp32 uses the
  // FP32 vector units). Throws inferlab::Error if the hardware has no such rate.
  double matmul_peak(DType t) const;
  // 2:4-sparse tensor-core peak (FLOP/s counted as the dense equivalent, as NVIDIA quotes them).
  double sparse_matmul_peak(DType t) const;
  // Non-tensor peak used by elementwise work (norms, softmax, activations): FP32 FMA rate.
  double vector_peak() const;
  // Ridge point of the roofline in FLOP/byte: matmul_peak(t) / memory_bandwidth.
  double ridge(DType t) const { return matmul_peak(t) / memory_bandwidth; }
};

// Which ceilings a prediction uses:
//   datasheet  the hardware file's figures. The default: every GPU is described the same way, so a
//              comparison across GPUs compares the GPUs (only the H100 has a measured file; mixing
//              would make an H200 prefill 29% faster than an H100's on the same GH100 compute).
//   measured   overlays the measured-ceilings file beside the hardware file, <stem>.measured.json
//              (written by `inferlab ceilings` on that GPU: copy bandwidth, tensor-core and FP32
//              peaks, launch overhead); an error when there is none. The file is looked up beside
//              the hardware file that was loaded, never by id: a user's own hardware file keeps
//              its own figures even when it copies a shipped GPU's id.
//   auto       measured where that file exists, datasheet elsewhere (`run` refuses a spec whose
//              points would mix the two).
//   a path     overlays that measured-ceilings file, whose id must be the hardware's.
enum class CeilingsMode { automatic, datasheet, measured };
CeilingsMode parse_ceilings_mode(const std::string& s);
// The values `ceilings` takes, for help texts.
inline constexpr const char kCeilingsHelp[] = "datasheet (default), measured, auto, or the path of a measured-ceilings file";

Hardware hardware_from_json(const nlohmann::json& j, const std::string& origin);
// Overlays a measured-ceilings file on a datasheet description.
void apply_measured(Hardware& h, const nlohmann::json& measured, const std::string& origin);
// By id (case-insensitive, a file stem under data/hardware) or by path to a .json file. An unknown
// name throws inferlab::Error listing the known ids; `measured` without a measured file throws too.
Hardware load_hardware(const std::string& name_or_path, CeilingsMode mode = CeilingsMode::datasheet);
// The same with the ceilings named as a spec or the CLI name them: datasheet, measured, auto or a path.
Hardware load_hardware(const std::string& name_or_path, const std::string& ceilings);
std::vector<std::string> known_hardware();
// The hardware id whose "device_names" lists this CUDA device name ("NVIDIA H100 80GB HBM3"), or "".
std::string hardware_for_device(const std::string& device_name);
// Where `inferlab ceilings` files the measurement of a shipped GPU: data/hardware/<id>.measured.json.
std::filesystem::path measured_ceilings_path(const std::string& id);
// The measured-ceilings file that belongs to a hardware file: <its folder>/<its stem>.measured.json.
std::filesystem::path measured_ceilings_beside(const std::filesystem::path& hardware_file);

}  // namespace inferlab
