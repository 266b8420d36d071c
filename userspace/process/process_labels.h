// userspace/process/process_labels.h - what the agent labels a process's
// samples with, read from /proc while it runs: its executable, its cgroup
// and the container that cgroup belongs to, and a service name taken from
// one of its environment variables.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace gsymprof {

struct ProcessLabels {
  std::string executable_path;  // /proc/PID/exe's target ("" unreadable)
  std::string cgroup;           // the cgroup v2 path, else the first v1 hierarchy's
  std::string container_id;     // from the cgroup path; "" outside a container
  std::string service;          // the value of the variable asked for; "" absent
};

// The container a cgroup path belongs to: a 64-hex-digit id as docker,
// containerd (Kubernetes, cri-containerd-ID.scope), CRI-O (crio-ID.scope)
// and podman (libpod-ID.scope) name them, under cgroupfs or systemd slices;
// "" when no component is one.
std::string container_id_from_cgroup(std::string_view cgroup_path);

// The cgroup path of /proc/PID/cgroup's text: the v2 line ("0::PATH"), else
// the first line's path.
std::string cgroup_path_from_proc(std::string_view proc_cgroup_text);

// The value of `name` in an environ block (NUL-separated NAME=VALUE); "" absent.
std::string environment_value(std::string_view environ, std::string_view name);

// Reads the labels of `pid` (a process that exited has empty labels).
// `service_env` "": no environment is read.
ProcessLabels read_process_labels(uint32_t pid, const std::string& service_env,
                                  const std::string& proc_root = "/proc");

}  // namespace gsymprof
