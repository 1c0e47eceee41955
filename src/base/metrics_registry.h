#pragma once
// A small Prometheus registry: counters, gauges and histograms, each a family with fixed label
// names, rendered in the text exposition format (version 0.0.4). Updates are lock-free atomics;
// only creating a new label combination takes the family's mutex. Children live as long as the
// registry, so callers may keep references to them.
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace sanctum {

class Counter {
 public:
  void inc(double by = 1.0) { value_.fetch_add(by, std::memory_order_relaxed); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

class Gauge {
 public:
  void set(double v) { value_.store(v, std::memory_order_relaxed); }
  void inc(double by = 1.0) { value_.fetch_add(by, std::memory_order_relaxed); }
  void dec(double by = 1.0) { value_.fetch_sub(by, std::memory_order_relaxed); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double v);
  struct Snapshot {
    std::vector<uint64_t> cumulative;  // one per bound, then +Inf
    double sum = 0;
  };
  Snapshot snapshot() const;

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> counts_;  // bounds_.size() + 1 (the last is +Inf)
  std::atomic<double> sum_{0.0};
};

enum class MetricType { counter, gauge, histogram };

// One metric name with its label names; children are keyed by label values.
template <class T>
class Family {
 public:
  Family(std::string name, std::string help, std::vector<std::string> label_names, std::vector<double> bounds = {})
      : name_(std::move(name)), help_(std::move(help)), label_names_(std::move(label_names)), bounds_(std::move(bounds)) {}

  // The child for these label values (created on first use). The count must match the label names.
  T& with(const std::vector<std::string>& values);
  const std::string& name() const { return name_; }
  const std::string& help() const { return help_; }
  const std::vector<std::string>& label_names() const { return label_names_; }
  const std::vector<double>& bounds() const { return bounds_; }

  // Visits every child in label order, under the family's lock.
  template <class F>
  void for_each(F&& fn) const {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [values, child] : children_) fn(values, *child);
  }

 private:
  std::string name_, help_;
  std::vector<std::string> label_names_;
  std::vector<double> bounds_;
  mutable std::mutex mutex_;
  std::map<std::vector<std::string>, std::unique_ptr<T>> children_;
};

class Registry {
 public:
  Family<Counter>& counter(const std::string& name, const std::string& help, std::vector<std::string> labels = {});
  Family<Gauge>& gauge(const std::string& name, const std::string& help, std::vector<std::string> labels = {});
  Family<Histogram>& histogram(const std::string& name, const std::string& help, std::vector<double> bounds,
                               std::vector<std::string> labels = {});

  // The whole registry in the Prometheus text format, families in registration order.
  std::string render() const;

 private:
  void check_new_name(const std::string& name) const;

  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<Family<Counter>>> counters_;
  std::vector<std::unique_ptr<Family<Gauge>>> gauges_;
  std::vector<std::unique_ptr<Family<Histogram>>> histograms_;
  std::vector<std::pair<MetricType, size_t>> order_;  // (type, index into its vector)
};

// sanctum_build_info{version, commit, cuda="on|off"} 1: which build this process runs, for joining
// against other series (the server's and the router's registries both carry it).
void add_build_info(Registry& registry);

// Text-format helpers (exposed for tests).
std::string escape_label_value(const std::string& value);
std::string escape_help(const std::string& help);
std::string format_sample_value(double value);  // shortest round-trip form, +Inf/-Inf/NaN
// n bounds from `start`, each `factor` times the previous.
std::vector<double> exponential_buckets(double start, double factor, int n);

}  // namespace sanctum
