#include "base/metrics_registry.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "base/error.h"
#include "base/version.h"

namespace sanctum {

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(new std::atomic<uint64_t>[bounds_.size() + 1]) {
  for (size_t i = 0; i <= bounds_.size(); ++i) counts_[i].store(0, std::memory_order_relaxed);
}

void Histogram::observe(double v) {
  // Buckets are "less than or equal": the first bound >= v takes it.
  size_t i = static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin());
  counts_[i].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(v, std::memory_order_relaxed);
}

Histogram::Snapshot Histogram::snapshot() const {
  Snapshot s;
  s.cumulative.resize(bounds_.size() + 1);
  uint64_t running = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    running += counts_[i].load(std::memory_order_relaxed);
    s.cumulative[i] = running;
  }
  s.sum = sum_.load(std::memory_order_relaxed);
  return s;
}

template <class T>
T& Family<T>::with(const std::vector<std::string>& values) {
  check(values.size() == label_names_.size(), ErrorKind::internal,
        "metric " + name_ + ": expected " + std::to_string(label_names_.size()) + " label values");
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = children_.find(values);
  if (it != children_.end()) return *it->second;
  std::unique_ptr<T> child;
  if constexpr (std::is_same_v<T, Histogram>) child = std::make_unique<Histogram>(bounds_);
  else child = std::make_unique<T>();
  T& ref = *child;
  children_.emplace(values, std::move(child));
  return ref;
}

template class Family<Counter>;
template class Family<Gauge>;
template class Family<Histogram>;

void Registry::check_new_name(const std::string& name) const {
  auto taken = [&](const auto& v) { return std::any_of(v.begin(), v.end(), [&](const auto& f) { return f->name() == name; }); };
  check(!taken(counters_) && !taken(gauges_) && !taken(histograms_), ErrorKind::internal, "metric " + name + " registered twice");
}

Family<Counter>& Registry::counter(const std::string& name, const std::string& help, std::vector<std::string> labels) {
  std::lock_guard<std::mutex> lock(mutex_);
  check_new_name(name);
  counters_.push_back(std::make_unique<Family<Counter>>(name, help, std::move(labels)));
  order_.emplace_back(MetricType::counter, counters_.size() - 1);
  return *counters_.back();
}

Family<Gauge>& Registry::gauge(const std::string& name, const std::string& help, std::vector<std::string> labels) {
  std::lock_guard<std::mutex> lock(mutex_);
  check_new_name(name);
  gauges_.push_back(std::make_unique<Family<Gauge>>(name, help, std::move(labels)));
  order_.emplace_back(MetricType::gauge, gauges_.size() - 1);
  return *gauges_.back();
}

Family<Histogram>& Registry::histogram(const std::string& name, const std::string& help, std::vector<double> bounds,
                                       std::vector<std::string> labels) {
  check(!bounds.empty() && std::is_sorted(bounds.begin(), bounds.end()) && std::adjacent_find(bounds.begin(), bounds.end()) == bounds.end(),
        ErrorKind::internal, "histogram " + name + ": bounds must be strictly increasing");
  std::lock_guard<std::mutex> lock(mutex_);
  check_new_name(name);
  histograms_.push_back(std::make_unique<Family<Histogram>>(name, help, std::move(labels), std::move(bounds)));
  order_.emplace_back(MetricType::histogram, histograms_.size() - 1);
  return *histograms_.back();
}

std::string escape_label_value(const std::string& value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string escape_help(const std::string& help) {
  std::string out;
  for (char c : help) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string format_sample_value(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, value);
  return std::string(buf, res.ptr);
}

std::vector<double> exponential_buckets(double start, double factor, int n) {
  std::vector<double> out;
  double v = start;
  for (int i = 0; i < n; ++i, v *= factor) out.push_back(v);
  return out;
}

namespace {

// {a="x",b="y"} plus an optional extra pair (le for buckets); empty when there are no labels.
std::string label_block(const std::vector<std::string>& names, const std::vector<std::string>& values, const std::string& extra_name = "",
                        const std::string& extra_value = "") {
  if (names.empty() && extra_name.empty()) return "";
  std::string out = "{";
  bool first = true;
  for (size_t i = 0; i < names.size(); ++i) {
    if (!first) out += ",";
    first = false;
    out += names[i] + "=\"" + escape_label_value(values[i]) + "\"";
  }
  if (!extra_name.empty()) {
    if (!first) out += ",";
    out += extra_name + "=\"" + extra_value + "\"";
  }
  return out + "}";
}

template <class T>
void render_header(std::string& out, const Family<T>& f, const char* type) {
  out += "# HELP " + f.name() + " " + escape_help(f.help()) + "\n";
  out += "# TYPE " + f.name() + " " + type + "\n";
}

template <class T>
void render_scalar(std::string& out, const Family<T>& f, const char* type) {
  render_header(out, f, type);
  f.for_each([&](const std::vector<std::string>& values, const T& m) {
    out += f.name() + label_block(f.label_names(), values) + " " + format_sample_value(m.value()) + "\n";
  });
}

void render_histogram(std::string& out, const Family<Histogram>& f) {
  render_header(out, f, "histogram");
  f.for_each([&](const std::vector<std::string>& values, const Histogram& h) {
    Histogram::Snapshot s = h.snapshot();
    const auto& bounds = f.bounds();
    for (size_t i = 0; i < bounds.size(); ++i)
      out += f.name() + "_bucket" + label_block(f.label_names(), values, "le", format_sample_value(bounds[i])) + " " +
             std::to_string(s.cumulative[i]) + "\n";
    out += f.name() + "_bucket" + label_block(f.label_names(), values, "le", "+Inf") + " " + std::to_string(s.cumulative.back()) + "\n";
    out += f.name() + "_sum" + label_block(f.label_names(), values) + " " + format_sample_value(s.sum) + "\n";
    out += f.name() + "_count" + label_block(f.label_names(), values) + " " + std::to_string(s.cumulative.back()) + "\n";
  });
}

}  // namespace

std::string Registry::render() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string out;
  out.reserve(8192);
  for (const auto& [type, index] : order_) {
    switch (type) {
      case MetricType::counter: render_scalar(out, *counters_[index], "counter"); break;
      case MetricType::gauge: render_scalar(out, *gauges_[index], "gauge"); break;
      case MetricType::histogram: render_histogram(out, *histograms_[index]); break;
    }
  }
  return out;
}

void add_build_info(Registry& registry) {
  registry
      .gauge("sanctum_build_info", "The running build: version, git commit, CUDA backend built in (always 1).",
             {"version", "commit", "cuda"})
      .with({build::version(), build::commit(), build::cuda_built() ? "on" : "off"})
      .set(1);
}

}  // namespace sanctum
