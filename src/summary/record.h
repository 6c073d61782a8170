// The pieces of an event file that tests check on their own: TFRecord framing with masked CRC32C
// checksums, TensorBoard's default histogram buckets, and PNG encoding.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sinter::summary {

// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), as TFRecord files checksum.
uint32_t crc32c(std::string_view data);
// The checksum as a record stores it: rotated right by 15 bits plus 0xa282ead8.
uint32_t masked_crc32c(std::string_view data);

// One record: the payload's length (u64, little-endian), the masked CRC of those 8 bytes, the
// payload, the masked CRC of the payload.
std::string frame_record(std::string_view payload);

// A HistogramProto's fields (Note [histogram buckets] in src/summary/histogram.cpp).
struct Histogram {
  double min = 0, max = 0, num = 0, sum = 0, sum_squares = 0;
  std::vector<double> limits;  // each bucket's right edge; the first bucket starts at min
  std::vector<double> counts;
};

// TensorBoard's default bucket limits: -DBL_MAX, -1e20 ... -1e-12, 0, 1e-12 ... 1e20, DBL_MAX.
const std::vector<double>& default_bucket_limits();
// The histogram of finite `values` (at least one).
Histogram make_histogram(const std::vector<double>& values);

// Whether this build encodes PNG (it was built with libpng).
bool png_supported();
// `pixels` (height, width, channels) as a PNG file; channels 1 (gray), 3 (RGB) or 4 (RGBA).
std::string encode_png(const std::vector<uint8_t>& pixels, int64_t height, int64_t width,
                       int64_t channels);

}  // namespace sinter::summary
