// The protobuf wire format, written by hand for the few messages an event file holds (Event,
// Summary, HistogramProto, TensorProto, the HParams plugin's data): varints, fixed-width numbers
// and length-delimited fields (https://protobuf.dev/programming-guides/encoding/).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace sinter::summary {

// Appends fields to a message's bytes; a nested message is encoded first, then added with
// message(). Zero values are written too (harmless for proto3 readers).
class ProtoWriter {
 public:
  ProtoWriter& varint(int field, uint64_t v) {
    key(field, 0);
    put_varint(v);
    return *this;
  }
  ProtoWriter& int64(int field, int64_t v) { return varint(field, static_cast<uint64_t>(v)); }
  ProtoWriter& float64(int field, double v) {
    key(field, 1);
    put_fixed(v);
    return *this;
  }
  ProtoWriter& float32(int field, float v) {
    key(field, 5);
    put_fixed(v);
    return *this;
  }
  ProtoWriter& bytes(int field, std::string_view v) {
    key(field, 2);
    put_varint(v.size());
    out_.append(v);
    return *this;
  }
  ProtoWriter& message(int field, const ProtoWriter& m) { return bytes(field, m.str()); }
  // A repeated double field, packed (one length-delimited run).
  ProtoWriter& packed_float64(int field, const std::vector<double>& v) {
    key(field, 2);
    put_varint(v.size() * sizeof(double));
    for (const double d : v) put_fixed(d);
    return *this;
  }

  const std::string& str() const { return out_; }

 private:
  void key(int field, int wire_type) {
    put_varint((static_cast<uint64_t>(field) << 3) | static_cast<uint64_t>(wire_type));
  }
  void put_varint(uint64_t v) {
    while (v >= 0x80) {
      out_.push_back(static_cast<char>((v & 0x7F) | 0x80));
      v >>= 7;
    }
    out_.push_back(static_cast<char>(v));
  }
  // Little-endian, as the wire format is and as x86 and Arm store numbers.
  template <typename T>
  void put_fixed(T v) {
    char b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    out_.append(b, sizeof(T));
  }

  std::string out_;
};

}  // namespace sinter::summary
