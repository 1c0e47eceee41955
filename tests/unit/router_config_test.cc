// Router config validation: a full config parses with inheritance of defaults; every mistake is an
// error that names the offending key.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "base/error.h"
#include "router/router_config.h"

namespace sanctum::router {
namespace {

// The error message parse_router_config throws for `yaml` ("" when it parses).
std::string error_of(const std::string& yaml) {
  try {
    parse_router_config(yaml, "router.yaml");
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::invalid_argument);
    return e.what();
  }
  return "";
}

const char* kMinimal = R"(
backends:
  - name: coder
    models: [qwen-coder]
    url: http://127.0.0.1:8081
)";

TEST(RouterConfig, a_full_config_parses_and_backends_inherit_defaults) {
  setenv("SANCTUM_TEST_CLOUD_KEY", "sk-test", 1);
  const RouterConfig c = parse_router_config(R"(
listen: {hosts: [127.0.0.1, "::1"], port: 9000, drain_timeout_s: 5}
health: {interval_s: 2, timeout_s: 0.5}
aliases: {gpt-4o: council}
default_model: council
budgets:
  client: {requests: 100, tokens: 5000, window_s: 60}
  clients: {guardian: {requests: 1000}}
defaults:
  breaker: {failures: 3, cooldown_s: 5}
  timeouts: {connect_s: 1, first_byte_s: 30}
  quality: {repetition: {min_repeats: 8}}
  canary: {interval_s: 30, expect: "4"}
backends:
  - name: council
    tier: council-secure
    models: [council]
    url: http://10.0.0.5:8080/base/
    fallback_urls: [http://10.0.0.6:8080, "http://[fd00::7]:8080"]
    breaker: {failures: 7}
  - name: cloud
    tier: cloud
    models: [gpt-x]
    url: https://api.example.com/v1proxy
    api_key_env: SANCTUM_TEST_CLOUD_KEY
    canary: false
    budget: {requests: 10, tokens: 100000, window_s: 3600}
)");
  EXPECT_EQ(c.listen.port, 9000);
  EXPECT_EQ(c.listen.hosts.size(), 2u);
  ASSERT_EQ(c.backends.size(), 2u);
  const BackendConfig& council = c.backends[0];
  ASSERT_EQ(council.urls.size(), 3u);
  EXPECT_EQ(council.urls[0].host, "10.0.0.5");
  EXPECT_EQ(council.urls[0].base_path, "/base");
  EXPECT_EQ(council.urls[0].target("/v1/models"), "/base/v1/models");
  EXPECT_EQ(council.urls[2].host, "fd00::7");
  EXPECT_EQ(council.urls[2].host_header(), "[fd00::7]:8080");
  EXPECT_EQ(council.breaker.failures, 7);           // its own
  EXPECT_DOUBLE_EQ(council.breaker.cooldown_s, 5);  // inherited
  EXPECT_DOUBLE_EQ(council.timeouts.connect_s, 1);
  EXPECT_DOUBLE_EQ(council.timeouts.total_s, 600);  // built-in default
  EXPECT_EQ(council.quality.repetition.min_repeats, 8);
  EXPECT_TRUE(council.canary.enabled);
  const BackendConfig& cloud = c.backends[1];
  EXPECT_FALSE(cloud.canary.enabled);
  EXPECT_EQ(cloud.api_key, "sk-test");
  EXPECT_TRUE(cloud.urls[0].tls);
  EXPECT_EQ(cloud.urls[0].port, 443);
  EXPECT_EQ(cloud.budget.requests, 10);
  EXPECT_EQ(c.client_budget.tokens, 5000);
  EXPECT_EQ(c.client_budgets.at("guardian").requests, 1000);
  EXPECT_EQ(c.client_budgets.at("guardian").tokens, 5000);  // the rest from budgets.client
  EXPECT_EQ(c.resolve("gpt-4o"), "council");
  EXPECT_EQ(c.resolve("council"), "council");
  EXPECT_EQ(c.resolve("nope"), "");
}

TEST(RouterConfig, the_minimal_config_is_enough) {
  const RouterConfig c = parse_router_config(kMinimal);
  EXPECT_EQ(c.backends[0].tier, "default");
  EXPECT_EQ(c.backends[0].urls[0].port, 8081);
  EXPECT_EQ(c.listen.hosts, std::vector<std::string>{"127.0.0.1"});
}

TEST(RouterConfig, typos_and_wrong_types_name_the_key) {
  EXPECT_NE(error_of("backendz: []").find("backendz: unknown key"), std::string::npos);
  EXPECT_NE(error_of(std::string(kMinimal) + "    timeouts: {conect_s: 1}\n").find("backends[0].timeouts.conect_s: unknown key"),
            std::string::npos);
  EXPECT_NE(error_of(std::string(kMinimal) + "    breaker: {failures: many}\n")
                .find("backends[0].breaker.failures: must be a whole number"),
            std::string::npos);
  EXPECT_NE(error_of(std::string(kMinimal) + "    breaker: {failures: 0}\n").find("must be in 1.."), std::string::npos);
  EXPECT_NE(error_of("listen: {port: 70000}\n" + std::string(kMinimal)).find("listen.port: must be in 0..65535"), std::string::npos);
  EXPECT_NE(error_of("backends: {a: 1}").find("backends: must be a list"), std::string::npos);
  EXPECT_NE(error_of("backends: [").find("not valid YAML"), std::string::npos);
  EXPECT_NE(error_of("").find("empty"), std::string::npos);
}

TEST(RouterConfig, urls_are_checked) {
  auto with_url = [](const std::string& url) { return error_of("backends:\n  - name: b\n    models: [m]\n    url: \"" + url + "\"\n"); };
  EXPECT_NE(with_url("ftp://x").find("backends[0].url: 'ftp://x' is not an http"), std::string::npos);
  EXPECT_NE(with_url("http://:80").find("has no host"), std::string::npos);
  EXPECT_NE(with_url("http://h:99999").find("outside 1..65535"), std::string::npos);
  EXPECT_NE(with_url("http://h:8x").find("not a number"), std::string::npos);
  EXPECT_NE(with_url("http://user:pw@h").find("credentials"), std::string::npos);
  EXPECT_NE(with_url("http://h/p?q=1").find("query"), std::string::npos);
  EXPECT_NE(error_of("backends:\n  - name: b\n    models: [m]\n    url: http://h:1\n    fallback_urls: [http://h:1]\n")
                .find("backends[0].fallback_urls: lists http://h:1 twice"),
            std::string::npos);
}

TEST(RouterConfig, routing_ambiguities_are_refused) {
  EXPECT_NE(error_of(std::string(kMinimal) + "  - name: coder\n    models: [x]\n    url: http://h:2\n").find("used by another backend"),
            std::string::npos);
  // A model's equivalents must share a tier: secure traffic never spills into the cloud.
  EXPECT_NE(error_of("backends:\n  - {name: a, tier: council-secure, models: [m], url: 'http://h:1'}\n"
                     "  - {name: b, tier: cloud, models: [m], url: 'http://h:2'}\n")
                .find("backends[1].tier: model 'm' is also served by a backend of tier 'council-secure'"),
            std::string::npos);
  EXPECT_NE(error_of("aliases: {fast: nothing}\n" + std::string(kMinimal)).find("aliases.fast: points at 'nothing'"), std::string::npos);
  EXPECT_NE(error_of("aliases: {qwen-coder: qwen-coder}\n" + std::string(kMinimal)).find("cannot shadow"), std::string::npos);
  EXPECT_NE(error_of("default_model: ghost\n" + std::string(kMinimal)).find("default_model: 'ghost'"), std::string::npos);
  EXPECT_NE(error_of("backends:\n  - {name: a, models: [], url: 'http://h:1'}\n").find("backends[0].models: must list at least one"),
            std::string::npos);
  EXPECT_NE(error_of("backends:\n  - {models: [m], url: 'http://h:1'}\n").find("backends[0]: needs a name"), std::string::npos);
}

TEST(RouterConfig, secrets_and_files_must_exist_at_load) {
  unsetenv("SANCTUM_TEST_MISSING_KEY");
  EXPECT_NE(error_of(std::string(kMinimal) + "    api_key_env: SANCTUM_TEST_MISSING_KEY\n")
                .find("backends[0].api_key_env: environment variable SANCTUM_TEST_MISSING_KEY is not set"),
            std::string::npos);
  setenv("SANCTUM_TEST_PLAIN_KEY", "k", 1);
  // An API key would cross the network in clear text.
  EXPECT_NE(error_of("backends:\n  - {name: a, models: [m], url: 'http://10.1.1.1:8080', api_key_env: SANCTUM_TEST_PLAIN_KEY}\n")
                .find("clear text"),
            std::string::npos);
  EXPECT_NE(error_of("backends:\n  - {name: a, models: [m], url: 'https://h', tls: {ca: /nonexistent/ca.pem}}\n")
                .find("backends[0].tls.ca: cannot read file '/nonexistent/ca.pem'"),
            std::string::npos);
  EXPECT_NE(error_of("backends:\n  - {name: a, models: [m], url: 'http://h', tls: {verify: false}}\n")
                .find("no url of this backend is https"),
            std::string::npos);
  EXPECT_NE(error_of("listen: {tls: {cert: /x}}\n" + std::string(kMinimal)).find("listen.tls: needs key"), std::string::npos);
  EXPECT_NE(error_of("listen: {plain: false}\n" + std::string(kMinimal)).find("leaves no listener"), std::string::npos);
  EXPECT_NE(error_of("listen: {auth: {tokens: [{name: a}]}}\n" + std::string(kMinimal)).find("give exactly one of file or env"),
            std::string::npos);
}

TEST(RouterConfig, timeouts_must_be_consistent) {
  EXPECT_NE(error_of(std::string(kMinimal) + "    timeouts: {first_byte_s: 100, total_s: 10}\n")
                .find("total_s: must be at least first_byte_s"),
            std::string::npos);
  EXPECT_NE(error_of(std::string(kMinimal) + "    timeouts: {connect_s: -1}\n").find("connect_s: must be in"), std::string::npos);
}

}  // namespace
}  // namespace sanctum::router
