#include "inferlab/sim/hardware.h"

#include <algorithm>
#include <cctype>
#include <filesystem>

#include "inferlab/sim/error.h"
#include "inferlab/sim/io.h"
#include "inferlab/sim/json_fields.h"
#include "inferlab/sim/paths.h"

namespace inferlab {
namespace fs = std::filesystem;
namespace jf = json_fields;
namespace {

constexpr double kTera = 1e12, kGiga = 1e9, kMiB = 1024.0 * 1024.0, kKiB = 1024.0;

std::map<std::string, double> rate_table(const nlohmann::json& j, const std::string& key, const std::string& where,
                                         bool required) {
  std::map<std::string, double> out;
  const auto* t = jf::find(j, key);
  if (!t) {
    if (required) throw Error(where + ": missing table '" + key + "'");
    return out;
  }
  if (!t->is_object()) throw Error(where + ": '" + key + "' must be an object of TFLOP/s by dtype");
  for (const auto& [k, v] : t->items()) {
    if (!v.is_number() || !(v.get<double>() > 0))
      throw Error(where + ": " + key + "." + k + " must be a positive number of TFLOP/s");
    out[k] = v.get<double>() * kTera;
  }
  return out;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

std::string keys_of(const std::map<std::string, double>& m) {
  std::vector<std::string> k;
  for (const auto& [name, _] : m) k.push_back(name);
  return k.empty() ? "none" : join(k, ", ");
}

// "pipes" fields: JSON key, unit scale to SI, member.
struct PipeField {
  const char* key;
  double scale;
  double PipeCeilings::*member;
};
constexpr PipeField kPipeFields[] = {
    {"sm_clock_mhz", 1e6, &PipeCeilings::sm_clock_hz},
    {"tensor_clock_mhz", 1e6, &PipeCeilings::tensor_clock_hz},
    {"tensor_flops_per_clk", 1, &PipeCeilings::tensor_flops_per_clk},
    {"wgmma_flops_per_clk", 1, &PipeCeilings::wgmma_flops_per_clk},
    {"wgmma_clock_mhz", 1e6, &PipeCeilings::wgmma_clock_hz},
    {"fp32_lanes", 1, &PipeCeilings::fp32_lanes},
    {"alu_lanes", 1, &PipeCeilings::alu_lanes},
    {"mufu_lanes", 1, &PipeCeilings::mufu_lanes},
    {"cvt_lanes", 1, &PipeCeilings::cvt_lanes},
    {"issue_per_clk", 1, &PipeCeilings::issue_per_clk},
    {"dependent_issue_cycles", 1, &PipeCeilings::dependent_issue_cycles},
    {"smem_latency_cycles", 1, &PipeCeilings::smem_latency_cycles},
    {"mufu_latency_cycles", 1, &PipeCeilings::mufu_latency_cycles},
    {"dram_latency_us", 1e-6, &PipeCeilings::dram_latency_s},
    {"l2_latency_cycles", 1, &PipeCeilings::l2_latency_cycles},
    {"l2_atomics_per_clk", 1, &PipeCeilings::l2_atomics_per_clk},
    {"l2_red_vector_per_clk", 1, &PipeCeilings::l2_red_vector_per_clk},
    {"sm_bandwidth_gb_s", kGiga, &PipeCeilings::sm_bandwidth},
    {"read_bandwidth_gb_s", kGiga, &PipeCeilings::read_bandwidth},
    {"l2_bandwidth_gb_s", kGiga, &PipeCeilings::l2_bandwidth},
    {"bulk_copy_dram_gb_s", kGiga, &PipeCeilings::bulk_copy_dram_bandwidth},
    {"bulk_copy_l2_gb_s", kGiga, &PipeCeilings::bulk_copy_l2_bandwidth},
    {"launch_floor_eager_us", 1e-6, &PipeCeilings::launch_floor_eager_s},
    {"launch_floor_graph_us", 1e-6, &PipeCeilings::launch_floor_graph_s},
    {"launch_floor_library_us", 1e-6, &PipeCeilings::launch_floor_library_s},
    {"launch_floor_library_fp8_us", 1e-6, &PipeCeilings::launch_floor_library_fp8_s},
};

// Reads the fields present in `j` (a "pipes" object) over `p`, labelling each with `label` unless
// the object's own "sources" names it.
void read_pipes(PipeCeilings& p, const nlohmann::json& j, const std::string& where, const std::string& label) {
  if (!j.is_object()) throw Error(where + ": 'pipes' must be an object");
  const auto* src = jf::find(j, "sources");
  for (const auto& f : kPipeFields) {
    auto v = jf::opt_number(j, f.key, where + ": pipes");
    if (!v) continue;
    if (!(*v > 0)) throw Error(where + ": pipes." + f.key + " must be positive");
    p.*f.member = *v * f.scale;
    const std::string s = src ? jf::string(*src, f.key, where + ": pipes.sources") : "";
    p.sources[f.key] = s.empty() ? label : s;
  }
  // wgmma_clock_by_duty: [[share of the time the tensor pipe is busy, MHz], ...] by rising share.
  if (const auto* t = jf::find(j, "wgmma_clock_by_duty")) {
    const std::string what = where + ": pipes.wgmma_clock_by_duty";
    if (!t->is_array() || t->empty()) throw Error(what + " must be a non-empty array of [duty, MHz] pairs");
    std::vector<std::pair<double, double>> pts;
    for (const auto& e : *t) {
      if (!e.is_array() || e.size() != 2 || !e[0].is_number() || !e[1].is_number())
        throw Error(what + ": every entry must be a [duty, MHz] pair of numbers");
      const double d = e[0].get<double>(), mhz = e[1].get<double>();
      if (!(d > 0 && d <= 1)) throw Error(what + ": a duty must lie in (0, 1], got " + std::to_string(d));
      if (!(mhz > 0)) throw Error(what + ": a clock must be positive, got " + std::to_string(mhz));
      if (!pts.empty() && !(d > pts.back().first)) throw Error(what + ": the duties must rise");
      pts.emplace_back(d, mhz * 1e6);
    }
    p.wgmma_clock_by_duty = pts;
    const std::string s = src ? jf::string(*src, "wgmma_clock_by_duty", where + ": pipes.sources") : "";
    p.sources["wgmma_clock_by_duty"] = s.empty() ? label : s;
  }
}

// The H200 (the H100's GH100 die and L2) measured 95.2 vector reductions a clock against 224.4 scalar ones in the
// fragment pattern, in one run of `inferlab ceilings` (data/hardware/h200-sxm.measured.json, 2026-11-29): where
// l2_red_vector_per_clk is not measured it is l2_atomics_per_clk (measured or not) times this.
constexpr double kVectorPerScalarReduction = 95.175 / 224.384;

// Fills what a hardware file leaves out, from its datasheet figures and the architecture-wide
// per-SM rates of compute capability 8.x/9.0, each labelled as derived.
void derive_pipes(Hardware& h) {
  PipeCeilings& p = h.pipes;
  auto fill_as = [&](double PipeCeilings::*m, const char* key, double v, const std::string& source) {
    if (p.*m > 0) return;
    p.*m = v;
    p.sources[key] = source;
  };
  auto fill = [&](double PipeCeilings::*m, const char* key, double v, const std::string& why) {
    fill_as(m, key, v, "derived: " + why);
  };
  const double boost = h.boost_clock_mhz * 1e6, sms = double(h.sm_count);
  fill(&PipeCeilings::sm_clock_hz, "sm_clock_mhz", boost, "the boost clock of the datasheet");
  fill(&PipeCeilings::tensor_clock_hz, "tensor_clock_mhz", boost, "the boost clock of the datasheet");
  auto t = h.tensor_dense.find("bf16");
  if (t == h.tensor_dense.end()) t = h.tensor_dense.find("fp16");
  if (t != h.tensor_dense.end())
    fill(&PipeCeilings::tensor_flops_per_clk, "tensor_flops_per_clk", t->second / (sms * p.tensor_clock_hz),
         "dense 16-bit tensor TFLOP/s / (SMs x tensor clock)");
  // Filled once, from the datasheet's figures (an "estimate", not derived again from a measured file's: its
  // tensor rate is the library GEMM's, 685 TFLOP/s on the H200 where wgmma reaches 855).
  if (t != h.tensor_dense.end())
    fill_as(&PipeCeilings::wgmma_flops_per_clk, "wgmma_flops_per_clk", t->second / (sms * p.tensor_clock_hz),
            "estimate: the datasheet's dense 16-bit tensor TFLOP/s / (SMs x tensor clock)");
  fill(&PipeCeilings::wgmma_clock_hz, "wgmma_clock_mhz", p.tensor_clock_hz,
       "the tensor clock (mma.sync; not measured under wgmma, where the power limit holds the clock lower)");
  fill(&PipeCeilings::fp32_lanes, "fp32_lanes", h.vector_peak() / (2 * sms * boost), "FP32 TFLOP/s / (2 x SMs x boost clock)");
  const std::string guide = "CUDA C++ Programming Guide, arithmetic instruction throughput, compute capability 8.x/9.0";
  fill(&PipeCeilings::alu_lanes, "alu_lanes", 64, guide + " (32-bit integer add, logic, compare, min/max: 64)");
  fill(&PipeCeilings::mufu_lanes, "mufu_lanes", 16, guide + " (exp2, rcp, rsqrt: 16)");
  fill(&PipeCeilings::cvt_lanes, "cvt_lanes", 16, guide + " (type conversions: 16)");
  fill(&PipeCeilings::issue_per_clk, "issue_per_clk", 4, "4 warp schedulers per SM, one instruction each per clock");
  fill(&PipeCeilings::dependent_issue_cycles, "dependent_issue_cycles", 4,
       "dependent FFMA/IADD3 latency of 4 cycles (Jia et al., Dissecting the NVIDIA Volta GPU Architecture via "
       "Microbenchmarking, 2018; unchanged on Ampere and Hopper)");
  fill(&PipeCeilings::smem_latency_cycles, "smem_latency_cycles", 30, "estimate: shared-memory load-to-use, ~30 cycles");
  fill(&PipeCeilings::mufu_latency_cycles, "mufu_latency_cycles", 18, "estimate: MUFU.EX2 load-to-use, ~18 cycles");
  fill(&PipeCeilings::dram_latency_s, "dram_latency_us", 0.9e-6,
       "estimate: a dependent global round trip while the GPU streams (pointer chase under load), 0.9 us");
  fill(&PipeCeilings::l2_latency_cycles, "l2_latency_cycles", 260,
       "estimate: a dependent load that hits in L2, ~260 SM cycles (Hopper and Ampere pointer chases within the L2)");
  fill(&PipeCeilings::l2_atomics_per_clk, "l2_atomics_per_clk", 80,
       "estimate: one 32-bit atomic per L2 slice per clock over 80 slices (A100 whitepaper: 5120 bytes/clk of L2 "
       "bandwidth = 80 slices x 64 bytes). The H100's measured file replaces it: 224 per clock in the split-k "
       "kernels' own pattern (`inferlab ceilings`, l2_red_fragment_per_clk), so this figure is low by ~2.8x there");
  fill(&PipeCeilings::l2_red_vector_per_clk, "l2_red_vector_per_clk", p.l2_atomics_per_clk * kVectorPerScalarReduction,
       "estimate: l2_atomics_per_clk x 0.424, the H200's measured ratio of vector reductions (red.global.add.v4.f32, "
       "four fp32 sums each) to scalar ones in the split-k pattern: the same L2 (`inferlab ceilings` measures it on "
       "Hopper, red_vector_kernel)");
  fill(&PipeCeilings::sm_bandwidth, "sm_bandwidth_gb_s", 64 * p.sm_clock_hz, "estimate: 64 bytes per SM per clock from L2");
  fill(&PipeCeilings::read_bandwidth, "read_bandwidth_gb_s", h.memory_bandwidth, "the memory bandwidth");
  fill(&PipeCeilings::l2_bandwidth, "l2_bandwidth_gb_s", 2 * h.memory_bandwidth,
       "estimate: twice the memory bandwidth (the H100 measured 6.86 TB/s from L2 against 3.03 TB/s from HBM)");
  // The H100's probe (h100-sxm-80gb.json) per SM clock: 22.4 and 15.8 bytes a clock a copying thread. Only the
  // Hopper kernels issue bulk copies.
  fill(&PipeCeilings::bulk_copy_dram_bandwidth, "bulk_copy_dram_gb_s", 22.4 * p.sm_clock_hz,
       "estimate: the H100's probe, 22.4 bytes per SM clock a copying thread (scripts/probes/tma_bulk_copy.cu sms)");
  fill(&PipeCeilings::bulk_copy_l2_bandwidth, "bulk_copy_l2_gb_s", 15.8 * p.sm_clock_hz,
       "estimate: the H100's probe, 15.8 bytes per SM clock a copying thread (scripts/probes/tma_bulk_copy.cu sms)");
  fill(&PipeCeilings::launch_floor_eager_s, "launch_floor_eager_us", std::max(h.launch_overhead_s, 1e-6),
       "the launch overhead figure");
  fill(&PipeCeilings::launch_floor_graph_s, "launch_floor_graph_us", 0.5 * p.launch_floor_eager_s,
       "estimate: half the eager floor inside a CUDA graph");
  fill(&PipeCeilings::launch_floor_library_s, "launch_floor_library_us", p.launch_floor_eager_s,
       "estimate: the eager floor (a library call not measured)");
  fill(&PipeCeilings::launch_floor_library_fp8_s, "launch_floor_library_fp8_us", p.launch_floor_library_s,
       "estimate: the bf16 library floor (cuBLASLt's fp8 call not measured)");
}

}  // namespace

double Hardware::matmul_peak(DType t) const {
  if (t == DType::fp32) return vector_peak();
  const std::string key = tensor_peak_key(t);
  auto it = tensor_dense.find(key);
  if (it == tensor_dense.end())
    throw Error(id + " has no dense tensor-core rate for " + dtype_name(t) + " (it lists: " + keys_of(tensor_dense) + ")");
  return it->second;
}

double Hardware::sparse_matmul_peak(DType t) const {
  auto it = tensor_sparse.find(tensor_peak_key(t));
  if (it == tensor_sparse.end())
    throw Error(id + " has no 2:4-sparse tensor-core rate for " + dtype_name(t) + " (it lists: " + keys_of(tensor_sparse) + ")");
  return it->second;
}

double Hardware::vector_peak() const {
  auto it = vector.find("fp32");
  if (it == vector.end()) throw Error(id + " has no FP32 vector rate");
  return it->second;
}

Hardware hardware_from_json(const nlohmann::json& j, const std::string& origin) {
  const std::string& w = origin;
  if (!j.is_object()) throw Error(w + ": a hardware description must be a JSON object");
  Hardware h;
  h.origin = origin;
  h.id = jf::string(j, "id", w);
  if (h.id.empty()) throw Error(w + ": missing field 'id'");
  h.name = jf::string(j, "name", w, h.id);
  h.architecture = jf::string(j, "architecture", w);
  h.sm_count = static_cast<int>(jf::positive(j, "sm_count", w));
  h.boost_clock_mhz = jf::positive(j, "boost_clock_mhz", w);
  const auto* mem = jf::find(j, "memory");
  if (!mem || !mem->is_object()) throw Error(w + ": missing object 'memory'");
  const std::string mw = w + ": memory";
  h.memory_type = jf::string(*mem, "type", mw);
  h.memory_bytes = jf::positive(*mem, "capacity_mib", mw) * kMiB;
  h.memory_label = jf::string(*mem, "capacity_label", mw);
  h.memory_bandwidth = jf::positive(*mem, "bandwidth_gb_s", mw) * kGiga;
  h.l2_bytes = jf::positive(j, "l2_cache_mib", w) * kMiB;
  h.smem_per_sm_bytes = jf::positive(j, "smem_per_sm_kib", w) * kKiB;
  h.tensor_dense = rate_table(j, "tensor_tflops_dense", w, true);
  h.tensor_sparse = rate_table(j, "tensor_tflops_sparse_2_4", w, false);
  h.vector = rate_table(j, "vector_tflops", w, true);
  if (!h.vector.count("fp32")) throw Error(w + ": vector_tflops must list fp32");
  for (const auto& [k, sparse] : h.tensor_sparse) {
    auto d = h.tensor_dense.find(k);
    if (d != h.tensor_dense.end() && !(sparse > d->second))
      throw Error(w + ": tensor_tflops_sparse_2_4." + k + " is not above the dense figure: are the tables swapped?");
  }
  if (const auto* ic = jf::find(j, "interconnect")) {
    h.nvlink_bandwidth = jf::opt_number(*ic, "nvlink_gb_s", w + ": interconnect").value_or(0) * kGiga;
    h.pcie_bandwidth = jf::opt_number(*ic, "pcie_gb_s", w + ": interconnect").value_or(0) * kGiga;
    for (auto [key, field] : {std::pair{"nvlink_latency_us", &h.nvlink_latency_s}, std::pair{"pcie_latency_us", &h.pcie_latency_s}}) {
      const double us = jf::opt_number(*ic, key, w + ": interconnect").value_or(0);
      if (us < 0) throw Error(w + ": interconnect." + key + " must not be negative");
      *field = us * 1e-6;
    }
  }
  const double launch_us = jf::number(j, "launch_overhead_us", w);
  if (launch_us < 0) throw Error(w + ": launch_overhead_us must not be negative");
  h.launch_overhead_s = launch_us * 1e-6;
  if (const auto* s = jf::find(j, "sources")) h.sources = *s;
  if (const auto* pp = jf::find(j, "pipes")) read_pipes(h.pipes, *pp, w, "datasheet");
  if (const auto* n = jf::find(j, "device_names")) {
    if (!n->is_array()) throw Error(w + ": device_names must be a list of strings");
    for (const auto& x : *n) h.device_names.push_back(x.get<std::string>());
  }
  derive_pipes(h);
  return h;
}

CeilingsMode parse_ceilings_mode(const std::string& s) {
  if (s == "auto" || s == "automatic") return CeilingsMode::automatic;
  if (s == "datasheet") return CeilingsMode::datasheet;
  if (s == "measured") return CeilingsMode::measured;
  throw Error("unknown ceilings '" + s + "' (known: " + kCeilingsHelp + ")");
}

fs::path measured_ceilings_path(const std::string& id) { return data_dir() / "hardware" / (id + ".measured.json"); }

fs::path measured_ceilings_beside(const fs::path& hardware_file) {
  return hardware_file.parent_path() / (hardware_file.stem().string() + ".measured.json");
}

// A measured file's interconnect (inferlab_collectives' alpha-beta fit): the NVLink bandwidth (bidirectional
// total, as the datasheet file gives it) and the per-step latency replace the datasheet's.
void apply_measured_interconnect(Hardware& h, const nlohmann::json& ic, const std::string& origin) {
  const std::string w = origin + ": interconnect";
  h.nvlink_bandwidth = jf::positive(ic, "nvlink_gb_s", w) * kGiga;
  h.nvlink_latency_s = jf::positive(ic, "nvlink_latency_us", w) * 1e-6;
  h.interconnect_source = "measured " + fs::path(origin).filename().string() + " (" + jf::string(ic, "date", w, "?") + ")";
}

void apply_measured(Hardware& h, const nlohmann::json& j, const std::string& origin) {
  const auto* c = jf::find(j, "ceilings");
  const auto* ic = jf::find(j, "interconnect");
  if (ic && ic->is_object()) apply_measured_interconnect(h, *ic, origin);
  if (!c && ic) return;  // the interconnect alone: the compute and memory ceilings stay the datasheet's
  if (!c || !c->is_object()) throw Error(origin + ": missing object 'ceilings'");
  const std::string w = origin + ": ceilings";
  h.memory_bandwidth = jf::positive(*c, "memory_bandwidth_gb_s", w) * kGiga;
  for (const auto& [k, v] : rate_table(*c, "tensor_tflops_dense", w, false)) h.tensor_dense[k] = v;
  for (const auto& [k, v] : rate_table(*c, "vector_tflops", w, false)) h.vector[k] = v;
  if (auto l = jf::opt_number(*c, "launch_overhead_us", w)) h.launch_overhead_s = *l * 1e-6;
  if (auto r = jf::opt_number(*c, "memory_read_bandwidth_gb_s", w)) {
    h.pipes.read_bandwidth = *r * kGiga;
    h.pipes.sources["read_bandwidth_gb_s"] = "measured: " + fs::path(origin).filename().string();
  }
  if (auto r = jf::opt_number(*c, "l2_bandwidth_gb_s", w)) {
    h.pipes.l2_bandwidth = *r * kGiga;
    h.pipes.sources["l2_bandwidth_gb_s"] = "measured: " + fs::path(origin).filename().string();
  }
  if (const auto* pp = jf::find(*c, "pipes")) read_pipes(h.pipes, *pp, origin, "measured: " + fs::path(origin).filename().string());
  // Estimates follow what was measured: every derived pipe is derived again from the measured figures (the H100's
  // file measures l2_atomics_per_clk, not l2_red_vector_per_clk, which is derived from it).
  for (const PipeField& f : kPipeFields) {
    const auto s = h.pipes.sources.find(f.key);
    if (s != h.pipes.sources.end() && s->second.rfind("derived", 0) == 0) h.pipes.*(f.member) = 0;
  }
  derive_pipes(h);
  h.ceilings_source = "measured " + fs::path(origin).filename().string() + " (" + jf::string(j, "date", origin, "?") + ")";
  h.ceilings_file = origin;
}

std::string hardware_for_device(const std::string& device_name) {
  for (const auto& id : known_hardware()) {
    const Hardware h = load_hardware(id, CeilingsMode::datasheet);
    for (const auto& n : h.device_names)
      if (n == device_name) return id;
  }
  return "";
}

std::vector<std::string> known_hardware() { return list_stems(data_dir() / "hardware", ".json", ".measured"); }

namespace {

fs::path hardware_path(const std::string& name_or_path) {
  fs::path path(name_or_path);
  std::error_code ec;
  if (path.extension() == ".json" && fs::is_regular_file(path, ec)) return path;
  const fs::path candidate = data_dir() / "hardware" / (lower(name_or_path) + ".json");
  if (!fs::is_regular_file(candidate, ec) || lower(name_or_path).find(".measured") != std::string::npos)
    throw Error("unknown hardware '" + name_or_path + "' (known: " + join(known_hardware(), ", ") +
                "; or give the path to a hardware .json)");
  return candidate;
}

void overlay(Hardware& h, const fs::path& measured) {
  const nlohmann::json j = read_json_file(measured);
  const std::string id = jf::string(j, "id", measured.string());
  if (!id.empty() && id != h.id)
    throw Error("measured ceilings " + measured.string() + " are of '" + id + "', not of " + h.id + " (" + h.origin +
                ")");
  apply_measured(h, j, measured.string());
}

}  // namespace

Hardware load_hardware(const std::string& name_or_path, CeilingsMode mode) {
  const fs::path path = hardware_path(name_or_path);
  Hardware h = hardware_from_json(read_json_file(path), path.string());
  if (mode == CeilingsMode::datasheet) return h;
  const fs::path measured = measured_ceilings_beside(path);
  std::error_code ec;
  if (fs::is_regular_file(measured, ec))
    overlay(h, measured);
  if (mode == CeilingsMode::measured && h.ceilings_file.empty())
    throw Error("no measured ceilings for " + h.id + " (" + measured.string() +
                (fs::is_regular_file(measured, ec) ? " holds only the interconnect" : " is missing") +
                "); run `inferlab ceilings` on that GPU, or use ceilings datasheet or auto");
  return h;
}

Hardware load_hardware(const std::string& name_or_path, const std::string& ceilings) {
  if (ceilings == "auto" || ceilings == "automatic" || ceilings == "datasheet" || ceilings == "measured")
    return load_hardware(name_or_path, parse_ceilings_mode(ceilings));
  const fs::path file(ceilings);
  std::error_code ec;
  if (file.extension() != ".json" || !fs::is_regular_file(file, ec))
    throw Error("unknown ceilings '" + ceilings + "' (known: " + kCeilingsHelp + ")");
  Hardware h = load_hardware(name_or_path, CeilingsMode::datasheet);
  overlay(h, file);
  return h;
}

}  // namespace inferlab
