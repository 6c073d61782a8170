// TFRecord framing and its CRC32C, and PNG encoding with libpng's simplified API.
#include "summary/record.h"

#ifdef SINTER_WITH_PNG
#include <png.h>
#endif

#include <array>
#include <cstring>

#include "sinter/core/error.h"

namespace sinter::summary {
namespace {

constexpr std::array<uint32_t, 256> crc32c_table() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1U) ? (c >> 1) ^ 0x82F63B78U : c >> 1;
    t[i] = c;
  }
  return t;
}

constexpr std::array<uint32_t, 256> kCrcTable = crc32c_table();

}  // namespace

uint32_t crc32c(std::string_view data) {
  uint32_t c = 0xFFFFFFFFU;
  for (const char ch : data) c = kCrcTable[(c ^ static_cast<uint8_t>(ch)) & 0xFFU] ^ (c >> 8);
  return c ^ 0xFFFFFFFFU;
}

uint32_t masked_crc32c(std::string_view data) {
  const uint32_t c = crc32c(data);
  return ((c >> 15) | (c << 17)) + 0xa282ead8U;
}

std::string frame_record(std::string_view payload) {
  char length[8];
  const uint64_t n = payload.size();
  std::memcpy(length, &n, sizeof n);  // little-endian hosts only (x86-64, AArch64)
  const uint32_t length_crc = masked_crc32c(std::string_view(length, sizeof length));
  const uint32_t payload_crc = masked_crc32c(payload);
  std::string out;
  out.reserve(payload.size() + 16);
  out.append(length, sizeof length);
  out.append(reinterpret_cast<const char*>(&length_crc), 4);
  out.append(payload);
  out.append(reinterpret_cast<const char*>(&payload_crc), 4);
  return out;
}

bool png_supported() {
#ifdef SINTER_WITH_PNG
  return true;
#else
  return false;
#endif
}

std::string encode_png(const std::vector<uint8_t>& pixels, int64_t height, int64_t width,
                       int64_t channels) {
  SINTER_CHECK(static_cast<int64_t>(pixels.size()) == height * width * channels,
               "encode_png: ", pixels.size(), " bytes for a ", height, "x", width, "x", channels,
               " image");
#ifndef SINTER_WITH_PNG
  SINTER_THROW(
      "encode_png: this Sinter was built without libpng (apt-get install libpng-dev, then "
      "rebuild)");
#else
  png_image image;
  std::memset(&image, 0, sizeof image);
  image.version = PNG_IMAGE_VERSION;
  image.width = static_cast<png_uint_32>(width);
  image.height = static_cast<png_uint_32>(height);
  image.format = channels == 1 ? PNG_FORMAT_GRAY : channels == 3 ? PNG_FORMAT_RGB : PNG_FORMAT_RGBA;
  png_alloc_size_t size = 0;
  if (png_image_write_to_memory(&image, nullptr, &size, 0, pixels.data(), 0, nullptr) == 0) {
    const std::string why = image.message;
    png_image_free(&image);
    SINTER_THROW("encode_png: libpng cannot encode a ", height, "x", width, "x", channels,
                 " image: ", why);
  }
  std::string out(size, '\0');
  if (png_image_write_to_memory(&image, out.data(), &size, 0, pixels.data(), 0, nullptr) == 0) {
    const std::string why = image.message;
    png_image_free(&image);
    SINTER_THROW("encode_png: libpng failed: ", why);
  }
  out.resize(size);
  return out;
#endif
}

}  // namespace sinter::summary
