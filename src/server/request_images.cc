#include "server/request_images.h"

#include <cctype>
#include <string_view>

#include "base/error.h"
#include "image/preprocess.h"
#include "server/api_error.h"
#include "server/image_fetch.h"

namespace sanctum::server {
namespace {

int base64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

// Standard alphabet; padding optional, line breaks skipped (some encoders wrap at 76 columns).
std::string decode_base64(std::string_view in, const std::string& param) {
  std::string out;
  out.reserve(in.size() / 4 * 3);
  uint32_t acc = 0;
  int bits = 0;
  size_t i = 0;
  for (; i < in.size(); ++i) {
    const char c = in[i];
    if (c == '\n' || c == '\r' || c == ' ' || c == '\t') continue;
    if (c == '=') break;
    const int v = base64_value(c);
    if (v < 0)
      throw bad_request("the image data is not valid base64 (a '" + std::string(1, c) + "' at offset " + std::to_string(i) + ")", param);
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  for (; i < in.size(); ++i)
    if (in[i] != '=' && in[i] != '\n' && in[i] != '\r') throw bad_request("the image data has characters after its base64 padding", param);
  if (out.empty()) throw bad_request("the image data is empty", param);
  return out;
}

bool starts_with_nocase(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(s[i])) != prefix[i]) return false;
  return true;
}

}  // namespace

RequestImage image_from_url(const std::string& url, const std::string& param) {
  if (starts_with_nocase(url, "data:")) {
    const size_t comma = url.find(',');
    if (comma == std::string::npos) throw bad_request("a data: URL needs a ',' before its data", param);
    const std::string_view header(url.data() + 5, comma - 5);
    if (header.size() < 7 || header.substr(header.size() - 7) != ";base64")
      throw bad_request("an image data: URL must be base64 (data:image/png;base64,...)", param);
    return RequestImage{decode_base64(std::string_view(url).substr(comma + 1), param), "", param};
  }
  if (starts_with_nocase(url, "http://") || starts_with_nocase(url, "https://")) return RequestImage{"", url, param};
  throw bad_request("an image URL must be a data: URL (data:image/png;base64,...) or http(s)", param);
}

RequestImage image_from_base64(const std::string& data, const std::string& param) {
  return RequestImage{decode_base64(data, param), "", param};
}

std::vector<image::PreparedImage> prepare_request_images(const std::vector<RequestImage>& images, const ImageOptions& options,
                                                         const image::ProcessorConfig& config, ThreadPool* pool) {
  if (static_cast<int64_t>(images.size()) > options.max_images_per_request)
    throw bad_request("the request holds " + std::to_string(images.size()) + " images, over the --max-images-per-request limit of " +
                          std::to_string(options.max_images_per_request),
                      images[static_cast<size_t>(options.max_images_per_request)].param, "too_many_images");
  std::vector<image::PreparedImage> out;
  out.reserve(images.size());
  for (const RequestImage& im : images)
    if (!im.url.empty() && !options.allow_urls)
      throw bad_request(
          "remote image URLs are off on this server (start it with --allow-image-urls); send the image inline as "
          "data:image/...;base64,...",
          im.param, "image_url_not_allowed");
  for (const RequestImage& im : images) {
    const std::string bytes = im.url.empty()
                                  ? std::string()
                                  : fetch_image_url(im.url, FetchLimits{options.limits.max_encoded_bytes, options.fetch_timeout}, im.param);
    try {
      out.push_back(image::prepare_image(image::decode_image(im.url.empty() ? im.bytes : bytes, options.limits), config, pool));
    } catch (const Error& e) {
      if (e.kind() == ErrorKind::internal) throw;
      throw bad_request(e.what(), im.param, e.kind() == ErrorKind::invalid_argument ? "image_too_large" : "invalid_image");
    }
  }
  return out;
}

std::vector<int32_t> expand_image_placeholders(const std::vector<int32_t>& ids, int32_t pad_id,
                                               const std::vector<image::PreparedImage>& images) {
  std::vector<int32_t> out;
  size_t next = 0;
  for (int32_t id : ids) {
    if (id != pad_id) {
      out.push_back(id);
      continue;
    }
    if (next == images.size()) break;
    out.insert(out.end(), static_cast<size_t>(images[next++].token_count()), pad_id);
  }
  size_t pads = 0;
  for (int32_t id : ids) pads += id == pad_id;
  if (pads != images.size())
    throw bad_request("the chat template placed " + std::to_string(pads) + " image placeholders for " + std::to_string(images.size()) +
                          " images; an image in a message the template drops cannot be used",
                      "messages");
  return out;
}

}  // namespace sanctum::server
