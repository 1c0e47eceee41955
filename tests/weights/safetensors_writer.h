#pragma once
// Test helpers: write small safetensors files (and deliberately broken ones) into a temp directory.
#include <stdlib.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace sanctum::testing {

struct StTensor {
  std::string name;
  std::string dtype;  // "F32", "BF16", ...
  std::vector<int64_t> shape;
  std::string bytes;  // raw little-endian data
};

template <class T>
std::string bytes_of(const std::vector<T>& v) {
  std::string s(v.size() * sizeof(T), '\0');
  if (!v.empty()) std::memcpy(s.data(), v.data(), s.size());
  return s;
}

// 8-byte little-endian length + header + data, as the format defines it.
inline std::string frame(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + header + data;
}

inline std::string make_safetensors(const std::vector<StTensor>& tensors, const nlohmann::json& metadata = nullptr) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.is_null()) header["__metadata__"] = metadata;
  std::string data;
  for (const auto& t : tensors) {
    header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {data.size(), data.size() + t.bytes.size()}}};
    data += t.bytes;
  }
  std::string h = header.dump();
  while (h.size() % 8) h += ' ';  // the reference writer pads with spaces to align the data
  return frame(h, data);
}

inline void write_bytes(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A fresh directory removed at scope exit.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "sanctum_test_XXXXXX").string();
    path = ::mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string str() const { return path.string(); }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

// An F32 tensor of the given shape holding 0, 1, 2, ...
inline StTensor f32_tensor(const std::string& name, std::vector<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<float> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
  return {name, "F32", std::move(shape), bytes_of(v)};
}

}  // namespace sanctum::testing
