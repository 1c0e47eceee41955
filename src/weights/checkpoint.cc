#include "weights/checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "weights/adapters/lora_merge.h"

namespace fs = std::filesystem;

namespace sanctum {

namespace {

using nlohmann::json;

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string dims_string(std::initializer_list<int64_t> shape) {
  std::string s = "(";
  size_t i = 0;
  for (int64_t d : shape) s += (i++ ? ", " : "") + std::to_string(d);
  return s + (shape.size() == 1 ? ",)" : ")");
}

// The shard files named by model.safetensors.index.json (its text read from `path`), and the
// tensor -> shard map it declares.
std::map<std::string, std::string> read_index(const std::string& path, const std::string& text) {
  json index;
  try {
    index = json::parse(text);
  } catch (const json::exception& e) {
    fail(ErrorKind::invalid_input, path + ": not valid JSON (" + e.what() + ")");
  }
  check(index.is_object(), ErrorKind::invalid_input, path + ": not a JSON object");
  auto wm = index.find("weight_map");
  check(wm != index.end() && wm->is_object(), ErrorKind::invalid_input, path + ": missing object 'weight_map'");
  std::map<std::string, std::string> map;
  for (auto it = wm->begin(); it != wm->end(); ++it) {
    check(it->is_string(), ErrorKind::invalid_input, path + ": weight_map['" + it.key() + "'] is not a file name");
    const std::string& file = it->get_ref<const std::string&>();
    // Shards live next to the index; a path that climbs out is not a shard.
    check(!file.empty() && file.find('/') == std::string::npos && file != "." && file != "..", ErrorKind::invalid_input,
          path + ": weight_map['" + it.key() + "'] = '" + file + "' is not a file name in this directory");
    map[it.key()] = file;
  }
  return map;
}

}  // namespace

Checkpoint::Checkpoint(const std::string& dir, const PinnedFiles* verified) : dir_(dir) {
  std::error_code ec;
  check(fs::is_directory(dir, ec), ErrorKind::not_found, dir + ": checkpoint directory not found");
  const fs::path root(dir);
  // Every verified file, the tokenizer's and config's too, must still be the one the check read.
  if (verified) verified->check_in_place(dir);

  std::vector<std::string> files;
  std::map<std::string, std::string> weight_map;
  const fs::path index_path = root / "model.safetensors.index.json";
  if (fs::exists(index_path, ec)) {
    const std::string index_file = index_path.filename().string();
    weight_map = read_index(index_path.string(),
                            verified ? verified->at(dir, index_file).read_all(index_path.string()) : read_file(index_path.string()));
    std::set<std::string> shards;
    for (const auto& [name, file] : weight_map) shards.insert(file);
    for (const auto& [name, file] : weight_map) {
      if (!fs::exists(root / file, ec)) {
        fail(ErrorKind::not_found, dir + ": shard '" + file + "' (holding tensor '" + name +
                                       "', listed in model.safetensors.index.json) is missing: incomplete download?");
      }
    }
    files.assign(shards.begin(), shards.end());
  } else if (fs::exists(root / "model.safetensors", ec)) {
    files.push_back("model.safetensors");
  } else {
    for (const auto& de : fs::directory_iterator(root, ec)) {
      const std::string name = de.path().filename().string();
      if (ends_with(name, ".safetensors") && de.is_regular_file(ec)) files.push_back(name);
    }
    std::sort(files.begin(), files.end());
    // Mistral repos ship consolidated.safetensors (other tensor names) beside the HF-named shards.
    if (files.size() > 1) std::erase(files, std::string("consolidated.safetensors"));
  }
  check(!files.empty(), ErrorKind::not_found,
        dir + ": no safetensors weights (expected model.safetensors, model.safetensors.index.json or *.safetensors)");

  for (const std::string& f : files)
    files_.push_back(SafetensorsFile::open((root / f).string(), verified ? &verified->at(dir, f) : nullptr));

  std::map<std::string, size_t> file_of;  // file name -> files_ index
  for (size_t fi = 0; fi < files_.size(); ++fi) {
    file_of[files[fi]] = fi;
    const auto& entries = files_[fi]->entries();
    for (size_t ei = 0; ei < entries.size(); ++ei) {
      auto [it, inserted] = index_.emplace(entries[ei].name, std::make_pair(fi, ei));
      if (!inserted) {
        fail(ErrorKind::invalid_input, dir + ": tensor '" + entries[ei].name + "' appears in both " +
                                           fs::path(files_[it->second.first]->path()).filename().string() + " and " + files[fi]);
      }
    }
  }
  for (const auto& [name, file] : weight_map) {
    auto it = index_.find(name);
    check(it != index_.end() && it->second.first == file_of.at(file), ErrorKind::invalid_input,
          dir + ": model.safetensors.index.json places tensor '" + name + "' in " + file + ", but that shard does not hold it");
  }
}

std::vector<std::string> Checkpoint::names() const {
  std::vector<std::string> out;
  out.reserve(index_.size());
  for (const auto& kv : index_) out.push_back(kv.first);
  return out;
}

bool Checkpoint::has(const std::string& name) const { return index_.count(name) != 0; }

const SafetensorsEntry& Checkpoint::entry(const std::string& name) const {
  auto it = index_.find(name);
  check(it != index_.end(), ErrorKind::not_found,
        dir_ + ": tensor '" + name + "' not found in the checkpoint (" + std::to_string(index_.size()) + " tensors)");
  return files_[it->second.first]->entries()[it->second.second];
}

std::string Checkpoint::file_of(const std::string& name) const {
  auto it = index_.find(name);
  if (it == index_.end()) return dir_;
  return files_[it->second.first]->path();
}

Tensor Checkpoint::view(const std::string& name) const {
  entry(name);  // throws not_found
  const auto& [fi, ei] = index_.at(name);
  return files_[fi]->view(ei);
}

void Checkpoint::attach_adapter(std::shared_ptr<const LoraAdapter> adapter) {
  if (adapter_)
    fail(ErrorKind::invalid_argument,
         dir_ + ": one adapter per model: merge " + adapter_->dir() + " and " + adapter->dir() + " into one, or load them as two models");
  placement_ = place_adapter(*adapter, names(), dir_);
  adapter_ = std::move(adapter);
}

Tensor Checkpoint::merged(const std::string& name) {
  if (!adapter_) return {};
  const size_t dot = name.find_last_of('.');
  if (dot == std::string::npos) return {};
  const std::string prefix = name.substr(0, dot), piece = name.substr(dot + 1);
  auto target = placement_.find(prefix);
  if (target == placement_.end() || (piece != "weight" && piece != "scales" && piece != "biases")) return {};
  if (!merged_.count(prefix + ".weight")) {
    const LoraTarget& t = *target->second;
    const std::string what = file_of(prefix + ".weight") + ": tensor '" + prefix + ".weight'";
    if (has(prefix + ".scales")) {
      QuantizedWeight q{view(prefix + ".weight"), view(prefix + ".scales"), has(prefix + ".biases") ? view(prefix + ".biases") : Tensor{}};
      check(static_cast<bool>(q.biases), ErrorKind::not_found,
            dir_ + ": tensor '" + prefix + ".biases' not found (MLX affine quantization stores scales and biases)");
      // Bits and group size from the packed shapes: (…, in * bits / 32) codes, (…, in / group) scales.
      const int64_t words = q.data.dim(-1), groups = q.scales.dim(-1);
      const bool ok = t.in > 0 && (words * 32) % t.in == 0 && groups > 0 && t.in % groups == 0;
      const int bits = ok ? static_cast<int>(words * 32 / t.in) : 0;
      check(ok && (bits == 4 || bits == 8), ErrorKind::invalid_input,
            what + " is " + q.data.shape_string() + ": not 4- or 8-bit codes for the " + std::to_string(t.in) + " inputs adapter tensor '" +
                t.a_name + "' expects");
      QuantizedWeight m = merge_quantized(q, bits, static_cast<int>(t.in / groups), t, what);
      merged_[prefix + ".weight"] = m.data;
      merged_[prefix + ".scales"] = m.scales;
      merged_[prefix + ".biases"] = m.biases;
    } else {
      merged_[prefix + ".weight"] = merge_dense(view(prefix + ".weight"), t, what);
    }
  }
  auto it = merged_.find(name);
  return it == merged_.end() ? Tensor{} : it->second;
}

Tensor Checkpoint::tensor(const std::string& name) {
  Tensor t = merged(name);
  if (!t) t = view(name);
  used_.insert(name);
  if (device_ == Device::cpu) return t;
  auto [it, fresh] = uploaded_.try_emplace(name);
  if (fresh) it->second = t.to(device_);
  return it->second;
}

Tensor Checkpoint::flat_tensor(const std::string& name) {
  entry(name);  // throws not_found
  const auto& [fi, ei] = index_.at(name);
  used_.insert(name);
  return files_[fi]->view_flat(ei);
}

Tensor Checkpoint::tensor(const std::string& name, std::initializer_list<int64_t> expected_shape) {
  Tensor t = tensor(name);
  bool same = t.ndim() == static_cast<int>(expected_shape.size());
  int i = 0;
  for (int64_t d : expected_shape) same = same && t.dim(i++) == d;
  check(same, ErrorKind::invalid_input,
        file_of(name) + ": tensor '" + name + "': expected " + dims_string(expected_shape) + ", got " + t.shape_string());
  return t;
}

Weight Checkpoint::linear(const std::string& prefix, int64_t rows, int64_t cols, const QuantConfig& quant) {
  const std::string wname = prefix + ".weight";
  Weight w;
  w.name = prefix;
  w.rows = rows;
  w.cols = cols;
  if (!has(prefix + ".scales")) {
    w.data = tensor(wname, {rows, cols});
    check(is_float(w.data.dtype()), ErrorKind::unsupported,
          file_of(wname) + ": tensor '" + wname + "' is " + w.data.shape_string() +
              "; dense weights must be f32, bf16 or f16 (a quantized layer needs '" + prefix + ".scales')");
    validate_weight(w);
    return w;
  }

  w.quant = quant.for_layer(prefix);
  check(w.quant.bits != 0, ErrorKind::invalid_input,
        dir_ + ": '" + prefix + ".scales' exists but config.json's quantization block does not quantize '" + prefix + "'");
  const int64_t bits = w.quant.bits, g = w.quant.group_size;
  check(cols % g == 0 && (cols * bits) % 32 == 0, ErrorKind::invalid_input,
        dir_ + ": layer '" + prefix + "': in-features " + std::to_string(cols) + " are not a multiple of group size " + std::to_string(g));
  w.data = tensor(wname);
  check(w.data.dtype() == DType::u32 && w.data.ndim() == 2 && w.data.dim(0) == rows && w.data.dim(1) == cols * bits / 32,
        ErrorKind::invalid_input,
        file_of(wname) + ": tensor '" + wname + "': expected packed " + dims_string({rows, cols * bits / 32}) + " u32 for (" +
            std::to_string(rows) + ", " + std::to_string(cols) + ") at " + std::to_string(bits) + " bits, got " + w.data.shape_string() +
            ": check quantization bits in config.json");
  w.scales = tensor(prefix + ".scales", {rows, cols / g});
  check(has(prefix + ".biases"), ErrorKind::not_found,
        dir_ + ": tensor '" + prefix + ".biases' not found (MLX affine quantization stores scales and biases)");
  w.biases = tensor(prefix + ".biases", {rows, cols / g});
  validate_weight(w);
  return w;
}

std::vector<Weight> Checkpoint::experts(const std::string& prefix, int64_t num_experts, int64_t rows, int64_t cols,
                                        const QuantConfig& quant) {
  const std::string wname = has(prefix + ".weight") || !has(prefix) ? prefix + ".weight" : prefix;
  const bool quantized = has(prefix + ".scales");
  QuantParams qp;
  int64_t packed_cols = cols;
  if (quantized) {
    qp = quant.for_layer(prefix);
    check(qp.bits != 0, ErrorKind::invalid_input,
          dir_ + ": '" + prefix + ".scales' exists but config.json's quantization block does not quantize '" + prefix + "'");
    check(cols % qp.group_size == 0 && (cols * qp.bits) % 32 == 0, ErrorKind::invalid_input,
          dir_ + ": experts '" + prefix + "': in-features " + std::to_string(cols) + " are not a multiple of group size " +
              std::to_string(qp.group_size));
    packed_cols = cols * qp.bits / 32;
  }
  Tensor data = tensor(wname);
  const bool shape_ok = data.ndim() == 3 && data.dim(0) == num_experts && data.dim(1) == rows && data.dim(2) == packed_cols &&
                        (quantized ? data.dtype() == DType::u32 : is_float(data.dtype()));
  check(shape_ok, ErrorKind::invalid_input,
        file_of(wname) + ": tensor '" + wname + "': expected " + dims_string({num_experts, rows, packed_cols}) +
            (quantized ? " u32 (" + std::to_string(qp.bits) + "-bit packed)" : std::string(" float")) + ", got " + data.shape_string());
  Tensor scales, biases;
  if (quantized) {
    scales = tensor(prefix + ".scales", {num_experts, rows, cols / qp.group_size});
    check(has(prefix + ".biases"), ErrorKind::not_found,
          dir_ + ": tensor '" + prefix + ".biases' not found (MLX affine quantization stores scales and biases)");
    biases = tensor(prefix + ".biases", {num_experts, rows, cols / qp.group_size});
  }
  std::vector<Weight> out(static_cast<size_t>(num_experts));
  for (int64_t e = 0; e < num_experts; ++e) {
    Weight& w = out[static_cast<size_t>(e)];
    w.name = prefix + "[" + std::to_string(e) + "]";
    w.rows = rows;
    w.cols = cols;
    w.quant = qp;
    w.data = data.row(e);
    if (quantized) {
      w.scales = scales.row(e);
      w.biases = biases.row(e);
    }
    validate_weight(w);
  }
  return out;
}

std::vector<std::string> Checkpoint::unused() const {
  std::vector<std::string> out;
  for (const auto& kv : index_) {
    const std::string& name = kv.first;
    if (used_.count(name)) continue;
    bool ignored = false;
    for (const auto& p : ignored_prefixes_) ignored = ignored || name.compare(0, p.size(), p) == 0;
    if (!ignored) out.push_back(name);
  }
  return out;
}

void Checkpoint::check_all_used() const {
  for (const auto& [prefix, target] : placement_) {
    check(used_.count(prefix + ".weight") != 0, ErrorKind::invalid_input,
          adapter_->weights_path() + ": tensor '" + target->a_name + "' adapts '" + prefix + "' of " + dir_ +
              ", which this model does not use");
  }
  const auto extra = unused();
  if (extra.empty()) return;
  std::string list;
  for (size_t i = 0; i < extra.size() && i < 5; ++i) list += (i ? ", " : "") + ("'" + extra[i] + "'");
  if (extra.size() > 5) list += ", ... (" + std::to_string(extra.size() - 5) + " more)";
  fail(ErrorKind::invalid_input, dir_ + ": " + std::to_string(extra.size()) + " unexpected tensor" + (extra.size() == 1 ? "" : "s") +
                                     " the model does not use: " + list + " (wrong model_type or a different checkpoint flavour?)");
}

size_t Checkpoint::file_bytes() const {
  size_t n = 0;
  for (const auto& f : files_) n += f->file_size();
  return n;
}

}  // namespace sanctum
