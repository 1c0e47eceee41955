#pragma once
// GET of a remote image for --allow-image-urls: http or https (certificates verified against the
// system store, the host name checked), at most a few redirects, the body capped at the encoded-size
// limit and the whole exchange at a deadline. Every failure is a 400 naming the image's param: the
// client sent the URL, so what went wrong with it is the client's to fix.
#include <chrono>
#include <cstddef>
#include <string>

namespace sanctum::server {

struct FetchLimits {
  size_t max_bytes = size_t{20} << 20;       // the body; a larger Content-Length is refused before reading
  std::chrono::milliseconds timeout{10000};  // resolve + connect + TLS + request + response, all redirects included
  int max_redirects = 3;
};

// The response body of a 200; throws ApiError(400) otherwise.
std::string fetch_image_url(const std::string& url, const FetchLimits& limits, const std::string& param);

}  // namespace sanctum::server
