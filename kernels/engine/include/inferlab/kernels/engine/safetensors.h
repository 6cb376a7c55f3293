#pragma once
// Hugging Face safetensors, read and written (the format: an 8-byte little-endian header length, a JSON
// header {name: {dtype, shape, data_offsets}}, then the tensors' bytes). A model folder holds
// model.safetensors, or shards listed by model.safetensors.index.json ({"weight_map": {name: file}}).
// Files are memory-mapped; nothing is copied until a tensor is converted. Every malformed header,
// out-of-range offset, size that does not match the shape, missing tensor or file is an inferlab::Error
// naming the file and the tensor. Plain C++.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace inferlab {

struct TensorView {
  std::string name;
  std::string dtype;            // safetensors spelling: "BF16", "F16", "F32", "I64", ...
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;
  std::size_t bytes = 0;
  std::string file;             // where it lives (for messages)
  int64_t elements() const;
};

class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::filesystem::path& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;
  const std::map<std::string, TensorView>& tensors() const { return tensors_; }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  void* map_ = nullptr;
  std::size_t size_ = 0;
  std::map<std::string, TensorView> tensors_;
};

// A model folder: one file or the shards of an index.
class SafetensorsFolder {
 public:
  explicit SafetensorsFolder(const std::filesystem::path& dir);
  // The tensor `name`; a missing one throws naming it and the folder.
  const TensorView& get(const std::string& name) const;
  bool has(const std::string& name) const;
  std::vector<std::string> names() const;
  const std::filesystem::path& dir() const { return dir_; }

 private:
  std::filesystem::path dir_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const TensorView*> index_;
};

// Bytes per element of a safetensors dtype; an unknown spelling throws.
std::size_t safetensors_dtype_bytes(const std::string& dtype);
// The tensor's values as floats: BF16, F16 and F32 convert exactly; any other dtype throws naming the tensor.
std::vector<float> to_floats(const TensorView& t);
// The tensor as bf16 bits (BF16 copied; F16 and F32 rounded to nearest even).
std::vector<uint16_t> to_bf16_bits(const TensorView& t);

// Writes a safetensors file (atomically: a temporary file, then a rename): the header padded with spaces
// to a multiple of 8 bytes, then the tensors in name order, contiguous (as the reference implementation,
// whose reader rejects gaps).
struct TensorData {
  std::string dtype;             // "BF16", "F16", "F32"
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};
void write_safetensors(const std::filesystem::path& path, const std::map<std::string, TensorData>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace inferlab
