#include "router/prober.h"

#include <algorithm>
#include <cctype>

#include <nlohmann/json.hpp>

#include "router/upstream_call.h"

namespace sanctum::router {

namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::vector<std::pair<std::string, std::string>> auth_headers(const UpstreamState& u) {
  if (u.backend.config.api_key.empty()) return {};
  return {{"Authorization", "Bearer " + u.backend.config.api_key}};
}

}  // namespace

bool Prober::probe_health(UpstreamState& u, double timeout_s, std::string& detail) {
  Timeouts t{timeout_s, timeout_s, timeout_s, timeout_s};
  for (const char* path : {"/v1/models", "/health"}) {
    try {
      UpstreamCall call(u.pool, t, nullptr);
      UpstreamRequest req;
      req.method = "GET";
      req.path = path;
      req.headers = auth_headers(u);
      call.start(req);
      call.read_all(1 << 20);
      if (call.status() >= 200 && call.status() < 300) {
        detail = std::string(path) + " answered " + std::to_string(call.status());
        return true;
      }
      detail = std::string(path) + " answered " + std::to_string(call.status());
    } catch (const UpstreamFailure& f) {
      detail = std::string(path) + ": " + f.what();
      if (f.kind() == FailureKind::connect || f.kind() == FailureKind::timeout) return false;  // /health would fail the same way
    }
  }
  return false;
}

bool Prober::run_canary(UpstreamState& u, const CanaryConfig& canary, std::string& detail) {
  Timeouts t{std::min(canary.timeout_s, u.backend.config.timeouts.connect_s), canary.timeout_s, canary.timeout_s, canary.timeout_s};
  nlohmann::json body = {{"model", u.backend.config.models.front()},
                         {"messages", nlohmann::json::array({{{"role", "user"}, {"content", canary.prompt}}})},
                         {"max_tokens", canary.max_tokens},
                         {"temperature", 0},
                         {"stream", false}};
  try {
    UpstreamCall call(u.pool, t, nullptr);
    UpstreamRequest req;
    req.path = "/v1/chat/completions";
    req.body = body.dump();
    req.headers = auth_headers(u);
    req.headers.emplace_back("X-Request-Id", "router-canary");
    call.start(req);
    const std::string answer_body = call.read_all(4 << 20);
    if (call.status() != 200) {
      detail = "HTTP " + std::to_string(call.status());
      return false;
    }
    nlohmann::json j = nlohmann::json::parse(answer_body, nullptr, false);
    std::string answer;
    if (j.is_object() && j.contains("choices") && j["choices"].is_array() && !j["choices"].empty()) {
      const auto& c = j["choices"][0];
      if (c.contains("message") && c["message"].is_object() && c["message"].contains("content") && c["message"]["content"].is_string())
        answer = c["message"]["content"].get<std::string>();
    }
    if (lower(answer).find(lower(canary.expect)) == std::string::npos) {
      detail = "answer '" + answer.substr(0, 200) + "' lacks '" + canary.expect + "'";
      return false;
    }
    detail = "answer contains '" + canary.expect + "'";
    return true;
  } catch (const UpstreamFailure& f) {
    // An unreachable upstream is the health probe's business; the canary judges answers only.
    detail = std::string("no answer: ") + f.what();
    throw;
  }
}

void Prober::start() {
  for (auto& b : fleet_.backends())
    for (auto& up : b->upstreams) threads_.emplace_back([this, u = up.get()] { loop(*u); });
}

void Prober::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& t : threads_)
    if (t.joinable()) t.join();
  threads_.clear();
}

void Prober::loop(UpstreamState& u) {
  using Clock = std::chrono::steady_clock;
  const HealthConfig& hc = fleet_.config().health;
  const CanaryConfig& canary = u.backend.config.canary;
  auto next_health = Clock::now();
  auto next_canary = Clock::now();
  auto dur = [](double s) { return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s)); };
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    const auto now = Clock::now();
    if (now >= next_health) {
      lock.unlock();
      std::string detail;
      const bool ok = probe_health(u, hc.timeout_s, detail);
      fleet_.set_health(u, ok, detail);
      lock.lock();
      next_health = Clock::now() + dur(hc.interval_s);
      if (stopping_) break;
    }
    if (canary.enabled && Clock::now() >= next_canary) {
      lock.unlock();
      std::string detail;
      try {
        const bool passed = run_canary(u, canary, detail);
        fleet_.set_canary(u, passed, detail);
      } catch (const UpstreamFailure&) {
        fleet_.metrics().canary_checks.with({u.backend.config.name, u.label, "unreachable"}).inc();
      }
      lock.lock();
      next_canary = Clock::now() + dur(canary.interval_s);
      if (stopping_) break;
    }
    const auto until = canary.enabled ? std::min(next_health, next_canary) : next_health;
    wake_.wait_until(lock, until, [&] { return stopping_; });
  }
}

}  // namespace sanctum::router
