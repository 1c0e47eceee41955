// The Prometheus registry: text format details that scrapers are strict about.
#include <gtest/gtest.h>

#include <thread>

#include "base/metrics_registry.h"
#include "server/server_metrics.h"

namespace sanctum::server {
namespace {

TEST(ServerMetrics, counter_renders_help_type_and_labelled_samples) {
  Registry r;
  auto& c = r.counter("x_total", "Things.", {"route", "status"});
  c.with({"/a", "200"}).inc();
  c.with({"/a", "200"}).inc(2);
  std::string text = r.render();
  EXPECT_NE(text.find("# HELP x_total Things.\n# TYPE x_total counter\n"), std::string::npos);
  EXPECT_NE(text.find("x_total{route=\"/a\",status=\"200\"} 3\n"), std::string::npos);
}

TEST(ServerMetrics, label_values_and_help_are_escaped) {
  Registry r;
  r.gauge("g", "line\\one\ntwo", {"l"}).with({"a\"b\\c\nd"}).set(1.5);
  std::string text = r.render();
  EXPECT_NE(text.find("# HELP g line\\\\one\\ntwo\n"), std::string::npos);
  EXPECT_NE(text.find("g{l=\"a\\\"b\\\\c\\nd\"} 1.5\n"), std::string::npos);
}

TEST(ServerMetrics, histogram_buckets_are_cumulative_and_le_inclusive) {
  Registry r;
  auto& h = r.histogram("h_seconds", "H.", {0.1, 1.0}).with({});
  h.observe(0.1);  // le=0.1 includes its bound
  h.observe(0.5);
  h.observe(5.0);
  std::string text = r.render();
  EXPECT_NE(text.find("h_seconds_bucket{le=\"0.1\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("h_seconds_bucket{le=\"1\"} 2\n"), std::string::npos);
  EXPECT_NE(text.find("h_seconds_bucket{le=\"+Inf\"} 3\n"), std::string::npos);
  EXPECT_NE(text.find("h_seconds_sum 5.6\n"), std::string::npos);
  EXPECT_NE(text.find("h_seconds_count 3\n"), std::string::npos);
}

TEST(ServerMetrics, concurrent_increments_are_not_lost) {
  Registry r;
  auto& c = r.counter("n_total", "N.", {"k"});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) c.with({"x"}).inc();
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(c.with({"x"}).value(), 40000.0);
}

TEST(ServerMetrics, duplicate_names_and_wrong_label_counts_are_refused) {
  Registry r;
  auto& c = r.counter("dup_total", "D.", {"a"});
  EXPECT_ANY_THROW(r.gauge("dup_total", "again"));
  EXPECT_ANY_THROW(c.with({"a", "b"}));
}

TEST(ServerMetrics, sample_values_use_prometheus_spellings) {
  EXPECT_EQ(format_sample_value(1.0 / 0.0), "+Inf");
  EXPECT_EQ(format_sample_value(-1.0 / 0.0), "-Inf");
  EXPECT_EQ(format_sample_value(0.0 / 0.0), "NaN");
  EXPECT_EQ(format_sample_value(0.005), "0.005");
}

TEST(ServerMetrics, server_series_exist_with_their_exact_names) {
  ServerMetrics m;
  m.observe_http("/health", "GET", 200, 0.001);
  std::string text = m.registry.render();
  for (const char* name :
       {"sanctum_mlx_http_requests_total", "sanctum_mlx_http_duration_seconds", "sanctum_mlx_http_inflight_requests",
        "sanctum_mlx_inference_requests_total", "sanctum_mlx_inference_completion_tokens_total",
        "sanctum_mlx_inference_prompt_tokens_total", "sanctum_mlx_inference_duration_seconds", "sanctum_mlx_inference_tokens_per_sec",
        "sanctum_mlx_inference_completion_tokens", "sanctum_mlx_startup_seconds", "sanctum_mlx_model_loaded"})
    EXPECT_NE(text.find(std::string("# TYPE ") + name + " "), std::string::npos) << name;
  EXPECT_NE(text.find("sanctum_mlx_http_duration_seconds_bucket{route=\"/health\",method=\"GET\",status=\"200\",le=\"180\"} 1"),
            std::string::npos);
}

}  // namespace
}  // namespace sanctum::server
