#include "gsym/convert/debug_file_locator.h"

#include "gsym/format/leb128.h"

#include <cstring>

#include "gsym/base/hex.h"

#include <sys/stat.h>

#include <climits>
#include <cstdlib>
#include <set>

namespace gsym {

namespace {

bool is_regular_file(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string directory_of(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string real_path(const std::string& path) {
  char buffer[PATH_MAX];
  if (realpath(path.c_str(), buffer)) return buffer;
  return path;
}

}  // namespace

Status check_debug_file(const ElfImage& image, const ElfImage& candidate,
                        const std::string& candidate_path) {
  if (!candidate.has_dwarf()) return Error(candidate_path + ": has no DWARF");
  const std::vector<uint8_t> want = image.build_id();
  const std::vector<uint8_t> have = candidate.build_id();
  if (!want.empty() && !have.empty()) {
    if (want != have)
      return Error(candidate_path + ": build ID " + to_hex(have) + " differs from " +
                   to_hex(want));
    return Status::success();
  }
  std::optional<DebugLink> link = image.debug_link();
  if (!link) return Error(candidate_path + ": no build ID and no .gnu_debuglink CRC to check");
  Expected<uint32_t> crc = file_crc32(candidate_path);
  if (!crc) return Error(candidate_path + ": " + crc.error().message);
  if (*crc != link->crc) return Error(candidate_path + ": CRC-32 differs from .gnu_debuglink");
  return Status::success();
}

std::string find_debug_file(const ElfImage& image, const DebugFileSearch& search,
                            std::vector<std::string>* rejected) {
  std::vector<std::string> candidates;
  const std::vector<uint8_t> id = image.build_id();
  if (id.size() >= 2)
    for (const std::string& dir : search.debug_directories)
      candidates.push_back(build_id_debug_path(dir, id));
  if (std::optional<DebugLink> link = image.debug_link();
      link && link->name.find('/') == std::string::npos) {
    std::vector<std::string> dirs = {directory_of(image.path())};
    const std::string real_dir = directory_of(real_path(image.path()));
    if (real_dir != dirs[0]) dirs.push_back(real_dir);
    for (const std::string& d : dirs) {
      candidates.push_back(d + "/" + link->name);
      candidates.push_back(d + "/.debug/" + link->name);
    }
    for (const std::string& debug_dir : search.debug_directories)
      for (const std::string& d : dirs) candidates.push_back(debug_dir + d + "/" + link->name);
  }
  const std::string self = real_path(image.path());
  std::set<std::string> seen;
  for (const std::string& path : candidates) {
    if (!seen.insert(path).second || !is_regular_file(path)) continue;
    if (real_path(path) == self) continue;
    Expected<ElfImage> candidate = ElfImage::open(path);
    if (!candidate) {
      if (rejected) rejected->push_back(path + ": " + candidate.error().message);
      continue;
    }
    Status ok = check_debug_file(image, *candidate, path);
    if (ok) return path;
    if (rejected) rejected->push_back(ok.error().message);
  }
  return "";
}

std::string build_id_debug_path(const std::string& debug_dir, std::span<const uint8_t> id) {
  if (id.size() < 2) return "";
  const std::string hex = to_hex(id);
  return debug_dir + "/.build-id/" + hex.substr(0, 2) + "/" + hex.substr(2) + ".debug";
}

std::optional<SupplementaryLink> parse_debug_sup(std::span<const uint8_t> section, bool little_endian) {
  if (section.size() < 4) return std::nullopt;
  const uint16_t version = little_endian ? uint16_t(section[0] | section[1] << 8) : uint16_t(section[0] << 8 | section[1]);
  if (version != 5 || section[2] > 1) return std::nullopt;
  SupplementaryLink link;
  link.is_supplementary = section[2] == 1;
  const uint8_t* p = section.data() + 3;
  const uint8_t* end = section.data() + section.size();
  const uint8_t* nul = static_cast<const uint8_t*>(std::memchr(p, 0, static_cast<size_t>(end - p)));
  if (!nul || (nul == p && !link.is_supplementary)) return std::nullopt;
  link.name.assign(reinterpret_cast<const char*>(p), static_cast<size_t>(nul - p));
  p = nul + 1;
  uint64_t length = 0;
  if (!leb128::read_uleb_fast(p, end, length) || length > static_cast<uint64_t>(end - p) || length > kMaxBuildIdBytes)
    return std::nullopt;
  link.checksum.assign(p, p + length);
  return link;
}

}  // namespace gsym
