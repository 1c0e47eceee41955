#include "router/router_config.h"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "base/error.h"

namespace sanctum::router {

namespace {

// A YAML node with its key path, so every error names where it is ("backends[1].timeouts.connect_s").
class Field {
 public:
  Field(YAML::Node node, std::string path, const std::string& source) : node_(std::move(node)), path_(std::move(path)), source_(source) {}

  const std::string& path() const { return path_; }
  bool present() const { return node_.IsDefined() && !node_.IsNull(); }
  [[noreturn]] void error(const std::string& why) const {
    fail(ErrorKind::invalid_argument, source_ + ": " + (path_.empty() ? "top level" : path_) + ": " + why);
  }

  // A mapping whose keys must all be in `allowed` (typos are errors, not silently ignored).
  void expect_map(std::initializer_list<const char*> allowed) const {
    if (!node_.IsMap()) error("must be a mapping");
    std::set<std::string> ok(allowed.begin(), allowed.end());
    for (const auto& kv : node_) {
      const std::string key = kv.first.Scalar();
      if (!ok.count(key)) {
        std::string list;
        for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
        Field(kv.second, join(key), source_).error("unknown key (allowed here: " + list + ")");
      }
    }
  }
  Field operator[](const std::string& key) const { return Field(node_[key], join(key), source_); }
  Field at(size_t i) const { return Field(node_[i], path_ + "[" + std::to_string(i) + "]", source_); }
  size_t list_size() const {
    if (!node_.IsSequence()) error("must be a list");
    return node_.size();
  }

  std::string str() const {
    if (!node_.IsScalar()) error("must be a string");
    return node_.Scalar();
  }
  std::string str_or(const std::string& fallback) const { return present() ? str() : fallback; }
  bool boolean_or(bool fallback) const {
    if (!present()) return fallback;
    bool v;
    if (!node_.IsScalar() || !YAML::convert<bool>::decode(node_, v)) error("must be true or false");
    return v;
  }
  double number_or(double fallback, double min, double max) const {
    if (!present()) return fallback;
    double v;
    if (!node_.IsScalar() || !YAML::convert<double>::decode(node_, v) || !std::isfinite(v)) error("must be a number");
    if (v < min || v > max) {
      std::ostringstream s;
      s << "must be in " << min << ".." << max << " (got " << node_.Scalar() << ")";
      error(s.str());
    }
    return v;
  }
  long long integer_or(long long fallback, long long min, long long max) const {
    if (!present()) return fallback;
    long long v;
    if (!node_.IsScalar() || !YAML::convert<long long>::decode(node_, v)) error("must be a whole number");
    if (v < min || v > max) error("must be in " + std::to_string(min) + ".." + std::to_string(max) + " (got " + node_.Scalar() + ")");
    return v;
  }
  std::vector<std::string> strings() const {
    std::vector<std::string> out;
    if (!present()) return out;
    if (node_.IsScalar()) return {node_.Scalar()};
    for (size_t i = 0; i < list_size(); ++i) out.push_back(at(i).str());
    return out;
  }
  const YAML::Node& node() const { return node_; }

 private:
  std::string join(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }
  YAML::Node node_;
  std::string path_;
  const std::string& source_;
};

constexpr double kDay = 86400;

BudgetLimits parse_budget(const Field& f, BudgetLimits base) {
  if (!f.present()) return base;
  f.expect_map({"requests", "tokens", "window_s"});
  base.requests = f["requests"].integer_or(base.requests, 0, 1LL << 40);
  base.tokens = f["tokens"].integer_or(base.tokens, 0, 1LL << 50);
  base.window_s = f["window_s"].number_or(base.window_s, 0.001, 31 * kDay);
  return base;
}

CircuitBreaker::Params parse_breaker(const Field& f, CircuitBreaker::Params base) {
  if (!f.present()) return base;
  f.expect_map({"failures", "cooldown_s"});
  base.failures = static_cast<int>(f["failures"].integer_or(base.failures, 1, 1000000));
  base.cooldown_s = f["cooldown_s"].number_or(base.cooldown_s, 0.001, kDay);
  return base;
}

QualityConfig parse_quality(const Field& f, QualityConfig base) {
  if (!f.present()) return base;
  f.expect_map({"empty", "utf8", "repetition", "recovery_s"});
  base.empty = f["empty"].boolean_or(base.empty);
  base.utf8 = f["utf8"].boolean_or(base.utf8);
  base.recovery_s = f["recovery_s"].number_or(base.recovery_s, 0, kDay);
  Field r = f["repetition"];
  if (r.present()) {
    if (r.node().IsScalar()) {
      base.repetition.enabled = r.boolean_or(true);
    } else {
      r.expect_map({"enabled", "min_repeats", "max_period", "min_chars"});
      base.repetition.enabled = r["enabled"].boolean_or(true);
      base.repetition.min_repeats = static_cast<int>(r["min_repeats"].integer_or(base.repetition.min_repeats, 2, 100000));
      base.repetition.max_period = static_cast<int>(r["max_period"].integer_or(base.repetition.max_period, 1, 4096));
      base.repetition.min_chars = static_cast<int>(r["min_chars"].integer_or(base.repetition.min_chars, 1, 1 << 20));
    }
  }
  return base;
}

CanaryConfig parse_canary(const Field& f, CanaryConfig base) {
  if (!f.present()) return base;
  if (f.node().IsScalar()) {  // `canary: false` turns an inherited canary off
    base.enabled = f.boolean_or(base.enabled);
    return base;
  }
  f.expect_map({"enabled", "interval_s", "prompt", "expect", "max_tokens", "timeout_s"});
  base.enabled = f["enabled"].boolean_or(true);
  base.interval_s = f["interval_s"].number_or(base.interval_s, 0.05, kDay);
  base.prompt = f["prompt"].str_or(base.prompt);
  base.expect = f["expect"].str_or(base.expect);
  base.max_tokens = static_cast<int>(f["max_tokens"].integer_or(base.max_tokens, 1, 4096));
  base.timeout_s = f["timeout_s"].number_or(base.timeout_s, 0.01, 3600);
  if (base.enabled && (base.prompt.empty() || base.expect.empty())) f.error("prompt and expect must not be empty");
  return base;
}

LatencyConfig parse_latency(const Field& f, LatencyConfig base) {
  if (!f.present()) return base;
  f.expect_map({"alpha", "slow_factor", "slow_ttft_s", "slow_total_s"});
  base.alpha = f["alpha"].number_or(base.alpha, 0.001, 1);
  base.slow_factor = f["slow_factor"].number_or(base.slow_factor, 0, 1000);
  base.slow_ttft_s = f["slow_ttft_s"].number_or(base.slow_ttft_s, 0, kDay);
  base.slow_total_s = f["slow_total_s"].number_or(base.slow_total_s, 0, kDay);
  return base;
}

Timeouts parse_timeouts(const Field& f, Timeouts base) {
  if (!f.present()) return base;
  f.expect_map({"connect_s", "first_byte_s", "idle_s", "total_s"});
  base.connect_s = f["connect_s"].number_or(base.connect_s, 0.001, 3600);
  base.first_byte_s = f["first_byte_s"].number_or(base.first_byte_s, 0.001, kDay);
  base.idle_s = f["idle_s"].number_or(base.idle_s, 0.001, kDay);
  base.total_s = f["total_s"].number_or(base.total_s, 0.001, kDay);
  if (base.total_s < base.first_byte_s) f["total_s"].error("must be at least first_byte_s");
  return base;
}

std::string secret_from_env(const Field& f) {
  const std::string var = f.str();
  if (var.empty()) f.error("must name an environment variable");
  const char* value = std::getenv(var.c_str());
  if (!value || !*value) f.error("environment variable " + var + " is not set (or empty)");
  return value;
}

bool file_readable(const std::string& path) {
  std::ifstream in(path);
  return in.good();
}

std::string existing_file(const Field& f) {
  const std::string path = f.str();
  if (path.empty() || !file_readable(path)) f.error("cannot read file '" + path + "'");
  return path;
}

// Defaults that backends inherit and may override key by key.
struct Shared {
  Timeouts timeouts;
  CircuitBreaker::Params breaker;
  QualityConfig quality;
  CanaryConfig canary;
  LatencyConfig latency;
  BudgetLimits backend_budget;
};

BackendConfig parse_backend(const Field& f, const Shared& shared) {
  f.expect_map({"name", "tier", "models", "url", "fallback_urls", "api_key_env", "tls", "timeouts", "budget", "breaker", "quality",
                "canary", "latency", "max_idle_connections"});
  BackendConfig b;
  if (!f["name"].present()) f.error("needs a name");
  b.name = f["name"].str();
  for (char c : b.name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.')
      f["name"].error("use letters, digits, '-', '_' or '.' only");
  if (b.name.empty()) f["name"].error("must not be empty");
  b.tier = f["tier"].str_or("default");
  if (!f["models"].present()) f.error("needs models: the model names it serves");
  b.models = f["models"].strings();
  if (b.models.empty()) f["models"].error("must list at least one model");
  if (!f["url"].present()) f.error("needs a url");
  b.urls.push_back(parse_upstream_url(f["url"].str(), f["url"].path()));
  Field fb = f["fallback_urls"];
  if (fb.present())
    for (size_t i = 0; i < fb.list_size(); ++i) b.urls.push_back(parse_upstream_url(fb.at(i).str(), fb.at(i).path()));
  for (size_t i = 0; i < b.urls.size(); ++i)
    for (size_t j = i + 1; j < b.urls.size(); ++j)
      if (b.urls[i].text == b.urls[j].text) f["fallback_urls"].error("lists " + b.urls[j].text + " twice");
  if (f["api_key_env"].present()) {
    b.api_key_env = f["api_key_env"].str();
    b.api_key = secret_from_env(f["api_key_env"]);
  }
  Field tls = f["tls"];
  if (tls.present()) {
    tls.expect_map({"ca", "cert", "key", "server_name", "verify"});
    UpstreamTlsConfig t;
    if (tls["ca"].present()) t.ca = existing_file(tls["ca"]);
    if (tls["cert"].present()) t.cert = existing_file(tls["cert"]);
    if (tls["key"].present()) t.key = existing_file(tls["key"]);
    if (t.cert.empty() != t.key.empty()) tls.error("cert and key go together (the client certificate for mTLS upstreams)");
    t.server_name = tls["server_name"].str_or("");
    t.verify = tls["verify"].boolean_or(true);
    b.tls = t;
  }
  bool any_https = false;
  for (const auto& u : b.urls) any_https = any_https || u.tls;
  if (b.tls && !any_https) f["tls"].error("is set but no url of this backend is https://");
  if (!b.api_key.empty())
    for (const auto& u : b.urls)
      if (!u.tls && u.host != "127.0.0.1" && u.host != "localhost" && u.host != "::1")
        f["api_key_env"].error("would send the API key in clear text to " + u.text + "; use https://");
  b.timeouts = parse_timeouts(f["timeouts"], shared.timeouts);
  b.budget = parse_budget(f["budget"], shared.backend_budget);
  b.breaker = parse_breaker(f["breaker"], shared.breaker);
  b.quality = parse_quality(f["quality"], shared.quality);
  b.canary = parse_canary(f["canary"], shared.canary);
  b.latency = parse_latency(f["latency"], shared.latency);
  b.max_idle_connections = static_cast<size_t>(f["max_idle_connections"].integer_or(32, 0, 4096));
  return b;
}

void parse_listen(const Field& f, ListenConfig& l) {
  if (!f.present()) return;
  f.expect_map({"hosts", "port", "allow_unspecified", "plain", "max_connections", "keep_alive_timeout_s", "body_limit_bytes",
                "drain_timeout_s", "tls", "auth"});
  if (f["hosts"].present()) l.hosts = f["hosts"].strings();
  if (l.hosts.empty()) f["hosts"].error("must list at least one address");
  l.port = static_cast<int>(f["port"].integer_or(l.port, 0, 65535));
  l.allow_unspecified = f["allow_unspecified"].boolean_or(false);
  l.plain = f["plain"].boolean_or(true);
  l.max_connections = static_cast<size_t>(f["max_connections"].integer_or(1024, 1, 1 << 20));
  l.keep_alive_timeout_s = f["keep_alive_timeout_s"].number_or(60, 0.01, kDay);
  l.body_limit = static_cast<size_t>(f["body_limit_bytes"].integer_or(8 << 20, 1024, 1LL << 32));
  l.drain_timeout_s = f["drain_timeout_s"].number_or(30, 0, kDay);
  Field tls = f["tls"];
  if (tls.present()) {
    tls.expect_map({"cert", "key", "client_ca", "crl", "hosts", "port"});
    for (const char* k : {"cert", "key", "client_ca"})
      if (!tls[k].present()) tls.error(std::string("needs ") + k + " (client certificates are always required)");
    l.tls_cert = existing_file(tls["cert"]);
    l.tls_key = existing_file(tls["key"]);
    l.tls_client_ca = existing_file(tls["client_ca"]);
    if (tls["crl"].present()) l.tls_crl = existing_file(tls["crl"]);
    if (tls["hosts"].present()) l.tls_hosts = tls["hosts"].strings();
    l.tls_port = static_cast<int>(tls["port"].integer_or(8443, 0, 65535));
  }
  if (!l.plain && !l.tls_enabled()) f["plain"].error("false leaves no listener: configure listen.tls");
  Field auth = f["auth"];
  if (auth.present()) {
    auth.expect_map({"tokens", "loopback_bypass"});
    l.auth_loopback_bypass = auth["loopback_bypass"].boolean_or(false);
    Field tokens = auth["tokens"];
    if (!tokens.present()) auth.error("needs tokens: a list of {name, file | env}");
    std::set<std::string> names;
    for (size_t i = 0; i < tokens.list_size(); ++i) {
      Field t = tokens.at(i);
      t.expect_map({"name", "file", "env"});
      ClientToken ct;
      if (!t["name"].present()) t.error("needs a name (the client identity)");
      ct.name = t["name"].str();
      if (ct.name.empty() || !names.insert(ct.name).second) t["name"].error("must be non-empty and unique");
      if (t["file"].present() == t["env"].present()) t.error("give exactly one of file or env");
      if (t["file"].present()) ct.file = existing_file(t["file"]);
      else {
        ct.env = t["env"].str();
        secret_from_env(t["env"]);
      }
      l.tokens.push_back(ct);
    }
    if (l.tokens.empty()) auth["tokens"].error("must list at least one token");
    if (!l.plain) auth.error("protects the plain listener, which plain: false turns off");
  }
}

}  // namespace

std::vector<size_t> RouterConfig::backends_for(const std::string& model) const {
  std::vector<size_t> out;
  for (size_t i = 0; i < backends.size(); ++i)
    for (const auto& m : backends[i].models)
      if (m == model) {
        out.push_back(i);
        break;
      }
  return out;
}

std::string RouterConfig::resolve(const std::string& requested) const {
  auto it = aliases.find(requested);
  const std::string& name = it == aliases.end() ? requested : it->second;
  return backends_for(name).empty() ? std::string() : name;
}

RouterConfig parse_router_config(const std::string& yaml_text, const std::string& source) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    fail(ErrorKind::invalid_argument, source + ": not valid YAML: " + e.what());
  }
  Field top(root, "", source);
  if (!top.present()) top.error("the file is empty");
  top.expect_map({"listen", "health", "aliases", "default_model", "budgets", "defaults", "backends"});
  RouterConfig cfg;
  parse_listen(top["listen"], cfg.listen);

  Field health = top["health"];
  if (health.present()) {
    health.expect_map({"interval_s", "timeout_s"});
    cfg.health.interval_s = health["interval_s"].number_or(cfg.health.interval_s, 0.05, kDay);
    cfg.health.timeout_s = health["timeout_s"].number_or(cfg.health.timeout_s, 0.01, 3600);
  }

  Shared shared;
  Field defaults = top["defaults"];
  if (defaults.present()) {
    defaults.expect_map({"timeouts", "breaker", "quality", "canary", "latency", "budget"});
    shared.timeouts = parse_timeouts(defaults["timeouts"], shared.timeouts);
    shared.breaker = parse_breaker(defaults["breaker"], shared.breaker);
    shared.quality = parse_quality(defaults["quality"], shared.quality);
    shared.canary = parse_canary(defaults["canary"], shared.canary);
    shared.latency = parse_latency(defaults["latency"], shared.latency);
    shared.backend_budget = parse_budget(defaults["budget"], shared.backend_budget);
  }

  Field budgets = top["budgets"];
  if (budgets.present()) {
    budgets.expect_map({"client", "clients"});
    cfg.client_budget = parse_budget(budgets["client"], cfg.client_budget);
    Field per = budgets["clients"];
    if (per.present()) {
      if (!per.node().IsMap()) per.error("must be a mapping of client identity -> {requests, tokens, window_s}");
      for (const auto& kv : per.node()) {
        const std::string who = kv.first.Scalar();
        cfg.client_budgets[who] = parse_budget(per[who], cfg.client_budget);
      }
    }
  }

  Field backends = top["backends"];
  if (!backends.present()) top.error("needs backends: at least one");
  for (size_t i = 0; i < backends.list_size(); ++i) {
    BackendConfig b = parse_backend(backends.at(i), shared);
    for (const auto& other : cfg.backends)
      if (other.name == b.name) backends.at(i)["name"].error("'" + b.name + "' is used by another backend");
    cfg.backends.push_back(std::move(b));
  }
  if (cfg.backends.empty()) backends.error("must list at least one backend");

  // A model's backends are its equivalents: failover and latency preference move between them, so
  // they must share a tier (a council-secure request must never spill over to a cloud backend).
  std::map<std::string, std::string> tier_of_model;
  for (size_t i = 0; i < cfg.backends.size(); ++i)
    for (const auto& m : cfg.backends[i].models) {
      auto [it, fresh] = tier_of_model.emplace(m, cfg.backends[i].tier);
      if (!fresh && it->second != cfg.backends[i].tier)
        backends.at(i)["tier"].error("model '" + m + "' is also served by a backend of tier '" + it->second +
                                     "'; a model's backends must share one tier");
    }

  Field aliases = top["aliases"];
  if (aliases.present()) {
    if (!aliases.node().IsMap()) aliases.error("must be a mapping of requested name -> served model");
    for (const auto& kv : aliases.node()) {
      const std::string from = kv.first.Scalar();
      Field to = aliases[from];
      const std::string target = to.str();
      if (tier_of_model.count(from)) to.error("'" + from + "' is already a served model; an alias cannot shadow it");
      if (!tier_of_model.count(target)) to.error("points at '" + target + "', which no backend serves");
      cfg.aliases[from] = target;
    }
  }
  cfg.default_model = top["default_model"].str_or("");
  if (!cfg.default_model.empty() && cfg.resolve(cfg.default_model).empty())
    top["default_model"].error("'" + cfg.default_model + "' is neither a served model nor an alias");
  return cfg;
}

RouterConfig load_router_config(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  check(in.good(), ErrorKind::not_found, "cannot read router config '" + path + "'");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_router_config(ss.str(), path);
}

}  // namespace sanctum::router
