// Demo workload: a small statistics library (built as libdemostats.so).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace stats {

// Welford's running mean and variance; inlined into its callers.
class RunningStats {
 public:
  void add(double value) {
    ++count_;
    double delta = value - mean_;
    mean_ += delta / static_cast<double>(count_);
    m2_ += delta * (value - mean_);
  }
  double mean() const { return mean_; }
  double variance() const { return count_ > 1 ? m2_ / static_cast<double>(count_ - 1) : 0.0; }

 private:
  uint64_t count_ = 0;
  double mean_ = 0, m2_ = 0;
};

struct Summary {
  double mean = 0, variance = 0;
};

// Summarizes `values` in chunks (a hot path with inlined RunningStats::add).
Summary summarize(const std::vector<double>& values);

// Where summaries go; kept out of line so the hot loops above are not leaves.
void publish(const Summary& summary);

}  // namespace stats
