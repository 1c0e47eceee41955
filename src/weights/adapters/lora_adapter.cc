#include "weights/adapters/lora_adapter.h"

#include <cmath>
#include <filesystem>
#include <system_error>

#include "base/error.h"
#include "base/mapped_file.h"
#include "weights/safetensors.h"

namespace fs = std::filesystem;

namespace sanctum {

namespace {

bool strip_suffix(std::string& s, const std::string& suffix) {
  if (!s.ends_with(suffix)) return false;
  s.resize(s.size() - suffix.size());
  return true;
}

// A float tensor of the adapter file as an owned f32 copy; (in, r) matrices transposed to (r, in)
// when `transpose`. Refuses non-float dtypes and non-finite values, naming the tensor.
Tensor to_f32(const Tensor& t, const std::string& where, bool transpose) {
  check(is_float(t.dtype()), ErrorKind::invalid_input, where + ": expected a float tensor, got " + t.shape_string());
  check(t.is_contiguous(), ErrorKind::internal, where + ": not contiguous");
  const int64_t n = t.numel();
  Tensor out = t.ndim() == 1   ? Tensor::zeros({t.dim(0)}, DType::f32)
               : t.ndim() == 2 ? Tensor::zeros({transpose ? t.dim(1) : t.dim(0), transpose ? t.dim(0) : t.dim(1)}, DType::f32)
                               : Tensor::zeros({t.dim(0), t.dim(1), t.dim(2)}, DType::f32);
  float* dst = out.data<float>();
  for (int64_t i = 0; i < n; ++i) {
    const float v = load_as_f32(t.data<void>(), t.dtype(), i);
    if (!std::isfinite(v))
      fail(ErrorKind::invalid_input, where + ": element " + std::to_string(i) + " is not finite (" + std::to_string(v) + ")");
    if (transpose) dst[(i % t.dim(1)) * t.dim(0) + i / t.dim(1)] = v;
    else dst[i] = v;
  }
  return out;
}

struct Pieces {
  std::string a, b, m;  // tensor names
};

// Groups the file's tensors by module: mlx-lm's `<module>.lora_a|lora_b|m`, PEFT's
// `base_model.model.<module>.lora_A.weight|lora_B.weight|lora_magnitude_vector[.weight]`.
std::map<std::string, Pieces> group_by_module(const SafetensorsFile& file, AdapterFormat format, const std::string& path) {
  std::map<std::string, Pieces> modules;
  for (const SafetensorsEntry& e : file.entries()) {
    std::string module = e.name;
    std::string* slot = nullptr;
    if (format == AdapterFormat::mlx_lm) {
      if (strip_suffix(module, ".lora_a")) slot = &modules[module].a;
      else if (strip_suffix(module, ".lora_b")) slot = &modules[module].b;
      else if (strip_suffix(module, ".m")) slot = &modules[module].m;
    } else {
      check(e.name.find("lora_embedding_") == std::string::npos, ErrorKind::unsupported,
            path + ": tensor '" + e.name + "': LoRA on embeddings is not supported; retrain without the embedding in target_modules");
      check(module.starts_with("base_model.model."), ErrorKind::invalid_input,
            path + ": tensor '" + e.name + "': PEFT adapter tensors are named base_model.model.<module>.lora_A.weight");
      module = module.substr(17);
      strip_suffix(module, ".default.weight") || strip_suffix(module, ".weight");
      if (strip_suffix(module, ".lora_A")) slot = &modules[module].a;
      else if (strip_suffix(module, ".lora_B")) slot = &modules[module].b;
      else if (strip_suffix(module, ".lora_magnitude_vector")) slot = &modules[module].m;
    }
    check(slot != nullptr, ErrorKind::invalid_input,
          path + ": tensor '" + e.name + "' is not a LoRA tensor (" +
              (format == AdapterFormat::mlx_lm ? "expected <module>.lora_a, .lora_b or .m"
                                               : "expected <module>.lora_A.weight or .lora_B.weight") +
              "): a full fine-tune or another adapter type?");
    check(slot->empty(), ErrorKind::invalid_input,
          path + ": tensors '" + *slot + "' and '" + e.name + "' are the same piece of one module");
    *slot = e.name;
  }
  return modules;
}

const SafetensorsEntry* find_entry(const SafetensorsFile& file, const std::string& name, size_t* index) {
  const auto& entries = file.entries();
  for (size_t i = 0; i < entries.size(); ++i) {
    if (entries[i].name != name) continue;
    *index = i;
    return &entries[i];
  }
  return nullptr;
}

Tensor read(const SafetensorsFile& file, const std::string& name, const std::string& path, bool transpose) {
  size_t i = 0;
  find_entry(file, name, &i);
  return to_f32(file.view(i), path + ": tensor '" + name + "'", transpose);
}

LoraTarget make_target(const SafetensorsFile& file, const std::string& module, const Pieces& p, const AdapterConfig& config,
                       const std::string& path) {
  const bool mlx = config.format == AdapterFormat::mlx_lm;
  check(!p.a.empty() && !p.b.empty(), ErrorKind::invalid_input,
        path + ": module '" + module + "' has " +
            (p.a.empty() ? "no A (" + std::string(mlx ? "lora_a" : "lora_A") + ")"
                         : "no B (" + std::string(mlx ? "lora_b" : "lora_B") + ")") +
            " tensor: truncated or mixed-up adapter");
  check(config.dora || p.m.empty(), ErrorKind::invalid_input,
        path + ": tensor '" + p.m + "' is a DoRA magnitude, but the config declares a plain LoRA adapter (" +
            (mlx ? "fine_tune_type" : "use_dora") + ")");
  check(!config.dora || !p.m.empty(), ErrorKind::invalid_input,
        path + ": module '" + module + "' has no DoRA magnitude tensor (" + (mlx ? "<module>.m" : "lora_magnitude_vector") +
            ") although the config declares DoRA");
  size_t ia = 0, ib = 0;
  const SafetensorsEntry& ea = *find_entry(file, p.a, &ia);
  const SafetensorsEntry& eb = *find_entry(file, p.b, &ib);
  LoraTarget t;
  t.module = module;
  t.file = path;
  t.a_name = p.a;
  t.b_name = p.b;
  t.m_name = p.m;
  const bool stacked = ea.shape.size() == 3;
  check(ea.shape.size() == eb.shape.size() && (ea.shape.size() == 2 || (stacked && mlx)), ErrorKind::invalid_input,
        path + ": tensors '" + p.a + "' and '" + p.b + "' must both be 2-D" + (mlx ? " (or 3-D per-expert stacks)" : ""));
  // mlx-lm stores A as (in, r) and B as (r, out) for linears, (E, r, in) / (E, out, r) for switch
  // layers; PEFT as (r, in) / (out, r). All become (r, in) / (out, r).
  const bool transpose = mlx && !stacked;
  t.a = read(file, p.a, path, transpose);
  t.b = read(file, p.b, path, transpose);
  const int d = stacked ? 1 : 0;
  t.experts = stacked ? t.a.dim(0) : 0;
  t.rank = t.a.dim(d);
  t.in = t.a.dim(d + 1);
  t.out = t.b.dim(d);
  check(t.b.dim(d + 1) == t.rank && (!stacked || t.b.dim(0) == t.experts), ErrorKind::invalid_input,
        path + ": tensors '" + p.a + "' " + t.a.shape_string() + " and '" + p.b + "' " + t.b.shape_string() + " do not share one rank" +
            (stacked ? " and expert count" : ""));
  const int want = config.rank_for(module);
  check(t.rank == want, ErrorKind::invalid_input,
        path + ": tensor '" + p.a + "' has rank " + std::to_string(t.rank) + " but adapter_config.json says " + std::to_string(want) +
            (mlx ? " (lora_parameters.rank)" : " (r / rank_pattern)"));
  t.scale = config.scale_for(module);
  check(std::isfinite(t.scale), ErrorKind::invalid_input, path + ": module '" + module + "': the scale is not finite");
  if (!p.m.empty()) {
    check(!stacked, ErrorKind::unsupported, path + ": tensor '" + p.m + "': DoRA on per-expert stacks is not supported (mlx-lm has none)");
    t.magnitude = read(file, p.m, path, false);
    check(t.magnitude.ndim() == 1 && t.magnitude.dim(0) == t.out, ErrorKind::invalid_input,
          path + ": tensor '" + p.m + "' is " + t.magnitude.shape_string() + "; the DoRA magnitude has one value per output (" +
              std::to_string(t.out) + ")");
  }
  return t;
}

}  // namespace

std::shared_ptr<const LoraAdapter> LoraAdapter::load(const std::string& dir, const PinnedFiles* verified) {
  std::error_code ec;
  check(fs::is_directory(dir, ec), ErrorKind::not_found, dir + ": adapter directory not found");
  if (verified) verified->check_in_place(dir);
  const fs::path root(dir);
  const bool mlx = fs::exists(root / "adapters.safetensors", ec), peft = fs::exists(root / "adapter_model.safetensors", ec);
  check(mlx || peft, ErrorKind::not_found,
        dir + ": no adapter weights (expected adapters.safetensors from mlx-lm or adapter_model.safetensors from PEFT)");
  check(!(mlx && peft), ErrorKind::invalid_input,
        dir + ": holds both adapters.safetensors and adapter_model.safetensors; keep the one the config belongs to");
  const std::string config_path = (root / "adapter_config.json").string();
  check(fs::exists(config_path, ec), ErrorKind::not_found,
        config_path + ": not found (an adapter directory needs adapter_config.json beside its weights)");

  auto adapter = std::make_shared<LoraAdapter>();
  adapter->dir_ = dir;
  const AdapterFormat format = mlx ? AdapterFormat::mlx_lm : AdapterFormat::peft;
  const std::string text = verified ? verified->at(dir, "adapter_config.json").read_all(config_path) : read_file(config_path);
  adapter->config_ = parse_adapter_config(text, config_path, format);

  const std::string weights = mlx ? "adapters.safetensors" : "adapter_model.safetensors";
  adapter->weights_path_ = (root / weights).string();
  auto file = SafetensorsFile::open(adapter->weights_path_, verified ? &verified->at(dir, weights) : nullptr);
  const auto modules = group_by_module(*file, format, adapter->weights_path_);
  check(!modules.empty(), ErrorKind::invalid_input, adapter->weights_path_ + ": holds no LoRA tensors");
  for (const auto& [module, pieces] : modules)
    adapter->targets_.emplace(module, make_target(*file, module, pieces, adapter->config_, adapter->weights_path_));
  return adapter;
}

}  // namespace sanctum
