#include <strings.h>

#include "userspace/http/http.h"

namespace gsymprof::http {

std::string Request::header(std::string_view name) const {
  for (const auto& [key, value] : headers)
    if (key.size() == name.size() && ::strncasecmp(key.data(), name.data(), name.size()) == 0) return value;
  return {};
}

const std::string* Request::param(std::string_view name) const {
  for (const auto& [key, value] : params)
    if (key == name) return &value;
  return nullptr;
}

}  // namespace gsymprof::http
