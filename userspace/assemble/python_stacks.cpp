#include "userspace/assemble/python_stacks.h"

#include "userspace/base/monotonic_clock.h"
#include "userspace/process/normalize.h"

namespace gsymprof {
namespace {

std::string version_name(uint32_t hexversion) {
  return std::to_string(hexversion >> 24) + "." + std::to_string((hexversion >> 16) & 0xff);
}

PythonWalk walk_of(const PythonLayout& layout, uint64_t runtime) {
  PythonWalk walk;
  walk.runtime = runtime;
  walk.runtime_tstate_current = layout.runtime_tstate_current;
  walk.runtime_interpreters_head = layout.runtime_interpreters_head;
  walk.interp_threads_head = layout.interp_threads_head;
  walk.tstate_next = layout.tstate_next;
  walk.tstate_native_thread_id = layout.tstate_native_thread_id;
  walk.tstate_cframe = layout.tstate_cframe;
  walk.cframe_current_frame = layout.cframe_current_frame;
  walk.frame_code = layout.frame_code;
  walk.frame_previous = layout.frame_previous;
  walk.frame_prev_instr = layout.frame_prev_instr;
  walk.frame_is_entry = layout.frame_is_entry;
  walk.frame_owner = layout.frame_owner;
  walk.owned_by_cstack = layout.frame_owned_by_cstack;
  walk.code_adaptive = layout.code_adaptive;
  return walk;
}

// What the sampler's walk can follow: a version whose frames say where each
// eval call's run ends, by is_entry (3.11) or by the C-stack frame each
// call pushes (3.12), and whose frame fields lie within the bytes it reads.
bool walkable(const PythonLayout& layout) {
  const bool runs = layout.frame_is_entry != kPythonAbsent ||
                    (layout.frame_owner != kPythonAbsent && layout.frame_owned_by_cstack != kPythonAbsent);
  constexpr uint32_t kFrameBytes = 80;  // bpf/profile.h PROFILE_PYTHON_FRAME_BYTES
  for (uint32_t offset : {layout.frame_code, layout.frame_previous, layout.frame_prev_instr})
    if (offset == kPythonAbsent || offset + 8 > kFrameBytes) return false;
  // 3.13 keeps the current frame in the thread state (no cframe).
  return runs && layout.tstate_cframe != kPythonAbsent;
}

}  // namespace

PythonStacks::ImagePython PythonStacks::find_runtime(uint32_t image_id) {
  ImagePython found;
  const ProcessImage& image = processes_.image(image_id);
  for (size_t m = 0; m < image.modules.size(); ++m) {
    const ProcessModule& module = image.modules[m];
    if (!module.error.empty() || !module.identity.python) continue;
    const PythonSymbols& symbols = *module.identity.python;
    std::optional<uint64_t> bias;
    for (size_t i = 0; i < image.maps.size() && !bias; ++i)
      if (image.map_module[i] == static_cast<int32_t>(m))
        bias = load_bias(module.identity.segments, image.maps[i]);
    if (!bias) continue;
    // A table (3.11, 3.12), else what the runtime's debug offsets say (3.13).
    const PythonLayout* layout = python_layout_for(symbols);
    if (!layout || !walkable(*layout) || symbols.eval_size == 0) {
      // Once per process: a version the sampler cannot walk.
      if (!found_.contains(image.pid)) {
        found_[image.pid] = image_id;
        ++report_.unsupported_versions[version_name(symbols.hexversion)];
      }
      continue;
    }
    found.layout = layout;
    found.eval_start = symbols.eval_vaddr + *bias;
    found.eval_end = found.eval_start + symbols.eval_size;
    auto [it, first] = found_.try_emplace(image.pid, image_id);
    if (first || it->second != image_id) {
      it->second = image_id;
      ++report_.processes;
      if (on_found) on_found(image.pid, walk_of(*layout, symbols.runtime_vaddr + *bias));
    }
    break;
  }
  return found;
}

void PythonStacks::note_image(uint32_t image_id) {
  if (!images_.contains(image_id)) images_.emplace(image_id, find_runtime(image_id));
}

bool PythonStacks::found(uint32_t pid) const {
  auto it = found_.find(pid);
  if (it == found_.end()) return false;
  auto image = images_.find(it->second);
  return image != images_.end() && image->second.layout;
}

void PythonStacks::forget(uint32_t pid) {
  namer_.forget(pid);
  if (found_.erase(pid) && on_gone) on_gone(pid);
}

uint32_t PythonStacks::intern(PythonFrameName name) {
  PythonFrame frame{std::move(name.qualname), std::move(name.file), name.line};
  auto [it, added] = name_ids_.try_emplace(frame, static_cast<uint32_t>(names_.size()));
  if (added) names_.push_back(std::move(frame));
  return it->second;
}

void PythonStacks::clear_names() {
  names_.clear();
  name_ids_.clear();
}

std::span<const uint64_t> PythonStacks::merge(const RawSample& sample, uint32_t image_id, bool* cut_short) {
  *cut_short = false;
  const std::span<const PythonFrameRef> frames = sample.python.frames;
  if (frames.empty()) return {};
  ++report_.samples_with_python;
  auto image = images_.find(image_id);
  if (image == images_.end() || !image->second.layout) {
    ++report_.samples_unpaired;
    return {};
  }
  const ImagePython& python = image->second;

  // Name every frame first: one that cannot be named keeps the stack native.
  const MemoryReader read = [&](uint64_t address, std::span<uint8_t> out) {
    return processes_.read_memory(image_id, address, out) == out.size();
  };
  const uint64_t now = monotonic_ns();
  run_frames_.clear();
  for (const PythonFrameRef& ref : frames) {
    auto name = namer_.name(sample.pid, *python.layout, ref.code, ref.instr_offset, read, now);
    if (!name) {
      ++report_.samples_unnamed;
      return {};
    }
    run_frames_.push_back(intern(std::move(*name)));
  }

  // Runs, leaf first: each ends at an entry frame; a last one without its
  // entry frame is cut (the sampler keeps so many frames).
  size_t runs = 0;
  for (const PythonFrameRef& ref : frames) runs += ref.entry;
  const bool cut = !frames.back().entry;
  if (cut) ++runs;
  size_t eval_frames = 0;
  for (size_t i = 0; i < sample.ips.size(); ++i) {
    const uint64_t address = lookup_address(sample.ips[i], i);
    eval_frames += address >= python.eval_start && address < python.eval_end;
  }
  // Every run pairs with an eval frame; more eval frames than runs only when
  // the Python stack was cut, fewer only when the native stack was.
  const bool paired = eval_frames == runs || (cut && eval_frames > runs) ||
                      (sample.truncated && eval_frames < runs && !cut);
  if (!paired || eval_frames == 0) {
    ++report_.samples_unpaired;
    return {};
  }
  ++report_.samples_merged;
  if (cut) ++report_.samples_cut;

  merged_.clear();
  size_t next = 0;  // the first frame of the next run
  for (size_t i = 0; i < sample.ips.size(); ++i) {
    const uint64_t address = lookup_address(sample.ips[i], i);
    if (address < python.eval_start || address >= python.eval_end) {
      merged_.push_back(sample.ips[i]);
      continue;
    }
    do {
      merged_.push_back(kTag | run_frames_[next]);
    } while (!frames[next++].entry && next < frames.size());
    if (next == frames.size()) {
      // A cut run: what called its outermost kept frame is unknown, so the
      // stack ends here, marked truncated, as one cut at a depth limit.
      if (cut) {
        *cut_short = true;
        break;
      }
    }
  }
  return merged_;
}

}  // namespace gsymprof
