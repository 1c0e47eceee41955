#include "weights/safetensors.h"

#include <algorithm>
#include <limits>

#include <nlohmann/json.hpp>

#include "base/error.h"

namespace sanctum {

namespace {

using nlohmann::json;

// Larger headers are not real checkpoints (the biggest known are a few MB) and would cost memory.
constexpr uint64_t kMaxHeaderBytes = 100ull * 1000 * 1000;

std::string range_string(uint64_t a, uint64_t b) {
  std::string s = "[";  // appended piecewise: GCC 12 -Wrestrict misfires on "[" + std::string&&
  s += std::to_string(a);
  s += ", ";
  s += std::to_string(b);
  s += "]";
  return s;
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

// A JSON value that must be a non-negative integer fitting in int64.
bool as_u63(const json& v, uint64_t* out) {
  if (v.is_number_unsigned()) {
    uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return false;
    *out = u;
    return true;
  }
  if (v.is_number_integer()) {
    int64_t i = v.get<int64_t>();
    if (i < 0) return false;
    *out = static_cast<uint64_t>(i);
    return true;
  }
  return false;
}

SafetensorsEntry parse_entry(const std::string& what, const std::string& name, const json& v, uint64_t data_size) {
  const std::string who = what + ": tensor '" + name + "'";
  check(v.is_object(), ErrorKind::invalid_input, who + ": header entry is not a JSON object");
  SafetensorsEntry e;
  e.name = name;

  auto dt = v.find("dtype");
  check(dt != v.end() && dt->is_string(), ErrorKind::invalid_input, who + ": missing string 'dtype'");
  const std::string& dtype = dt->get_ref<const std::string&>();
  check(safetensors_dtype(dtype, &e.dtype), ErrorKind::unsupported,
        who + ": dtype " + dtype + " is not supported (F32, BF16, F16, I32, U32, U8, I64, BOOL)");

  auto sh = v.find("shape");
  check(sh != v.end() && sh->is_array(), ErrorKind::invalid_input, who + ": missing array 'shape'");
  // Overflow-safe element count: every dim is checked against the data section before multiplying.
  uint64_t numel = 1;
  bool numel_overflow = false;
  for (const json& d : *sh) {
    if (d.is_number_integer() && !d.is_number_unsigned() && d.get<int64_t>() < 0) {
      fail(ErrorKind::invalid_input, who + ": negative dimension " + std::to_string(d.get<int64_t>()) + " in shape");
    }
    uint64_t n = 0;
    check(as_u63(d, &n), ErrorKind::invalid_input, who + ": shape entries must be non-negative integers");
    e.shape.push_back(static_cast<int64_t>(n));
    if (n != 0 && numel > std::numeric_limits<uint64_t>::max() / n) numel_overflow = true;
    else numel *= n;
  }

  auto off = v.find("data_offsets");
  check(off != v.end() && off->is_array() && off->size() == 2, ErrorKind::invalid_input,
        who + ": 'data_offsets' must be an array [begin, end]");
  check(as_u63((*off)[0], &e.begin) && as_u63((*off)[1], &e.end), ErrorKind::invalid_input,
        who + ": data_offsets must be non-negative integers");
  check(e.begin <= e.end, ErrorKind::invalid_input, who + ": data_offsets " + range_string(e.begin, e.end) + " end before they begin");
  check(e.end <= data_size, ErrorKind::invalid_input,
        who + " data_offsets " + range_string(e.begin, e.end) + " exceed the data section (" + std::to_string(data_size) +
            " bytes): file truncated?");

  const uint64_t elem = dtype_size(e.dtype);
  const bool size_ok = !numel_overflow && numel <= std::numeric_limits<uint64_t>::max() / elem && numel * elem == e.end - e.begin;
  check(size_ok, ErrorKind::invalid_input,
        who + ": shape " + shape_string(e.shape) + " " + dtype + " needs " +
            (numel_overflow ? std::string("more than 2^64") : std::to_string(numel) + " x " + std::to_string(elem)) +
            " bytes but data_offsets " + range_string(e.begin, e.end) + " hold " + std::to_string(e.end - e.begin));
  return e;
}

}  // namespace

bool safetensors_dtype(const std::string& name, DType* out) {
  static const std::map<std::string, DType> known = {
      {"F32", DType::f32}, {"BF16", DType::bf16}, {"F16", DType::f16}, {"I32", DType::i32},
      {"U32", DType::u32}, {"U8", DType::u8},     {"I64", DType::i64}, {"BOOL", DType::u8},
  };
  auto it = known.find(name);
  if (it == known.end()) return false;
  *out = it->second;
  return true;
}

SafetensorsHeader parse_safetensors_header(const uint8_t* bytes, size_t size, const std::string& what) {
  check(size >= 8, ErrorKind::invalid_input,
        what + ": file is " + std::to_string(size) + " bytes, too short for a safetensors header: file truncated?");
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | bytes[i];  // little-endian on any host
  check(header_len <= size - 8, ErrorKind::invalid_input,
        what + ": header length " + std::to_string(header_len) + " exceeds the file (" + std::to_string(size) +
            " bytes): file truncated or not safetensors");
  check(header_len <= kMaxHeaderBytes, ErrorKind::invalid_input,
        what + ": header length " + std::to_string(header_len) + " is implausibly large (limit 100 MB): not a safetensors file?");

  const char* text = reinterpret_cast<const char*>(bytes + 8);
  json header;
  try {
    header = json::parse(text, text + header_len);
  } catch (const json::exception& e) {
    fail(ErrorKind::invalid_input, what + ": header is not valid JSON (" + e.what() + ")");
  }
  check(header.is_object(), ErrorKind::invalid_input, what + ": header is not a JSON object");

  SafetensorsHeader out;
  out.data_offset = 8 + header_len;
  out.data_size = size - out.data_offset;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      check(it->is_object() || it->is_null(), ErrorKind::invalid_input, what + ": __metadata__ is not a JSON object");
      if (it->is_object()) {
        // Values are strings by the format; other values are foreign extensions and are skipped.
        for (auto m = it->begin(); m != it->end(); ++m) {
          if (m->is_string()) out.metadata[m.key()] = m->get<std::string>();
        }
      }
      continue;
    }
    out.entries.push_back(parse_entry(what, it.key(), *it, out.data_size));
  }

  // Tensors must not share bytes (empty tensors occupy none).
  std::vector<const SafetensorsEntry*> by_begin;
  for (const auto& e : out.entries) {
    if (e.end > e.begin) by_begin.push_back(&e);
  }
  std::sort(by_begin.begin(), by_begin.end(), [](const SafetensorsEntry* a, const SafetensorsEntry* b) { return a->begin < b->begin; });
  for (size_t i = 1; i < by_begin.size(); ++i) {
    const SafetensorsEntry& a = *by_begin[i - 1];
    const SafetensorsEntry& b = *by_begin[i];
    check(b.begin >= a.end, ErrorKind::invalid_input,
          what + ": tensor '" + b.name + "' data_offsets " + range_string(b.begin, b.end) + " overlap tensor '" + a.name + "' " +
              range_string(a.begin, a.end));
  }
  return out;
}

SafetensorsFile::SafetensorsFile(const std::string& path, const PinnedFile* pinned)
    : file_(pinned ? MappedFile(path, *pinned) : MappedFile(path)) {
  SafetensorsHeader h = parse_safetensors_header(file_.data(), file_.size(), path);
  data_begin_ = file_.data() + h.data_offset;
  entries_ = std::move(h.entries);
  metadata_ = std::move(h.metadata);
}

std::shared_ptr<SafetensorsFile> SafetensorsFile::open(const std::string& path, const PinnedFile* pinned) {
  return std::shared_ptr<SafetensorsFile>(new SafetensorsFile(path, pinned));
}

Tensor SafetensorsFile::view(size_t i) const {
  check(i < entries_.size(), ErrorKind::internal, path() + ": entry index out of range");
  const SafetensorsEntry& e = entries_[i];
  check(e.shape.size() <= static_cast<size_t>(kMaxDims), ErrorKind::unsupported,
        path() + ": tensor '" + e.name + "' has " + std::to_string(e.shape.size()) + " dimensions; at most " + std::to_string(kMaxDims) +
            " are supported");
  return Tensor::view_of(data_begin_ + e.begin, e.shape.data(), static_cast<int>(e.shape.size()), e.dtype,
                         std::static_pointer_cast<const void>(shared_from_this()));
}

Tensor SafetensorsFile::view_flat(size_t i) const {
  check(i < entries_.size(), ErrorKind::internal, path() + ": entry index out of range");
  const SafetensorsEntry& e = entries_[i];
  int64_t n = 1;
  for (int64_t d : e.shape) n *= d;
  return Tensor::view_of(data_begin_ + e.begin, {n}, e.dtype, std::static_pointer_cast<const void>(shared_from_this()));
}

}  // namespace sanctum
