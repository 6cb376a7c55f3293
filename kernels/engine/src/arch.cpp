#include "inferlab/kernels/engine/arch.h"

#include "inferlab/kernels/layers/layers_host.h"

#include <cmath>
#include <set>

#include "inferlab/sim/error.h"
#include "inferlab/sim/io.h"
#include "inferlab/sim/json_fields.h"
#include "inferlab/sim/paths.h"

namespace inferlab {
namespace {

using json_fields::find;

bool truthy(const nlohmann::json& j, const char* key) {
  const auto* v = find(j, key);
  return v && v->is_boolean() && v->get<bool>();
}

}  // namespace

ArchConfig arch_from_hf_json(const nlohmann::json& config, const ModelConfig& m, const std::string& where) {
  const nlohmann::json& j = config;
  ArchConfig a;
  static const std::set<std::string> kFamilies = {"llama", "mistral", "qwen2"};
  if (!kFamilies.count(m.model_type))
    throw Error(where + ": model_type '" + m.model_type + "' is not run by the engine (it runs llama, mistral, qwen2)");
  a.family = m.model_type;
  if (const auto* arch = find(j, "architectures")) {
    if (!arch->is_array() || arch->size() != 1 || !(*arch)[0].is_string())
      throw Error(where + ": field 'architectures' must list one architecture, got " + arch->dump());
    a.architecture = (*arch)[0].get<std::string>();
    static const std::set<std::string> kArch = {"LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM"};
    if (!kArch.count(a.architecture))
      throw Error(where + ": architectures '" + a.architecture +
                  "' is not run by the engine (it runs LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM)");
  }
  const std::string act = json_fields::string(j, "hidden_act", where, "silu");
  if (act != "silu") throw Error(where + ": hidden_act '" + act + "' is not supported (the engine runs SwiGLU: silu)");
  if (m.is_moe()) throw Error(where + ": the engine runs dense models; the config has experts (num_local_experts/num_experts)");
  if (!m.gated_mlp) throw Error(where + ": the engine runs gated (SwiGLU) MLPs only");
  if (truthy(j, "mlp_bias")) throw Error(where + ": mlp_bias true is not supported");
  if (a.family == "qwen2") a.qkv_bias = true;
  if (truthy(j, "attention_bias"))
    throw Error(where + ": attention_bias true (biases on q, k, v and o) is not supported");
  if (m.head_dim != 64 && m.head_dim != 128)
    throw Error(where + ": head_dim " + std::to_string(m.head_dim) + " is not run by the attention kernels (64 or 128)");
  if (auto prf = json_fields::opt_number(j, "partial_rotary_factor", where); prf && *prf != 1.0)
    throw Error(where + ": partial_rotary_factor " + std::to_string(*prf) + " is not supported (only full rotation)");
  a.rms_norm_eps = json_fields::opt_number(j, "rms_norm_eps", where).value_or(a.family == "llama" ? 1e-6 : 1e-6);
  if (!(a.rms_norm_eps > 0)) throw Error(where + ": rms_norm_eps must be positive");
  a.initializer_range = json_fields::opt_number(j, "initializer_range", where).value_or(0.02);
  // RoPE: transformers < 5 writes rope_theta and rope_scaling {rope_type (or type), factor, ...};
  // transformers >= 5 writes one rope_parameters {rope_type, rope_theta, factor, ...}.
  const auto* params = find(j, "rope_parameters");
  if (params && !params->is_object())
    throw Error(where + ": field 'rope_parameters' must be an object, got " + params->dump());
  const nlohmann::json* rs = params ? params : find(j, "rope_scaling");
  const std::string rs_name = params ? "rope_parameters" : "rope_scaling";
  a.rope.theta = (params ? json_fields::opt_number(*params, "rope_theta", where + ": rope_parameters")
                         : json_fields::opt_number(j, "rope_theta", where))
                     .value_or(10000.0);
  if (!(a.rope.theta > 1)) throw Error(where + ": rope_theta must be greater than 1");
  if (rs) {
    if (!rs->is_object()) throw Error(where + ": field 'rope_scaling' must be an object or null, got " + rs->dump());
    const std::string w = where + ": " + rs_name;
    std::string type = json_fields::string(*rs, "rope_type", w, "");
    if (type.empty()) type = json_fields::string(*rs, "type", w, "default");
    if (type != "default" && type != "linear" && type != "llama3")
      throw Error(where + ": " + rs_name + " type '" + type + "' is not supported (default, linear, llama3)");
    if (auto prf = json_fields::opt_number(*rs, "partial_rotary_factor", w); prf && *prf != 1.0)
      throw Error(w + ": partial_rotary_factor " + std::to_string(*prf) + " is not supported (only full rotation)");
    a.rope.type = type;
    if (type != "default") a.rope.factor = json_fields::positive(*rs, "factor", w);
    if (type == "llama3") {
      a.rope.low_freq_factor = json_fields::positive(*rs, "low_freq_factor", w);
      a.rope.high_freq_factor = json_fields::positive(*rs, "high_freq_factor", w);
      a.rope.original_max_positions = int64_t(json_fields::positive(*rs, "original_max_position_embeddings", w));
      if (!(a.rope.high_freq_factor > a.rope.low_freq_factor))
        throw Error(w + ": high_freq_factor must exceed low_freq_factor");
    }
  }
  a.sliding_window = m.sliding_window;
  return a;
}

EngineModel load_engine_model(const std::string& name_or_path) {
  EngineModel em;
  em.model = load_model(name_or_path);
  em.arch = arch_from_hf_json(read_json_file(em.model.origin), em.model, em.model.origin);
  return em;
}

std::vector<float> rope_inv_freq(int64_t head_dim, const RopeConfig& r) {
  RopeScaling s;
  s.type = r.type;
  s.factor = r.factor;
  s.low_freq_factor = r.low_freq_factor, s.high_freq_factor = r.high_freq_factor;
  s.original_max_positions = r.original_max_positions;
  return rope_inv_freq(head_dim, r.theta, s);
}

}  // namespace inferlab
