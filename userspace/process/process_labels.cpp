#include "userspace/process/process_labels.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <climits>

#include "userspace/base/pseudo_file.h"

namespace gsymprof {
namespace {

bool is_container_id(std::string_view text) {
  return text.size() == 64 && std::all_of(text.begin(), text.end(), [](char c) {
           return std::isxdigit(static_cast<unsigned char>(c)) && !std::isupper(static_cast<unsigned char>(c));
         });
}

// "docker-ID.scope" -> "ID": the runtimes' systemd unit names.
std::string_view strip_unit(std::string_view component) {
  if (component.ends_with(".scope")) component.remove_suffix(6);
  for (std::string_view prefix : {"docker-", "cri-containerd-", "crio-", "libpod-", "containerd-"})
    if (component.starts_with(prefix)) return component.substr(prefix.size());
  return component;
}

// /proc files of a process are small; the environment may not be (a bound
// keeps a hostile process from making the agent read megabytes).
constexpr size_t kMaxCgroupBytes = 64 * 1024;
constexpr size_t kMaxEnvironBytes = 256 * 1024;

}  // namespace

std::string container_id_from_cgroup(std::string_view path) {
  // The innermost component that is one: pods nest containers in slices.
  while (!path.empty()) {
    const size_t slash = path.rfind('/');
    const std::string_view component = strip_unit(path.substr(slash == std::string_view::npos ? 0 : slash + 1));
    if (is_container_id(component)) return std::string(component);
    if (slash == std::string_view::npos) break;
    path = path.substr(0, slash);
  }
  return "";
}

std::string cgroup_path_from_proc(std::string_view text) {
  std::string_view first;
  while (!text.empty()) {
    const size_t end = text.find('\n');
    const std::string_view line = text.substr(0, end);
    text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
    // "HIERARCHY-ID:CONTROLLERS:PATH"
    const size_t a = line.find(':'), b = a == std::string_view::npos ? a : line.find(':', a + 1);
    if (b == std::string_view::npos) continue;
    if (line.starts_with("0::")) return std::string(line.substr(b + 1));
    if (first.empty()) first = line.substr(b + 1);
  }
  return std::string(first);
}

std::string environment_value(std::string_view environ, std::string_view name) {
  while (!environ.empty()) {
    const size_t end = environ.find('\0');
    const std::string_view entry = environ.substr(0, end);
    environ.remove_prefix(end == std::string_view::npos ? environ.size() : end + 1);
    if (entry.size() > name.size() && entry.starts_with(name) && entry[name.size()] == '=')
      return std::string(entry.substr(name.size() + 1));
  }
  return "";
}

ProcessLabels read_process_labels(uint32_t pid, const std::string& service_env, const std::string& proc_root) {
  ProcessLabels labels;
  const std::string dir = proc_root + "/" + std::to_string(pid);
  char target[PATH_MAX];
  const ssize_t n = ::readlink((dir + "/exe").c_str(), target, sizeof(target) - 1);
  if (n > 0) {
    labels.executable_path.assign(target, static_cast<size_t>(n));
    if (labels.executable_path.ends_with(" (deleted)")) labels.executable_path.resize(labels.executable_path.size() - 10);
  }
  if (auto cgroup = read_pseudo_file(dir + "/cgroup", kMaxCgroupBytes)) {
    labels.cgroup = cgroup_path_from_proc(*cgroup);
    labels.container_id = container_id_from_cgroup(labels.cgroup);
  }
  if (!service_env.empty())
    if (auto environ = read_pseudo_file(dir + "/environ", kMaxEnvironBytes))
      labels.service = environment_value(*environ, service_env);
  return labels;
}

}  // namespace gsymprof
