#include "stats.h"

namespace stats {

namespace {
volatile double g_published;
}

__attribute__((noinline)) void publish(const Summary& summary) {
  g_published = summary.mean + summary.variance;
}

Summary summarize(const std::vector<double>& values) {
  RunningStats running;
  constexpr size_t kChunk = 4096;
  for (size_t begin = 0; begin < values.size(); begin += kChunk) {
    size_t end = begin + kChunk < values.size() ? begin + kChunk : values.size();
    for (size_t i = begin; i < end; ++i) running.add(values[i]);
    publish({running.mean(), running.variance()});
  }
  return {running.mean(), running.variance()};
}

}  // namespace stats
