#include "inferlab/kernels/engine/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <set>

#include <nlohmann/json.hpp>

#include "inferlab/kernels/gemm/quant.h"
#include "inferlab/sim/error.h"
#include "inferlab/sim/io.h"

namespace inferlab {
namespace fs = std::filesystem;

int64_t TensorView::elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::size_t safetensors_dtype_bytes(const std::string& d) {
  if (d == "F64" || d == "I64" || d == "U64") return 8;
  if (d == "F32" || d == "I32" || d == "U32") return 4;
  if (d == "F16" || d == "BF16" || d == "I16" || d == "U16") return 2;
  if (d == "I8" || d == "U8" || d == "BOOL" || d == "F8_E4M3" || d == "F8_E5M2") return 1;
  throw Error("safetensors: unknown dtype '" + d + "'");
}

SafetensorsFile::SafetensorsFile(const fs::path& path) : path_(path) {
  const std::string where = path.string();
  const int fd = ::open(where.c_str(), O_RDONLY);
  if (fd < 0) throw Error(where + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    throw Error(where + ": cannot stat");
  }
  size_ = std::size_t(st.st_size);
  if (size_ < 8) {
    ::close(fd);
    throw Error(where + ": not a safetensors file (shorter than its 8-byte header length)");
  }
  map_ = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map_ == MAP_FAILED) {
    map_ = nullptr;
    throw Error(where + ": cannot map the file");
  }
  const auto* base = static_cast<const uint8_t*>(map_);
  uint64_t header = 0;
  for (int i = 7; i >= 0; --i) header = header << 8 | base[i];
  if (header > size_ - 8 || header > (std::size_t(100) << 20))
    throw Error(where + ": header length " + std::to_string(header) + " does not fit the file (malformed safetensors)");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(reinterpret_cast<const char*>(base + 8), reinterpret_cast<const char*>(base + 8 + header));
  } catch (const nlohmann::json::exception& e) {
    throw Error(where + ": malformed safetensors header: " + e.what());
  }
  if (!j.is_object()) throw Error(where + ": malformed safetensors header (not a JSON object)");
  const std::size_t data0 = 8 + header;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    const std::string name = it.key();
    const auto& t = it.value();
    const std::string w = where + ": tensor '" + name + "'";
    if (!t.is_object() || !t.contains("dtype") || !t.contains("shape") || !t.contains("data_offsets") ||
        !t["dtype"].is_string() || !t["shape"].is_array() || !t["data_offsets"].is_array() || t["data_offsets"].size() != 2)
      throw Error(w + ": malformed entry (needs dtype, shape, data_offsets)");
    TensorView v;
    v.name = name;
    v.file = where;
    v.dtype = t["dtype"].get<std::string>();
    for (const auto& d : t["shape"]) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0) throw Error(w + ": malformed shape " + t["shape"].dump());
      v.shape.push_back(d.get<int64_t>());
    }
    const auto& off = t["data_offsets"];
    if (!off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      throw Error(w + ": malformed data_offsets " + off.dump());
    const uint64_t b = off[0].get<uint64_t>(), e = off[1].get<uint64_t>();
    if (b > e || e > size_ - data0) throw Error(w + ": data_offsets " + off.dump() + " lie outside the file");
    std::size_t elem = 0;
    try {
      elem = safetensors_dtype_bytes(v.dtype);
    } catch (const Error& err) {
      throw Error(w + ": " + err.what());
    }
    if (uint64_t(v.elements()) * elem != e - b)
      throw Error(w + ": " + std::to_string(e - b) + " bytes do not hold shape " + t["shape"].dump() + " of " + v.dtype);
    v.data = base + data0 + b;
    v.bytes = std::size_t(e - b);
    tensors_.emplace(name, std::move(v));
  }
}

SafetensorsFile::~SafetensorsFile() {
  if (map_) ::munmap(map_, size_);
}

SafetensorsFolder::SafetensorsFolder(const fs::path& dir) : dir_(dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw Error(dir.string() + ": not a folder (a Hugging Face model folder is expected)");
  const fs::path single = dir / "model.safetensors", index = dir / "model.safetensors.index.json";
  std::vector<fs::path> files;
  if (fs::is_regular_file(index, ec)) {
    const nlohmann::json j = read_json_file(index);
    if (!j.contains("weight_map") || !j["weight_map"].is_object())
      throw Error(index.string() + ": missing object 'weight_map'");
    std::set<std::string> shards;
    for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
      if (!it.value().is_string()) throw Error(index.string() + ": weight_map['" + it.key() + "'] must be a file name");
      shards.insert(it.value().get<std::string>());
    }
    for (const auto& s : shards) files.push_back(dir / s);
  } else if (fs::is_regular_file(single, ec)) {
    files.push_back(single);
  } else {
    throw Error(dir.string() + ": no model.safetensors or model.safetensors.index.json");
  }
  for (const auto& f : files) {
    files_.push_back(std::make_unique<SafetensorsFile>(f));
    for (const auto& [name, t] : files_.back()->tensors()) {
      if (!index_.emplace(name, &t).second) throw Error(f.string() + ": tensor '" + name + "' appears in two files");
    }
  }
}

const TensorView& SafetensorsFolder::get(const std::string& name) const {
  auto it = index_.find(name);
  if (it == index_.end()) throw Error(dir_.string() + ": missing tensor '" + name + "'");
  return *it->second;
}
bool SafetensorsFolder::has(const std::string& name) const { return index_.count(name) > 0; }
std::vector<std::string> SafetensorsFolder::names() const {
  std::vector<std::string> n;
  for (const auto& [k, v] : index_) n.push_back(k);
  return n;
}

std::vector<float> to_floats(const TensorView& t) {
  const int64_t n = t.elements();
  std::vector<float> out(static_cast<std::size_t>(n), 0.f);
  if (t.dtype == "F32") {
    std::memcpy(out.data(), t.data, std::size_t(n) * 4);
  } else if (t.dtype == "BF16" || t.dtype == "F16") {
    const bool bf = t.dtype == "BF16";
    for (int64_t i = 0; i < n; ++i) {
      uint16_t bits;
      std::memcpy(&bits, t.data + 2 * i, 2);
      out[i] = bf ? bf16_value(bits) : fp16_value(bits);
    }
  } else {
    throw Error(t.file + ": tensor '" + t.name + "' has dtype " + t.dtype + " (supported: BF16, F16, F32)");
  }
  return out;
}

std::vector<uint16_t> to_bf16_bits(const TensorView& t) {
  const int64_t n = t.elements();
  std::vector<uint16_t> out(static_cast<std::size_t>(n));
  if (t.dtype == "BF16") {
    std::memcpy(out.data(), t.data, std::size_t(n) * 2);
    return out;
  }
  const std::vector<float> f = to_floats(t);
  for (int64_t i = 0; i < n; ++i) out[i] = bf16_bits(f[i]);
  return out;
}

void write_safetensors(const fs::path& path, const std::map<std::string, TensorData>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    if (uint64_t(n) * safetensors_dtype_bytes(t.dtype) != t.bytes.size())
      throw Error("write_safetensors: tensor '" + name + "': bytes do not match its shape and dtype");
    header[name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.bytes.size()}}};
    offset += t.bytes.size();  // contiguous, no gaps: readers check that the offsets tile the data section
  }
  std::string h = header.dump();
  while ((h.size() + 8) % 8) h.push_back(' ');
  std::string out;
  out.reserve(8 + h.size() + offset);
  for (int i = 0; i < 8; ++i) out.push_back(char((uint64_t(h.size()) >> (8 * i)) & 0xff));
  out += h;
  for (const auto& [name, t] : tensors) out.append(reinterpret_cast<const char*>(t.bytes.data()), t.bytes.size());
  write_file_atomic(path, out);
}

}  // namespace inferlab
