#include "userspace/output/pprof_output.h"

#include <zlib.h>

#include <algorithm>
#include <map>
#include <tuple>
#include <unordered_map>
#include <vector>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "userspace/output/frame_chains.h"
#include "userspace/output/mapping_numbers.h"
#include "userspace/output/profile.pb.h"

namespace gsymprof {
namespace {

namespace pb = perftools::profiles;

class StringTable {
 public:
  explicit StringTable(pb::Profile& profile) : profile_(profile) { index(""); }
  int64_t index(const std::string& text) {
    auto [it, added] = indexes_.try_emplace(text, static_cast<int64_t>(indexes_.size()));
    if (added) profile_.add_string_table(text);
    return it->second;
  }

 private:
  pb::Profile& profile_;
  std::unordered_map<std::string, int64_t> indexes_;
};

struct MappingFlags {
  bool functions = true, filenames = true, line_numbers = true;
};

class ProfileBuilder {
 public:
  ProfileBuilder(const Capture& capture, const SymbolizeOptions& options)
      : capture_(capture), options_(options), strings_(profile_) {}

  // Location i + 1 is frame i.
  void add_locations(const FrameChains& chains) {
    for (size_t i = 0; i < chains.frames.size(); ++i)
      add_location(chains.frames[i], chains.chains[i], chains.symbolized);
  }

  void add_samples(const std::map<CaptureFrame, uint32_t>& frame_numbers) {
    const uint64_t period = capture_.frequency_hz ? 1000000000ull / capture_.frequency_hz : 0;
    const int64_t comm_key = strings_.index("comm"), pid_key = strings_.index("pid");
    const int64_t thread_key = strings_.index("thread_id");
    std::map<uint32_t, const CaptureProcess*> process_of;
    for (const CaptureProcess& process : capture_.processes) process_of.emplace(process.pid, &process);
    for (const CaptureStack& stack : capture_.stacks) {
      if (stack.count == 0) continue;
      pb::Sample* sample = profile_.add_sample();
      // Off the CPU, the leaf is why: "[off-cpu S]", then "[short waits]".
      for_each_stack_entry(
          stack, frame_numbers, [&](uint32_t number) { sample->add_location_id(number + 1); },
          [&](const std::string& marker) { sample->add_location_id(marker_location(marker)); });
      const bool off = stack.off_cpu != OffCpuReason::None;
      switch (capture_.clock) {
        case ProfileClock::Cpu:
          sample->add_value(static_cast<int64_t>(stack.count));
          sample->add_value(static_cast<int64_t>(stack.count * period));
          break;
        case ProfileClock::OffCpu:
          sample->add_value(static_cast<int64_t>(stack.count));
          sample->add_value(static_cast<int64_t>(stack.off_cpu_ns));
          break;
        case ProfileClock::Wall:
          sample->add_value(off ? 0 : static_cast<int64_t>(stack.count * period));
          sample->add_value(off ? static_cast<int64_t>(stack.off_cpu_ns) : 0);
          sample->add_value(static_cast<int64_t>(stack_weight(capture_, stack)));
          break;
      }
      pb::Label* comm = sample->add_label();
      comm->set_key(comm_key);
      comm->set_str(strings_.index(stack.comm));
      pb::Label* pid = sample->add_label();
      pid->set_key(pid_key);
      pid->set_num(stack.pid);
      if (stack.tid != 0) {  // 0: a version-1 capture, which holds no threads
        pb::Label* thread = sample->add_label();
        thread->set_key(thread_key);
        thread->set_num(stack.tid);
      }
      if (auto process = process_of.find(stack.pid); process != process_of.end())
        for (const auto& [key, value] : process->second->labels) {
          pb::Label* label = sample->add_label();
          label->set_key(strings_.index(key));
          label->set_str(strings_.index(value));
        }
    }
  }

  pb::Profile finish() {
    auto value_type = [&](pb::ValueType* type, const char* name, const char* unit) {
      type->set_type(strings_.index(name));
      type->set_unit(strings_.index(unit));
    };
    // The last sample type is pprof's default view.
    switch (capture_.clock) {
      case ProfileClock::Cpu:
        value_type(profile_.add_sample_type(), "samples", "count");
        value_type(profile_.add_sample_type(), "cpu", "nanoseconds");
        break;
      case ProfileClock::OffCpu:
        value_type(profile_.add_sample_type(), "waits", "count");
        value_type(profile_.add_sample_type(), "off_cpu", "nanoseconds");
        break;
      case ProfileClock::Wall:
        value_type(profile_.add_sample_type(), "cpu", "nanoseconds");
        value_type(profile_.add_sample_type(), "off_cpu", "nanoseconds");
        value_type(profile_.add_sample_type(), "wall", "nanoseconds");
        break;
    }
    value_type(profile_.mutable_period_type(), "cpu", "nanoseconds");
    profile_.set_period(capture_.frequency_hz ? 1000000000ll / capture_.frequency_hz : 0);
    profile_.set_time_nanos(static_cast<int64_t>(capture_.start_time_unix_ns));
    profile_.set_duration_nanos(static_cast<int64_t>(capture_.duration_ns));
    profile_.add_comment(strings_.index("gsymprof: host " + capture_.host + ", kernel " +
                                        capture_.kernel_release + ", call graph " +
                                        call_graph_name(capture_.call_graph) + ", clock " +
                                        clock_name(capture_.clock)));
    for (int i = 0; i < profile_.mapping_size(); ++i) {
      pb::Mapping* mapping = profile_.mutable_mapping(i);
      const MappingFlags& flags = mapping_flags_[static_cast<size_t>(i)];
      mapping->set_has_functions(flags.functions);
      mapping->set_has_filenames(flags.functions && flags.filenames);
      mapping->set_has_line_numbers(flags.functions && flags.line_numbers);
      mapping->set_has_inline_frames(flags.functions && options_.inline_frames &&
                                     i + 1 != static_cast<int>(kernel_mapping_));
    }
    return std::move(profile_);
  }

 private:
  // The executable mapping of `module` holding `runtime` (0: none).
  uint64_t mapping_id(int32_t module_index, uint64_t runtime) {
    return mapping_ids_.of(capture_, module_index, runtime, static_cast<uint64_t>(profile_.mapping_size()) + 1,
                           [&](const CaptureModule& module, const ModuleMapping& range) {
                             add_mapping(range.start, range.end, range.file_offset, module.path, module.build_id);
                           });
  }

  // One mapping for every kernel frame, over the kernel addresses sampled,
  // named as perf names the kernel, with the recording kernel's build ID.
  uint64_t kernel_mapping_id() {
    if (kernel_mapping_ == 0) {
      const auto [start, limit] = kernel_address_range(capture_);
      add_mapping(start, limit, 0, kKernelModulePath, capture_.kernel.build_id);
      kernel_mapping_ = static_cast<uint64_t>(profile_.mapping_size());
      mapping_flags_.back().filenames = mapping_flags_.back().line_numbers = false;
    }
    return kernel_mapping_;
  }

  void add_mapping(uint64_t start, uint64_t limit, uint64_t file_offset, const std::string& path, const BuildId& id) {
    pb::Mapping* mapping = profile_.add_mapping();
    mapping->set_id(static_cast<uint64_t>(profile_.mapping_size()));
    mapping->set_memory_start(start);
    mapping->set_memory_limit(limit);
    mapping->set_file_offset(file_offset);
    mapping->set_filename(strings_.index(path));
    mapping->set_build_id(strings_.index(id.hex()));
    mapping_flags_.emplace_back();
  }

  uint64_t function_id(const SymbolizedFrame& frame) {
    auto [it, added] = function_ids_.try_emplace(std::tuple(frame.name, frame.system_name, frame.file,
                                                            frame.start_line),
                                                 function_ids_.size() + 1);
    if (added) {
      pb::Function* function = profile_.add_function();
      function->set_id(it->second);
      function->set_name(strings_.index(frame.name));
      // The raw (mangled) name, as profile.proto defines system_name.
      function->set_system_name(strings_.index(frame.system_name.empty() ? frame.name : frame.system_name));
      function->set_filename(strings_.index(frame.file));
      function->set_start_line(frame.start_line);
    }
    return it->second;
  }

  void add_location(const CaptureFrame& frame, const std::vector<uint32_t>& chain, const SymbolizeResult& result) {
    pb::Location* location = profile_.add_location();
    location->set_id(static_cast<uint64_t>(profile_.location_size()));
    // No mapping for JIT frames (frame.jit) or unknown ones: no file holds
    // their code, and pprof would try to symbolize a mapping's addresses.
    const uint64_t address = runtime_address(capture_, frame);
    const uint64_t mapping = frame.kernel ? kernel_mapping_id() : frame.module >= 0 ? mapping_id(frame.module, address) : 0;
    location->set_mapping_id(mapping);
    location->set_address(address);
    // symbolize() gives the chain root first; pprof wants it innermost first.
    for (auto id = chain.rbegin(); id != chain.rend(); ++id) {
      const SymbolizedFrame& named = result.frames[*id];
      pb::Line* line = location->add_line();
      line->set_function_id(function_id(named));
      line->set_line(named.line);
      if (mapping) {
        MappingFlags& flags = mapping_flags_[mapping - 1];
        flags.functions = flags.functions && (named.kind == FrameKind::Function ||
                                              (named.kind == FrameKind::Kernel && named.name != "[kernel]"));
        flags.filenames = flags.filenames && !named.file.empty();
        flags.line_numbers = flags.line_numbers && named.line != 0;
      }
    }
  }

  // A location of its own for a frame no code has: "[truncated]" at the
  // root of a cut stack, why a thread was off the CPU at its leaf.
  uint64_t marker_location(const std::string& name) {
    auto [it, added] = marker_ids_.try_emplace(name, 0);
    if (added) {
      pb::Location* location = profile_.add_location();
      it->second = static_cast<uint64_t>(profile_.location_size());
      location->set_id(it->second);
      location->add_line()->set_function_id(function_id(marker_frame(name)));
    }
    return it->second;
  }

  const Capture& capture_;
  const SymbolizeOptions& options_;
  pb::Profile profile_;
  StringTable strings_;
  MappingNumbers<uint64_t> mapping_ids_;
  std::vector<MappingFlags> mapping_flags_;                       // by id - 1
  // (name, system name, file, start line)
  std::map<std::tuple<std::string, std::string, std::string, uint32_t>, uint64_t> function_ids_;
  std::map<std::string, uint64_t> marker_ids_;  // marker_location's
  uint64_t kernel_mapping_ = 0;
};

}  // namespace

gsym::Expected<PprofProfile> pprof_profile(const Capture& capture, GsymLocator& locator,
                                           const SymbolizeOptions& options) {
  if (capture.modules.size() > INT32_MAX) return gsym::Error("pprof: too many modules");
  // Distinct frames, in the order the stacks first use them, except that the
  // root frame most samples share comes first: mappings are numbered as
  // their locations appear, and pprof takes mapping 1 for the main binary,
  // which is what most stacks start in (_start).
  std::map<CaptureFrame, uint64_t> root_samples;
  for (const CaptureStack& stack : capture.stacks)
    if (stack.count != 0 && !stack.frames.empty()) root_samples[stack.frames.back()] += stack.count;
  auto top_root = std::max_element(root_samples.begin(), root_samples.end(),
                                   [](const auto& a, const auto& b) { return a.second < b.second; });
  SymbolizeOptions chain_options = options;
  chain_options.function_start_lines = true;
  gsym::Expected<FrameChains> chains =
      symbolize_frames(capture, locator, chain_options, top_root != root_samples.end() ? &top_root->first : nullptr);
  if (!chains) return chains.error();

  ProfileBuilder builder(capture, options);
  builder.add_locations(*chains);
  builder.add_samples(chains->numbers);
  const pb::Profile profile = builder.finish();

  std::string bytes;
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    if (!profile.SerializeToCodedStream(&coded)) return gsym::Error("pprof: cannot serialize the profile");
  }
  gsym::Expected<std::string> gzipped = gzip_bytes(bytes);
  if (!gzipped) return gzipped.error();
  return PprofProfile{std::move(*gzipped), std::move(chains->symbolized), static_cast<size_t>(profile.sample_size())};
}

gsym::Expected<std::string> gzip_bytes(const std::string& bytes) {
  z_stream stream{};
  // 15 + 16: a gzip wrapper; zlib writes mtime 0, so equal input, equal bytes.
  if (deflateInit2(&stream, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    return gsym::Error("pprof: cannot start gzip");
  std::string out(deflateBound(&stream, bytes.size()), '\0');
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  stream.avail_in = static_cast<uInt>(bytes.size());
  stream.next_out = reinterpret_cast<Bytef*>(out.data());
  stream.avail_out = static_cast<uInt>(out.size());
  const int status = deflate(&stream, Z_FINISH);
  out.resize(stream.total_out);
  deflateEnd(&stream);
  if (status != Z_STREAM_END) return gsym::Error("pprof: gzip failed");
  return out;
}


}  // namespace gsymprof
