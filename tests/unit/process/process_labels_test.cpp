#include <doctest/doctest.h>

#include <unistd.h>

#include <string>

#include "userspace/process/process_labels.h"

using namespace gsymprof;

namespace {
const std::string kId = "4f3c1a0b2d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a";
}

TEST_CASE("process labels: container ids from the runtimes' cgroup paths") {
  CHECK(container_id_from_cgroup("/docker/" + kId) == kId);
  CHECK(container_id_from_cgroup("/system.slice/docker-" + kId + ".scope") == kId);
  CHECK(container_id_from_cgroup("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1234.slice/cri-containerd-" + kId + ".scope") == kId);
  CHECK(container_id_from_cgroup("/kubepods/burstable/pod5678/" + kId) == kId);
  CHECK(container_id_from_cgroup("/machine.slice/libpod-" + kId + ".scope/container") == kId);
  CHECK(container_id_from_cgroup("/kubepods.slice/crio-" + kId + ".scope") == kId);
  CHECK(container_id_from_cgroup("/user.slice/user-1000.slice/session-3.scope") == "");
  CHECK(container_id_from_cgroup("/") == "");
  CHECK(container_id_from_cgroup("/docker/" + kId.substr(1)) == "");  // 63 digits
  CHECK(container_id_from_cgroup("/docker/ABC" + kId.substr(3)) == "");  // not lower-case hex
}

TEST_CASE("process labels: the cgroup v2 line, else the first hierarchy") {
  CHECK(cgroup_path_from_proc("0::/system.slice/cron.service\n") == "/system.slice/cron.service");
  CHECK(cgroup_path_from_proc("12:pids:/user.slice\n11:memory:/user.slice/x\n0::/init.scope\n") == "/init.scope");
  CHECK(cgroup_path_from_proc("12:pids:/docker/abc\n11:memory:/docker/abc\n") == "/docker/abc");
  CHECK(cgroup_path_from_proc("garbage") == "");
  CHECK(cgroup_path_from_proc("") == "");
}

TEST_CASE("process labels: one variable of an environ block") {
  const std::string environ = std::string("PATH=/bin") + '\0' + "SERVICE=checkout" + '\0' + "SERVICE_X=no" + '\0';
  CHECK(environment_value(environ, "SERVICE") == "checkout");
  CHECK(environment_value(environ, "PATH") == "/bin");
  CHECK(environment_value(environ, "SERV") == "");
  CHECK(environment_value(environ, "HOME") == "");
  CHECK(environment_value("", "HOME") == "");
}

TEST_CASE("process labels: this process reads its own") {
  ProcessLabels labels = read_process_labels(static_cast<uint32_t>(::getpid()), "PATH");
  CHECK(labels.executable_path.find("unit_tests") != std::string::npos);
  CHECK(!labels.service.empty());
  CHECK(read_process_labels(0x7ffffffe, "PATH").executable_path.empty());
}
