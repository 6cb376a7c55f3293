#include "inferlab/kernels/engine/weights.h"

#include <cstring>

#include "inferlab/kernels/gemm/quant.h"
#include "inferlab/sim/error.h"
#include "inferlab/sim/io.h"
#include "inferlab/sim/parallel.h"
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

void check_shard(const ModelConfig& full, const WeightShard& s) {
  check_parallelism(full, Parallelism{s.tp, s.pp, 1});
  if (s.tp_rank < 0 || s.tp_rank >= s.tp)
    throw Error("tensor-parallel rank " + std::to_string(s.tp_rank) + " outside 0.." + std::to_string(s.tp - 1));
  if (s.stage < 0 || s.stage >= s.pp)
    throw Error("pipeline stage " + std::to_string(s.stage) + " outside 0.." + std::to_string(s.pp - 1));
}

ModelConfig shard_config(const ModelConfig& full, const WeightShard& s) {
  check_shard(full, s);
  if (s.whole()) return full;
  return stage_model(full, Parallelism{s.tp, s.pp, 1}, s.stage);
}

int64_t shard_first_layer(const ModelConfig& full, const WeightShard& s) {
  check_shard(full, s);
  const std::vector<int64_t> sizes = stage_layers(full.layers, s.pp);
  int64_t first = 0;
  for (int64_t i = 0; i < s.stage; ++i) first += sizes[std::size_t(i)];
  return first;
}

int64_t shard_first_token(const ModelConfig& full, const WeightShard& s) { return s.tp_rank * vocab_per_rank(full, s.tp); }

int64_t TensorSlice::elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::optional<TensorSlice> shard_slice(const WeightSpec& spec, const ModelConfig& full, const WeightShard& s) {
  check_shard(full, s);
  const int64_t first = shard_first_layer(full, s), layers = stage_layers(full.layers, s.pp)[std::size_t(s.stage)];
  if (spec.layer >= 0 && (spec.layer < first || spec.layer >= first + layers)) return std::nullopt;
  const bool embedding = spec.kind == WeightKind::embedding, head = spec.kind == WeightKind::lm_head;
  if (embedding && !(s.first() || (full.tied_embeddings && s.last()))) return std::nullopt;
  if ((head || spec.name == "model.norm.weight") && !s.last()) return std::nullopt;
  TensorSlice t;
  t.shape = spec.shape;
  auto take = [&](TensorSlice::Cut cut, int64_t offset, int64_t count) {
    t.cut = s.tp == 1 ? TensorSlice::Cut::whole : cut;
    if (t.cut == TensorSlice::Cut::whole) return;
    t.offset = offset, t.count = count;
    t.shape[cut == TensorSlice::Cut::rows ? 0 : 1] = count;
  };
  const int64_t hd = full.head_dim, q = full.heads / s.tp * hd;
  const int64_t kv_heads = kv_heads_per_rank(full, s.tp);
  const int64_t kv_first = s.tp <= full.kv_heads ? s.tp_rank * kv_heads : s.tp_rank / (s.tp / full.kv_heads);
  const int64_t inter = full.intermediate / s.tp;
  auto ends = [&](const char* suffix) {
    const std::string& n = spec.name;
    const std::string x = suffix;
    return n.size() >= x.size() && n.compare(n.size() - x.size(), x.size(), x) == 0;
  };
  using Cut = TensorSlice::Cut;
  if (embedding || head) {
    const int64_t per = vocab_per_rank(full, s.tp), off = shard_first_token(full, s);
    take(Cut::rows, off, std::min(per, full.vocab - off));
    if (t.cut != Cut::whole) t.shape[0] = per;  // zero rows past the vocabulary
  } else if (ends("q_proj.weight") || ends("q_proj.bias")) {
    take(Cut::rows, s.tp_rank * q, q);
  } else if (ends("k_proj.weight") || ends("k_proj.bias") || ends("v_proj.weight") || ends("v_proj.bias")) {
    take(Cut::rows, kv_first * hd, kv_heads * hd);
  } else if (ends("o_proj.weight")) {
    take(Cut::columns, s.tp_rank * q, q);
  } else if (ends("gate_proj.weight") || ends("up_proj.weight")) {
    take(Cut::rows, s.tp_rank * inter, inter);
  } else if (ends("down_proj.weight")) {
    take(Cut::columns, s.tp_rank * inter, inter);
  } else if (spec.kind != WeightKind::norm) {
    throw Error("shard_slice: no sharding rule for tensor '" + spec.name + "'");
  }
  return t;
}

std::vector<float> slice_values(const std::vector<float>& full, const WeightSpec& spec, const TensorSlice& t) {
  if (int64_t(full.size()) != spec.elements())
    throw Error("slice_values: tensor '" + spec.name + "' has " + std::to_string(full.size()) + " values, its shape " +
                std::to_string(spec.elements()));
  if (t.cut == TensorSlice::Cut::whole) return full;
  std::vector<float> out(std::size_t(t.elements()), 0.f);
  const int64_t cols = spec.shape.size() > 1 ? spec.shape[1] : 1;
  if (t.cut == TensorSlice::Cut::rows) {
    std::copy(full.begin() + t.offset * cols, full.begin() + (t.offset + t.count) * cols, out.begin());
  } else {
    for (int64_t r = 0; r < spec.shape[0]; ++r)
      std::copy(full.begin() + r * cols + t.offset, full.begin() + r * cols + t.offset + t.count, out.begin() + r * t.count);
  }
  return out;
}

std::string full_tensor_name(const std::string& local, const ModelConfig& full, const WeightShard& s) {
  const std::string prefix = "model.layers.";
  if (local.compare(0, prefix.size(), prefix) != 0) return local;
  const std::size_t dot = local.find('.', prefix.size());
  const int64_t l = std::stoll(local.substr(prefix.size(), dot - prefix.size()));
  return prefix + std::to_string(l + shard_first_layer(full, s)) + local.substr(dot);
}

HostWeights shard_host_weights(const HostWeights& full, const ModelConfig& m, const ArchConfig& a, const WeightShard& s) {
  std::map<std::string, WeightSpec> specs;
  for (const auto& spec : weight_specs(m, a)) specs.emplace(spec.name, spec);
  HostWeights out;
  for (const auto& local : weight_specs(shard_config(m, s), a)) {
    const std::string name = full_tensor_name(local.name, m, s);
    const WeightSpec& spec = specs.at(name);
    const std::optional<TensorSlice> t = shard_slice(spec, m, s);
    if (!t) continue;
    auto it = full.find(name);
    if (it == full.end()) throw Error("shard_host_weights: missing tensor '" + name + "'");
    if (t->shape != local.shape)
      throw Error("shard_host_weights: tensor '" + name + "' sliced to a shape the shard's config does not give");
    out.emplace(local.name, slice_values(it->second, spec, *t));
  }
  return out;
}

}  // namespace inferlab
