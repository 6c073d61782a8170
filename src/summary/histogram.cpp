// TensorBoard's histograms: the default bucket layout and the HistogramProto fields of a sample.
#include <algorithm>
#include <cfloat>

#include "sinter/core/error.h"
#include "summary/record.h"

namespace sinter::summary {

// Note [histogram buckets]
// TensorBoard's default layout (TensorFlow's histogram summaries, and PyTorch's bins="tensorflow"):
// limits 1e-12 * 1.1^k below 1e20, mirrored for negatives, with 0 between and +-DBL_MAX at the
// ends. A value x goes to the bucket b whose limits satisfy limit[b-1] <= x < limit[b]. The proto
// lists each bucket by its right edge; TensorBoard draws bucket i from limit[i-1] to limit[i],
// the first from `min` and the last to `max`. So the buckets written run from the first non-empty
// one to the last non-empty one (then the first and last bars span exactly the values in them),
// and a run of empty buckets between is merged into one, as TensorFlow writes them: a few dozen
// buckets for a layer's weights instead of 1500.

const std::vector<double>& default_bucket_limits() {
  static const std::vector<double> limits = [] {
    std::vector<double> pos;
    for (double v = 1e-12; v < 1e20; v *= 1.1) pos.push_back(v);
    pos.push_back(DBL_MAX);
    std::vector<double> all;
    all.reserve(2 * pos.size() + 1);
    for (auto it = pos.rbegin(); it != pos.rend(); ++it) all.push_back(-*it);
    all.push_back(0.0);
    all.insert(all.end(), pos.begin(), pos.end());
    return all;
  }();
  return limits;
}

Histogram make_histogram(const std::vector<double>& values) {
  SINTER_CHECK(!values.empty(), "make_histogram: no values");
  const std::vector<double>& limits = default_bucket_limits();
  std::vector<double> counts(limits.size(), 0.0);
  Histogram h;
  h.min = values[0];
  h.max = values[0];
  for (const double x : values) {
    const auto b = std::upper_bound(limits.begin(), limits.end(), x) - limits.begin();
    counts[std::min<size_t>(static_cast<size_t>(b), limits.size() - 1)] += 1;
    h.min = std::min(h.min, x);
    h.max = std::max(h.max, x);
    h.sum += x;
    h.sum_squares += x * x;
  }
  h.num = static_cast<double>(values.size());
  size_t first = 0, last = counts.size() - 1;
  while (counts[first] == 0) ++first;
  while (counts[last] == 0) --last;
  for (size_t i = first; i <= last;) {
    double limit = limits[i];
    const double count = counts[i];
    ++i;
    if (count == 0) {
      while (i <= last && counts[i] == 0) limit = limits[i++];
    }
    h.limits.push_back(limit);
    h.counts.push_back(count);
  }
  return h;
}

}  // namespace sinter::summary
