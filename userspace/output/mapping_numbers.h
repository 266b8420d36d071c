// userspace/output/mapping_numbers.h - numbers the executable mappings that
// frames are found in, each (module, mapping) once, in the order first met:
// pprof's mapping ids and OTLP's mapping table indexes alike.
#pragma once

#include <cstdint>
#include <map>
#include <utility>

#include "userspace/capture/capture.h"

namespace gsymprof {

template <typename Number>
class MappingNumbers {
 public:
  // The number of `module_index`'s executable mapping holding `runtime`
  // (0: none). A mapping not met before gets `next` and is passed to
  // `add(const CaptureModule&, const ModuleMapping&)`, which adds it to the
  // output's table.
  template <typename Add>
  Number of(const Capture& capture, int32_t module_index, uint64_t runtime, Number next, Add&& add) {
    const CaptureModule& module = capture.modules[static_cast<size_t>(module_index)];
    const int32_t mapping = mapping_holding(module, runtime);
    if (mapping < 0) return 0;
    auto [it, added] = numbers_.try_emplace(std::pair(module_index, mapping), next);
    if (added) add(module, module.mappings[static_cast<size_t>(mapping)]);
    return it->second;
  }

 private:
  std::map<std::pair<int32_t, int32_t>, Number> numbers_;  // (module, mapping) -> number
};

}  // namespace gsymprof
