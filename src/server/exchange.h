#pragma once
// One HTTP request and its response on a connection: a plain body, or an SSE stream sent with
// chunked transfer encoding. Handlers fill in the access-log fields as they learn them.
#include <chrono>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/api_error.h"
#include "server/socket_stream.h"

namespace sanctum::server {

struct HttpRequest {
  std::string method;
  std::string path;  // without the query string
  std::string body;
  std::string client;  // "address:port"; the certificate CN once mTLS lands
  std::string request_id;
  std::string authorization;  // the Authorization header ("" when absent), for handlers that check their own tokens
  std::string x_api_key;      // the X-Api-Key header (Anthropic clients send their token there)
  std::string if_none_match;  // the If-None-Match header, for the chat page's revalidation
  bool loopback = false;      // the peer is a loopback address
  bool tls = false;           // it came through the mTLS listener
  unsigned version = 11;
  bool keep_alive = true;
  std::chrono::steady_clock::time_point arrived;
};

class Exchange {
 public:
  Exchange(SocketStream& stream, HttpRequest& request) : stream_(stream), req_(request) {}

  const HttpRequest& request() const { return req_; }

  void respond(int status, std::string_view content_type, std::string_view body,
               const std::vector<std::pair<std::string, std::string>>& headers = {});
  void respond_json(int status, const nlohmann::json& body);
  void respond_error(const ApiError& error);
  // The same status and headers with a body in another API's error shape (Anthropic's, say).
  void respond_error(const ApiError& error, std::string_view body);

  // SSE: headers now, then events. send_event returns false once the peer is gone.
  bool begin_stream(const std::vector<std::pair<std::string, std::string>>& headers = {});
  bool send_event(std::string_view data);   // writes "data: <data>\n\n" as one chunk
  bool send_chunk(std::string_view bytes);  // writes bytes as they are, as one chunk (a proxy relaying events)
  void end_stream();                        // the terminating zero-length chunk

  bool peer_closed() const { return stream_.peer_closed(); }
  bool responded() const { return responded_; }
  int status() const { return status_; }
  bool close_after() const { return close_after_; }
  void set_close_after() { close_after_ = true; }

  // Access-log fields.
  std::string route = "unmatched";
  std::string model;
  int prompt_tokens = 0;
  int completion_tokens = 0;
  double prefill_ms = -1;  // in-process prefill of the first choice; TTFT minus this is server overhead

 private:
  std::string head(int status, std::string_view content_type, const std::vector<std::pair<std::string, std::string>>& headers,
                   std::string_view framing) const;

  SocketStream& stream_;
  HttpRequest& req_;
  bool responded_ = false;
  bool streaming_ = false;
  bool close_after_ = false;
  bool write_failed_ = false;
  int status_ = 0;
};

const char* reason_phrase(int status);

}  // namespace sanctum::server
