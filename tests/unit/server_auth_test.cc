// Bearer-token decisions and the identity carried in HttpRequest::client.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "base/error.h"
#include "server/auth.h"

namespace sanctum::server {
namespace {

using D = BearerAuth::Decision;

TEST(ServerAuth, bearer_scheme_is_case_insensitive_and_the_token_is_trimmed) {
  EXPECT_EQ(bearer_token("Bearer abc").value_or("-"), "abc");
  EXPECT_EQ(bearer_token("bearer   abc  ").value_or("-"), "abc");
  EXPECT_EQ(bearer_token("BEARER\tabc").value_or("-"), "abc");
  EXPECT_FALSE(bearer_token("").has_value());
  EXPECT_FALSE(bearer_token("Bearer").has_value());
  EXPECT_FALSE(bearer_token("Bearer    ").has_value());
  EXPECT_FALSE(bearer_token("Basic abc").has_value());
  EXPECT_FALSE(bearer_token("Bearerabc").has_value());
  EXPECT_FALSE(bearer_token("abc").has_value());
}

TEST(ServerAuth, only_the_exact_token_matches) {
  BearerAuth auth("s3cret-token", false);
  EXPECT_TRUE(auth.token_matches("s3cret-token"));
  EXPECT_FALSE(auth.token_matches("s3cret-toke"));
  EXPECT_FALSE(auth.token_matches("s3cret-token-"));
  EXPECT_FALSE(auth.token_matches("S3cret-token"));
  EXPECT_FALSE(auth.token_matches(""));
}

TEST(ServerAuth, fails_closed_without_a_valid_token) {
  BearerAuth auth("tok", false);
  EXPECT_EQ(auth.decide("GET", "/v1/models", "", false), D::deny_missing);
  EXPECT_EQ(auth.decide("GET", "/v1/models", "Basic tok", false), D::deny_missing);
  EXPECT_EQ(auth.decide("POST", "/v1/chat/completions", "Bearer nope", false), D::deny_wrong);
  EXPECT_EQ(auth.decide("POST", "/v1/chat/completions", "Bearer tok", false), D::allow_token);
  EXPECT_FALSE(BearerAuth::allowed(D::deny_missing));
  EXPECT_FALSE(BearerAuth::allowed(D::deny_wrong));
  EXPECT_TRUE(BearerAuth::allowed(D::allow_token));
}

TEST(ServerAuth, x_api_key_carries_the_token_when_there_is_no_bearer) {
  BearerAuth auth("tok", false);
  EXPECT_EQ(auth.decide("POST", "/v1/messages", "", false, "tok"), D::allow_token);
  EXPECT_EQ(auth.decide("POST", "/v1/messages", "", false, " tok "), D::allow_token);
  EXPECT_EQ(auth.decide("POST", "/v1/messages", "", false, "nope"), D::deny_wrong);
  EXPECT_EQ(auth.decide("POST", "/v1/messages", "", false, "  "), D::deny_missing);
  // A bearer token, when sent, is the one checked.
  EXPECT_EQ(auth.decide("POST", "/v1/messages", "Bearer nope", false, "tok"), D::deny_wrong);
  EXPECT_EQ(auth.decide("POST", "/v1/messages", "Bearer tok", false, "nope"), D::allow_token);
}

TEST(ServerAuth, loopback_skips_the_check_only_when_enabled) {
  BearerAuth strict("tok", false), bypass("tok", true);
  EXPECT_EQ(strict.decide("GET", "/v1/models", "", true), D::deny_missing);
  EXPECT_EQ(bypass.decide("GET", "/v1/models", "", true), D::allow_loopback);
  EXPECT_EQ(bypass.decide("GET", "/v1/models", "", false), D::deny_missing);
}

TEST(ServerAuth, only_get_health_and_the_chat_page_are_open) {
  BearerAuth auth("tok", false);
  EXPECT_EQ(auth.decide("GET", "/health", "", false), D::allow_open_route);
  EXPECT_EQ(auth.decide("POST", "/health", "", false), D::deny_missing);
  EXPECT_EQ(auth.decide("GET", "/health/deep", "", false), D::deny_missing);
  EXPECT_EQ(auth.decide("GET", "/metrics", "", false), D::deny_missing);
  EXPECT_EQ(auth.decide("GET", "/health/", "", false), D::deny_missing);
  EXPECT_EQ(auth.decide("GET", "/", "", false), D::allow_open_route);
  EXPECT_EQ(auth.decide("GET", "/ui/app.js", "", false), D::allow_open_route);
  EXPECT_EQ(auth.decide("POST", "/", "", false), D::deny_missing);
  EXPECT_EQ(auth.decide("GET", "/ui", "", false), D::deny_missing);
  EXPECT_EQ(auth.decide("GET", "/v1/ui/x", "", false), D::deny_missing);
}

TEST(ServerAuth, tokens_must_be_printable_and_non_empty) {
  EXPECT_THROW(BearerAuth("", false), Error);
  EXPECT_THROW(BearerAuth("  \n", false), Error);
  EXPECT_THROW(BearerAuth("two words", false), Error);
  EXPECT_NO_THROW(BearerAuth("tok\n", false));
}

std::string temp_file(const std::string& content, mode_t mode) {
  char path[] = "/tmp/sanctum_auth_test_XXXXXX";
  int fd = ::mkstemp(path);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(::write(fd, content.data(), content.size()), static_cast<ssize_t>(content.size()));
  ::close(fd);
  ::chmod(path, mode);
  return path;
}

TEST(ServerAuth, token_file_must_be_private) {
  const std::string loose = temp_file("tok\n", 0644);
  try {
    BearerAuth::from_file(loose, false);
    ADD_FAILURE() << "a world-readable token file was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("chmod 600"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--auth-token-file"), std::string::npos) << e.what();
  }
  std::remove(loose.c_str());

  const std::string tight = temp_file("tok\n", 0600);
  BearerAuth auth = BearerAuth::from_file(tight, false);
  EXPECT_TRUE(auth.token_matches("tok"));
  std::remove(tight.c_str());

  const std::string empty = temp_file("\n", 0600);
  EXPECT_THROW(BearerAuth::from_file(empty, false), Error);
  std::remove(empty.c_str());
}

TEST(ServerAuth, identity_round_trips_through_the_client_field) {
  EXPECT_EQ(client_with_identity("", "127.0.0.1:5000"), "127.0.0.1:5000");
  EXPECT_EQ(client_with_identity("guardian", "127.0.0.1:5000"), "guardian@127.0.0.1:5000");
  ClientParts p = split_client("guardian@[::1]:5000");
  EXPECT_EQ(p.identity, "guardian");
  EXPECT_EQ(p.address, "[::1]:5000");
  p = split_client("10.0.0.1:80");
  EXPECT_EQ(p.identity, "");
  EXPECT_EQ(p.address, "10.0.0.1:80");
}

TEST(ServerAuth, a_crafted_cn_cannot_forge_an_identity_or_a_log_line) {
  const std::string client = client_with_identity("evil@admin\n\"x", "127.0.0.1:1");
  EXPECT_EQ(client, "evil?admin?\"x@127.0.0.1:1");
  ClientParts p = split_client(client);
  EXPECT_EQ(p.identity, "evil?admin?\"x");
  EXPECT_EQ(p.address, "127.0.0.1:1");
}

}  // namespace
}  // namespace sanctum::server
