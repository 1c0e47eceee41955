#pragma once
// Images in requests: the content parts of the three APIs become one RequestImage each (the bytes of a
// data: URL or base64 source, or a remote URL), in prompt order, while the message keeps a
// {"type": "image"} item where the image sat, as transformers hands content to a chat template. At
// prompt time each image is checked against the server's limits, decoded and preprocessed with the
// model's processor, and its single <|image_pad|> token expanded to the image's token count.
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "image/decode.h"
#include "image/prepared_image.h"
#include "image/processor_config.h"

namespace sanctum {
class ThreadPool;
}

namespace sanctum::server {

// Request images at most (--max-images-per-request): each may reach --max-image-pixels, and its
// pixel_values are 24 bytes a pixel after the temporal repeat, so this bounds one request's memory.
inline constexpr int kDefaultMaxImagesPerRequest = 8;

struct ImageOptions {
  image::DecodeLimits limits;  // --max-image-pixels, the encoded size limit
  int max_images_per_request = kDefaultMaxImagesPerRequest;
  bool allow_urls = false;  // --allow-image-urls
  // A remote image's whole fetch (server/image_fetch.h); its body is capped at limits.max_encoded_bytes.
  std::chrono::milliseconds fetch_timeout{10000};
};

struct RequestImage {
  std::string bytes;  // encoded image (empty for a remote URL)
  std::string url;    // http(s) URL to fetch (empty for inline data)
  std::string param;  // where the client sent it, for errors: "messages[0].content[1]"
};

// "data:<media type>;base64,<data>" -> the decoded bytes; http(s) -> a remote reference; anything
// else is a 400 naming `param`. The declared media type is not trusted: decoding sniffs the bytes.
RequestImage image_from_url(const std::string& url, const std::string& param);
// A bare base64 payload (Messages' source.data).
RequestImage image_from_base64(const std::string& data, const std::string& param);

// Limits, URL policy, decoding and preprocessing, in order; each failure is a 400 naming the image's
// param. pool may be null.
std::vector<image::PreparedImage> prepare_request_images(const std::vector<RequestImage>& images, const ImageOptions& options,
                                                         const image::ProcessorConfig& config, ThreadPool* pool);

// Replaces the k-th `pad_id` in `ids` by images[k].token_count() copies; a count of pads different
// from the number of images is a 400 (the chat template dropped or repeated an image).
std::vector<int32_t> expand_image_placeholders(const std::vector<int32_t>& ids, int32_t pad_id,
                                               const std::vector<image::PreparedImage>& images);

}  // namespace sanctum::server
