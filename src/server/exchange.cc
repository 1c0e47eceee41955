#include "server/exchange.h"

#include <cstdio>

namespace sanctum::server {

const char* reason_phrase(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 304: return "Not Modified";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 413: return "Payload Too Large";
    case 422: return "Unprocessable Entity";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 499: return "Client Closed Request";
    case 500: return "Internal Server Error";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    default: return "Unknown";
  }
}

std::string Exchange::head(int status, std::string_view content_type, const std::vector<std::pair<std::string, std::string>>& headers,
                           std::string_view framing) const {
  std::string h = req_.version == 10 ? "HTTP/1.0 " : "HTTP/1.1 ";
  h += std::to_string(status) + " " + reason_phrase(status) + "\r\n";
  h += "Server: sanctum\r\nContent-Type: ";
  h += content_type;
  h += "\r\n";
  h += framing;
  h += "X-Request-Id: " + req_.request_id + "\r\n";
  for (const auto& [k, v] : headers) h += k + ": " + v + "\r\n";
  h += (req_.keep_alive && !close_after_) ? "Connection: keep-alive\r\n" : "Connection: close\r\n";
  h += "\r\n";
  return h;
}

void Exchange::respond(int status, std::string_view content_type, std::string_view body,
                       const std::vector<std::pair<std::string, std::string>>& headers) {
  if (responded_) return;
  responded_ = true;
  status_ = status;
  std::string out = head(status, content_type, headers, "Content-Length: " + std::to_string(body.size()) + "\r\n");
  out.append(body);
  if (!stream_.write_all(out)) close_after_ = true;
}

void Exchange::respond_json(int status, const nlohmann::json& body) {
  respond(status, "application/json", body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

void Exchange::respond_error(const ApiError& error) { respond_error(error, error_body(error)); }

void Exchange::respond_error(const ApiError& error, std::string_view body) {
  std::vector<std::pair<std::string, std::string>> headers;
  if (error.status() == 429 || error.status() == 503) headers.emplace_back("Retry-After", "1");
  if (error.status() == 413 || error.status() == 503) close_after_ = true;
  respond(error.status(), "application/json", body, headers);
}

bool Exchange::begin_stream(const std::vector<std::pair<std::string, std::string>>& headers) {
  if (responded_) return false;
  responded_ = true;
  streaming_ = true;
  status_ = 200;
  // HTTP/1.0 has no chunked encoding: the stream ends when the connection does.
  std::string framing = req_.version == 10 ? "" : "Transfer-Encoding: chunked\r\n";
  if (req_.version == 10) close_after_ = true;
  std::vector<std::pair<std::string, std::string>> all{{"Cache-Control", "no-cache"}};
  all.insert(all.end(), headers.begin(), headers.end());
  std::string out = head(200, "text/event-stream", all, framing);
  if (!stream_.write_all(out)) write_failed_ = true;
  return !write_failed_;
}

bool Exchange::send_event(std::string_view data) {
  std::string payload = "data: ";
  payload.append(data);
  payload += "\n\n";
  return send_chunk(payload);
}

bool Exchange::send_chunk(std::string_view payload) {
  if (write_failed_) return false;
  if (payload.empty()) return true;  // a zero-length chunk would end the body
  std::string out;
  if (req_.version == 10) {
    out = std::string(payload);
  } else {
    char size[32];
    std::snprintf(size, sizeof size, "%zx\r\n", payload.size());
    out.reserve(payload.size() + 16);
    out = size;
    out.append(payload);
    out += "\r\n";
  }
  if (!stream_.write_all(out)) write_failed_ = true;
  return !write_failed_;
}

void Exchange::end_stream() {
  if (write_failed_) {
    close_after_ = true;
    return;
  }
  if (req_.version != 10 && !stream_.write_all("0\r\n\r\n")) close_after_ = true;
}

}  // namespace sanctum::server
