#include "userspace/base/file_stamp.h"

#include "gsym/base/file_io.h"

namespace gsymprof {

std::string FileStamp::key() const {
  return std::to_string(dev) + ":" + std::to_string(inode) + ":" + std::to_string(size) + ":" +
         std::to_string(mtime_ns) + ":" + std::to_string(ctime_ns);
}

FileStamp FileStamp::of(const struct stat& st) {
  FileStamp stamp;
  stamp.dev = st.st_dev;
  stamp.inode = st.st_ino;
  stamp.size = static_cast<uint64_t>(st.st_size);
  stamp.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  stamp.ctime_ns = static_cast<int64_t>(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec;
  stamp.trusted = gsym::writable_only_by_us(st);
  return stamp;
}

}  // namespace gsymprof
