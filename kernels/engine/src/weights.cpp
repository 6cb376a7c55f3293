#include "inferlab/kernels/engine/weights.h"

#include <cstring>

#include "inferlab/kernels/gemm/quant.h"
#include "inferlab/sim/error.h"
#include "inferlab/sim/io.h"
#include "inferlab/sim/rng.h"

namespace inferlab {

int64_t WeightSpec::elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::vector<WeightSpec> weight_specs(const ModelConfig& m, const ArchConfig& a) {
  std::vector<WeightSpec> s;
  const int64_t q = m.q_dim(), kv = m.kv_dim();
  s.push_back({"model.embed_tokens.weight", {m.vocab, m.hidden}, WeightKind::embedding, -1});
  for (int i = 0; i < int(m.layers); ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    s.push_back({p + "input_layernorm.weight", {m.hidden}, WeightKind::norm, i});
    s.push_back({p + "self_attn.q_proj.weight", {q, m.hidden}, WeightKind::linear, i});
    s.push_back({p + "self_attn.k_proj.weight", {kv, m.hidden}, WeightKind::linear, i});
    s.push_back({p + "self_attn.v_proj.weight", {kv, m.hidden}, WeightKind::linear, i});
    if (a.qkv_bias) {
      s.push_back({p + "self_attn.q_proj.bias", {q}, WeightKind::bias, i});
      s.push_back({p + "self_attn.k_proj.bias", {kv}, WeightKind::bias, i});
      s.push_back({p + "self_attn.v_proj.bias", {kv}, WeightKind::bias, i});
    }
    s.push_back({p + "self_attn.o_proj.weight", {m.hidden, q}, WeightKind::linear, i});
    s.push_back({p + "post_attention_layernorm.weight", {m.hidden}, WeightKind::norm, i});
    s.push_back({p + "mlp.gate_proj.weight", {m.intermediate, m.hidden}, WeightKind::linear, i});
    s.push_back({p + "mlp.up_proj.weight", {m.intermediate, m.hidden}, WeightKind::linear, i});
    s.push_back({p + "mlp.down_proj.weight", {m.hidden, m.intermediate}, WeightKind::linear, i});
  }
  s.push_back({"model.norm.weight", {m.hidden}, WeightKind::norm, -1});
  if (!m.tied_embeddings) s.push_back({"lm_head.weight", {m.vocab, m.hidden}, WeightKind::lm_head, -1});
  return s;
}

HostWeights random_host_weights(const ModelConfig& m, const ArchConfig& a, uint64_t seed, bool perturb) {
  HostWeights w;
  Rng rng{seed};
  const double sd = a.initializer_range;
  for (const auto& spec : weight_specs(m, a)) {
    std::vector<float> v(std::size_t(spec.elements()));
    for (float& x : v) {
      double d = 0;
      switch (spec.kind) {
        case WeightKind::norm: d = perturb ? 1.0 + 0.1 * rng.normal() : 1.0; break;
        case WeightKind::bias: d = perturb ? sd * rng.normal() : 0.0; break;
        default: d = sd * rng.normal(); break;
      }
      x = round_bf16(float(d));
    }
    w.emplace(spec.name, std::move(v));
  }
  return w;
}

namespace {
std::string shape_text(const std::vector<int64_t>& s) {
  std::string t = "[";
  for (std::size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + "]";
}
}  // namespace

void check_checkpoint(const SafetensorsFolder& folder, const ModelConfig& m, const ArchConfig& a) {
  for (const auto& spec : weight_specs(m, a)) {
    const TensorView& t = folder.get(spec.name);
    if (t.shape != spec.shape)
      throw Error(t.file + ": tensor '" + spec.name + "' has shape " + shape_text(t.shape) + ", the config needs " +
                  shape_text(spec.shape));
    if (t.dtype != "BF16" && t.dtype != "F16" && t.dtype != "F32")
      throw Error(t.file + ": tensor '" + spec.name + "' has dtype " + t.dtype + " (supported: BF16, F16, F32)");
  }
}

HostWeights load_host_weights(const SafetensorsFolder& folder, const ModelConfig& m, const ArchConfig& a) {
  check_checkpoint(folder, m, a);
  HostWeights w;
  for (const auto& spec : weight_specs(m, a)) w.emplace(spec.name, to_floats(folder.get(spec.name)));
  return w;
}

void write_model_folder(const std::filesystem::path& dir, const nlohmann::json& config, const ModelConfig& m,
                        const ArchConfig& a, const HostWeights& w) {
  std::filesystem::create_directories(dir);
  std::map<std::string, TensorData> tensors;
  for (const auto& spec : weight_specs(m, a)) {
    auto it = w.find(spec.name);
    if (it == w.end()) throw Error("write_model_folder: missing tensor '" + spec.name + "'");
    if (int64_t(it->second.size()) != spec.elements())
      throw Error("write_model_folder: tensor '" + spec.name + "' has the wrong size");
    TensorData t{"BF16", spec.shape, std::vector<uint8_t>(it->second.size() * 2)};
    for (std::size_t i = 0; i < it->second.size(); ++i) {
      const uint16_t b = bf16_bits(it->second[i]);
      std::memcpy(t.bytes.data() + 2 * i, &b, 2);
    }
    tensors.emplace(spec.name, std::move(t));
  }
  write_safetensors(dir / "model.safetensors", tensors, {{"format", "pt"}});
  write_file_atomic(dir / "config.json", config.dump(2) + "\n");
}

}  // namespace inferlab
