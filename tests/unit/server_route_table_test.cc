// The route table `sanctum serve` and `sanctum route` share: which handler a method and path reach,
// and the 404 and 405 (with Allow) for the rest.
#include <gtest/gtest.h>

#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>

#include "server/api_error.h"
#include "server/route_table.h"

namespace sanctum::server {
namespace {

using Kind = RouteMatch::Kind;

// A table shaped like the servers': exact paths, one path with two methods, nested prefixes.
RouteIndex sample_index() {
  RouteIndex index;
  index.add("GET", "/health");
  index.add("GET", "/v1/models");
  index.add("GET", "/v1/models/{model}");
  index.add("GET", "/v1/models/special");
  index.add("GET", "/v1/models/org/{name}");
  index.add("GET", "/items");
  index.add("POST", "/items");
  return index;
}

// The route `method path` reaches in `index`: its position, its name, and the path's parameter.
void expect_route(const RouteIndex& index, const char* method, const char* path, size_t position, std::string_view name,
                  std::string_view param) {
  const RouteMatch m = index.match(method, path);
  EXPECT_EQ(m.kind, Kind::found) << method << " " << path;
  EXPECT_EQ(m.index, position) << method << " " << path;
  EXPECT_EQ(m.name, name) << method << " " << path;
  EXPECT_EQ(m.rest, param) << method << " " << path;
}

TEST(RouteTable, exact_path_and_method_select_the_route) {
  const RouteIndex index = sample_index();
  expect_route(index, "GET", "/health", 0, "/health", "");
  expect_route(index, "GET", "/v1/models", 1, "/v1/models", "");
  expect_route(index, "GET", "/items", 5, "/items", "");
  expect_route(index, "POST", "/items", 6, "/items", "");
}

TEST(RouteTable, unknown_paths_are_unmatched) {
  const RouteIndex index = sample_index();
  for (const char* path : {"/", "/v2/nothing", "/healthz", "/health/", "/v1/model", "/v1/models/"}) {
    const RouteMatch m = index.match("GET", path);
    EXPECT_EQ(m.kind, Kind::unknown_path) << path;
    EXPECT_EQ(m.name, "unmatched") << path;
  }
}

TEST(RouteTable, a_known_path_with_another_method_lists_the_allowed_ones) {
  const RouteIndex index = sample_index();
  RouteMatch m = index.match("POST", "/health");
  EXPECT_EQ(m.kind, Kind::wrong_method);
  EXPECT_EQ(m.name, "/health");
  EXPECT_EQ(m.allow, "GET");
  m = index.match("DELETE", "/items");
  EXPECT_EQ(m.kind, Kind::wrong_method);
  EXPECT_EQ(m.allow, "GET, POST");
  m = index.match("PUT", "/v1/models/some-model");
  EXPECT_EQ(m.kind, Kind::wrong_method);
  EXPECT_EQ(m.name, "/v1/models/{model}");
  EXPECT_EQ(m.allow, "GET");
  EXPECT_EQ(index.match("get", "/health").kind, Kind::wrong_method);  // methods are case-sensitive
}

TEST(RouteTable, a_prefix_hands_the_rest_of_the_path_to_its_handler) {
  const RouteIndex index = sample_index();
  expect_route(index, "GET", "/v1/models/Qwen3-0.6B", 2, "/v1/models/{model}", "Qwen3-0.6B");
  expect_route(index, "GET", "/v1/models/a/b", 2, "/v1/models/{model}", "a/b");  // model ids may hold a slash
}

TEST(RouteTable, an_exact_path_wins_over_a_prefix_and_a_longer_prefix_over_a_shorter) {
  const RouteIndex index = sample_index();
  expect_route(index, "GET", "/v1/models/special", 3, "/v1/models/special", "");
  expect_route(index, "GET", "/v1/models/org/x", 4, "/v1/models/org/{name}", "x");
  // The longer prefix wants one character more.
  expect_route(index, "GET", "/v1/models/org/", 2, "/v1/models/{model}", "org/");
  // The path picks the pattern before the method does: the exact path's 405, not the prefix's GET.
  RouteIndex shadowed;
  shadowed.add("GET", "/files/{path}");
  shadowed.add("POST", "/files/upload");
  const RouteMatch m = shadowed.match("GET", "/files/upload");
  EXPECT_EQ(m.kind, Kind::wrong_method);
  EXPECT_EQ(m.allow, "POST");
}

TEST(RouteTable, malformed_and_repeated_patterns_are_refused) {
  RouteIndex index;
  index.add("GET", "/a/{x}");
  EXPECT_THROW(index.add("GET", "/a/{x}"), std::invalid_argument);
  EXPECT_NO_THROW(index.add("POST", "/a/{x}"));
  for (const char* bad : {"", "a", "/a/{x}/b", "/a/{}", "/a/{x}{y}", "/a/x}", "/{a}/{b}"})
    EXPECT_THROW(index.add("GET", bad), std::invalid_argument) << bad;
}

// An exchange on one end of a socket pair; the other end reads what it wrote.
class Wire {
 public:
  Wire(std::string method, std::string path) {
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds_), 0);
    stream_ = std::make_unique<SocketStream>(fds_[0]);
    request_.method = std::move(method);
    request_.path = std::move(path);
    request_.request_id = "req-1";
    exchange_ = std::make_unique<Exchange>(*stream_, request_);
  }
  ~Wire() { ::close(fds_[1]); }
  Exchange& ex() { return *exchange_; }
  std::string written() {
    stream_.reset();  // closes our end, so the read below ends
    std::string out;
    char buf[4096];
    for (ssize_t n; (n = ::read(fds_[1], buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
    return out;
  }

 private:
  int fds_[2] = {-1, -1};
  HttpRequest request_;
  std::unique_ptr<SocketStream> stream_;
  std::unique_ptr<Exchange> exchange_;
};

RouteTable<int&> sample_table() {
  RouteTable<int&> table;
  table
      .add("GET", "/health",
           [](Exchange& ex, std::string_view, int& calls) {
             ++calls;
             ex.respond(200, "text/plain", "ok");
           })
      .add("GET", "/v1/models/{model}",
           [](Exchange& ex, std::string_view id, int& calls) {
             ++calls;
             ex.respond(200, "text/plain", id);
           })
      .add("POST", "/v1/models/{model}", [](Exchange&, std::string_view, int& calls) { ++calls; });
  return table;
}

// What dispatching `method path` on sample_table() did.
struct Dispatched {
  int calls = 0;      // handlers run
  std::string route;  // the name the access log and metrics get
  int status = 0;     // 0: nothing was answered
  std::string wire;   // the bytes the client got
  int thrown = 0;     // the status of the ApiError dispatch threw, 0: none
  std::string thrown_message;
};

Dispatched dispatch(const char* method, const char* path) {
  Dispatched d;
  Wire wire(method, path);
  try {
    sample_table().dispatch(wire.ex(), d.calls);
  } catch (const ApiError& e) {
    d.thrown = e.status();
    d.thrown_message = e.what();
  }
  d.route = wire.ex().route;
  d.status = wire.ex().responded() ? wire.ex().status() : 0;
  d.wire = wire.written();
  return d;
}

TEST(RouteTable, dispatch_runs_the_handler_and_names_the_route) {
  const Dispatched d = dispatch("GET", "/v1/models/m1");
  EXPECT_EQ(d.calls, 1);
  EXPECT_EQ(d.route, "/v1/models/{model}");
  EXPECT_EQ(d.wire.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << d.wire;
  EXPECT_EQ(d.wire.substr(d.wire.size() - 4), "\r\nm1");
}

TEST(RouteTable, dispatch_answers_405_with_allow_and_no_handler_runs) {
  const Dispatched d = dispatch("DELETE", "/v1/models/m1");
  EXPECT_EQ(d.calls, 0);
  EXPECT_EQ(d.status, 405);
  EXPECT_EQ(d.route, "/v1/models/{model}");  // counted under the route, not as unmatched
  EXPECT_EQ(d.wire.rfind("HTTP/1.1 405 Method Not Allowed\r\n", 0), 0u) << d.wire;
  EXPECT_NE(d.wire.find("\r\nAllow: GET, POST\r\n"), std::string::npos) << d.wire;
  EXPECT_NE(d.wire.find("\"code\":\"method_not_allowed\""), std::string::npos) << d.wire;
}

TEST(RouteTable, dispatch_throws_the_404_that_names_the_method_and_path) {
  const Dispatched d = dispatch("GET", "/v2/nothing");
  EXPECT_EQ(d.calls, 0);
  EXPECT_EQ(d.thrown, 404);
  EXPECT_EQ(d.thrown_message, "Unknown route GET /v2/nothing");
  EXPECT_EQ(d.route, "unmatched");
  EXPECT_EQ(d.status, 0);  // the caller answers the thrown error
  EXPECT_EQ(d.wire, "");
}

}  // namespace
}  // namespace sanctum::server
