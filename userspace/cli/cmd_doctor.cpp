// gsymprof doctor: what this machine lets gsymprof do, and why. The kernel,
// each feature the sampler probes (with the first kernel that has it and
// what is lost without it), each BPF program with the verifier's cost in
// every configuration, the sysctls that matter, and the mode each stage will
// run in. Exit 0 when `profile` can sample here, 1 when it cannot.
#include <unistd.h>

#include <cstdio>
#include <string>

#include "userspace/base/json_text.h"
#include "userspace/cli/cli_common.h"
#include "userspace/cli/commands.h"
#include "userspace/sample/kernel_features.h"
#include "userspace/sample/sampler.h"

namespace gsymprof {
namespace {

constexpr const char* kAbout =
    "Checks what this machine lets gsymprof do: kernel, BTF, each BPF feature\n"
    "(with the first Linux version that has it and what is lost without it),\n"
    "every BPF program loaded in each configuration with the instructions the\n"
    "verifier processed (budget: 1,000,000; gsymprof keeps each under 200,000),\n"
    "perf_event_paranoid, lockdown, and the mode each stage will run in.\n"
    "Loads programs but attaches nothing. Needs root.\n"
    "Exit status: 0 sampling works here, 1 it does not.\n";

// The verifier's limit, and the share of it gsymprof allows itself.
constexpr uint64_t kVerifierLimit = 1000000;
constexpr uint64_t kOwnBudget = 200000;

struct Modes {
  std::string sampling, call_graph, sideband, follow;
};

Modes modes_for(const KernelFeatures& k) {
  Modes m;
  const KernelFeature* missing = k.missing_for_sampling();
  m.sampling = missing ? std::string("unavailable: needs ") + missing->name + " (Linux " +
                             missing->since + ")"
                       : "BPF on cpu-clock perf events: per CPU, or per target thread for -p until a target forks";
  if (k.has("task_pt_regs") && k.has("ringbuf_dynptr"))
    m.call_graph = k.has("find_vma")
                       ? "dwarf (stack copy + CFI) and fp"
                       : "dwarf (stack copy + CFI, stack top of non-glibc threads unknown) and fp";
  else
    m.call_graph = "fp only: --call-graph dwarf falls back to frame pointers";
  m.sideband = k.has("perf_sideband")
                   ? "the kernel's side-band records (no per-syscall program)"
                   : "/proc only (short-lived processes may go unnamed)";
  m.follow = k.has("raw_tracepoint") ? "raw tracepoint sched_process_fork"
                                              : "off: children are found through /proc only";
  return m;
}

void print_text(const KernelFeatures& k, const std::vector<ProgramCost>& costs, const Modes& m) {
  std::printf("kernel: %s %s\n", k.release.c_str(), k.version.c_str());
  std::printf("features:\n");
  for (const KernelFeature& f : k.features) {
    std::printf("  %-3s %s (Linux %s)", f.present ? "yes" : "NO", f.name, f.since);
    if (!f.present) std::printf(": %s", f.without[0] ? f.without : "sampling needs it");
    std::printf("\n");
  }
  std::printf("perf_event_paranoid: ");
  if (k.perf_event_paranoid == -100) std::printf("unknown\n");
  else std::printf("%d%s\n", k.perf_event_paranoid, geteuid() == 0 ? " (root: not limited)" : " (not root: run as root)");
  std::printf("lockdown: %s\n", k.lockdown.empty() ? "none or unknown" : k.lockdown.c_str());
  std::printf("programs (instructions the verifier processed; limit %llu, gsymprof's budget %llu):\n",
              static_cast<unsigned long long>(kVerifierLimit), static_cast<unsigned long long>(kOwnBudget));
  for (const ProgramCost& c : costs) {
    if (!c.loaded) {
      std::printf("  %-14s %-36s not loaded: %s\n", c.program.c_str(), c.configuration.c_str(),
                  c.error.c_str());
    } else if (c.verified_insns) {
      std::printf("  %-14s %-36s %8llu (%.1f%% of the limit)%s\n", c.program.c_str(),
                  c.configuration.c_str(), static_cast<unsigned long long>(c.verified_insns),
                  100.0 * static_cast<double>(c.verified_insns) / kVerifierLimit,
                  c.verified_insns > kOwnBudget ? "  OVER BUDGET" : "");
    } else {
      std::printf("  %-14s %-36s loaded (this kernel does not report the cost)\n",
                  c.program.c_str(), c.configuration.c_str());
    }
  }
  std::printf("modes:\n  sampling:   %s\n  call graph: %s\n  side-band:  %s\n  forks:      %s\n",
              m.sampling.c_str(), m.call_graph.c_str(), m.sideband.c_str(), m.follow.c_str());
}

void print_json(const KernelFeatures& k, const std::vector<ProgramCost>& costs, const Modes& m) {
  nlohmann::ordered_json out;
  out["kernel"] = k.release;
  out["kernel_version"] = k.version;
  out["features"] = nlohmann::ordered_json::array();
  for (const KernelFeature& f : k.features)
    out["features"].push_back(
        {{"key", f.key}, {"name", f.name}, {"since", f.since}, {"present", f.present}, {"without", f.without}});
  out["perf_event_paranoid"] = k.perf_event_paranoid;
  out["lockdown"] = k.lockdown;
  out["verifier_limit"] = kVerifierLimit;
  out["budget"] = kOwnBudget;
  out["programs"] = nlohmann::ordered_json::array();
  for (const ProgramCost& c : costs)
    out["programs"].push_back({{"program", c.program},
                               {"configuration", c.configuration},
                               {"loaded", c.loaded},
                               {"verified_insns", c.verified_insns},
                               {"error", c.error}});
  out["modes"] = {{"sampling", m.sampling},
                  {"call_graph", m.call_graph},
                  {"sideband", m.sideband},
                  {"forks", m.follow}};
  std::printf("%s\n", terminal_safe_json(out).c_str());
}

}  // namespace

int cmd_doctor(int argc, char** argv) {
  bool json = false;
  CommandLine cli("doctor", kAbout);
  cli.section("output");
  cli.flag("--json", "print the same facts as one JSON object", [&] { json = true; });
  cli.example("what this machine lets gsymprof do", "sudo gsymprof doctor")
      .example("each program's verifier cost, for a script",
               "sudo gsymprof doctor --json | jq '.programs[] | .verified_insns'");
  if (auto exit_status = cli.parse(argc, argv)) return *exit_status;
  const KernelFeatures kernel = probe_kernel_features();
  const std::vector<ProgramCost> costs = measure_programs();
  const Modes modes = modes_for(kernel);
  if (json) print_json(kernel, costs, modes);
  else print_text(kernel, costs, modes);
  bool sampling = kernel.missing_for_sampling() == nullptr;
  bool any_loaded = false;
  for (const ProgramCost& c : costs) any_loaded |= c.loaded && c.program == "sample_stack";
  return sampling && any_loaded ? 0 : 1;
}

}  // namespace gsymprof
