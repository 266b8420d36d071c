// pprof read back as folded stacks (gsymprof diff's pprof input): gsymprof's
// own --format pprof gives exactly the folded output of the same capture;
// hand-built profiles check names, the value chosen, and hostile input.
#include <doctest/doctest.h>
#include <zlib.h>

#include <string>
#include <vector>

#include "tests/unit/inline_app_gsym.h"
#include "userspace/output/flamegraph.h"
#include "userspace/output/folded_output.h"
#include "userspace/output/pprof_input.h"
#include "userspace/output/pprof_output.h"
#include "userspace/output/profile.pb.h"

using namespace gsymprof;
namespace pb = perftools::profiles;

namespace {

constexpr uint64_t kBias = 0x555500000000;

Capture make_capture() {
  Capture capture;
  capture.frequency_hz = 100;
  CaptureModule app;
  app.path = "/usr/bin/app";
  app.build_id = BuildId(test::kInlineAppId);
  app.load_bias = kBias;
  app.mappings = {{kBias + 0x1000, kBias + 0x2000, 0x1000, "r-xp"}};
  capture.modules = {app};
  const CaptureFrame in_bar{0, 0x1120, UnresolvedReason::None}, in_main{0, 0x1050, UnresolvedReason::None};
  const CaptureFrame unnamed{0, 0x1f00, UnresolvedReason::None};
  capture.stacks.push_back({42, "app", {in_bar, in_main}, false, 3, 42});
  capture.stacks.push_back({43, "app", {in_main}, true, 2, 44});
  capture.stacks.push_back({43, "app", {unnamed, in_main}, false, 4, 43});
  capture.stacks.push_back({44, "other", {{-1, 0xdead, UnresolvedReason::NoMapping}}, false, 1, 44});
  capture.samples = 10;
  return capture;
}

std::string gzip(const std::string& bytes) {
  z_stream stream{};
  REQUIRE(deflateInit2(&stream, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) == Z_OK);
  std::string out(deflateBound(&stream, bytes.size()), '\0');
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  stream.avail_in = static_cast<uInt>(bytes.size());
  stream.next_out = reinterpret_cast<Bytef*>(out.data());
  stream.avail_out = static_cast<uInt>(out.size());
  REQUIRE(deflate(&stream, Z_FINISH) == Z_STREAM_END);
  out.resize(stream.total_out);
  deflateEnd(&stream);
  return out;
}

// A profile as Go writes one: no comm label, sample types samples + cpu.
struct ProfileBuilder {
  pb::Profile profile;
  ProfileBuilder() {
    str("");
    for (const char* type : {"samples", "cpu"}) {
      pb::ValueType* value = profile.add_sample_type();
      value->set_type(str(type));
      value->set_unit(str(type == std::string("samples") ? "count" : "nanoseconds"));
    }
  }
  int64_t str(const std::string& text) {
    for (int i = 0; i < profile.string_table_size(); ++i)
      if (profile.string_table(i) == text) return i;
    profile.add_string_table(text);
    return profile.string_table_size() - 1;
  }
  uint64_t function(const std::string& name) {
    pb::Function* f = profile.add_function();
    f->set_id(static_cast<uint64_t>(profile.function_size()));
    f->set_name(str(name));
    return f->id();
  }
  // Lines innermost first.
  uint64_t location(std::vector<uint64_t> functions, uint64_t mapping = 0, uint64_t address = 0) {
    pb::Location* l = profile.add_location();
    l->set_id(static_cast<uint64_t>(profile.location_size()) + 100);
    l->set_mapping_id(mapping);
    l->set_address(address);
    for (uint64_t f : functions) l->add_line()->set_function_id(f);
    return l->id();
  }
  uint64_t mapping(const std::string& file, uint64_t start, uint64_t offset) {
    pb::Mapping* m = profile.add_mapping();
    m->set_id(static_cast<uint64_t>(profile.mapping_size()));
    m->set_filename(str(file));
    m->set_memory_start(start);
    m->set_memory_limit(start + 0x10000);
    m->set_file_offset(offset);
    return m->id();
  }
  pb::Sample* sample(std::vector<uint64_t> leaf_first, int64_t count) {
    pb::Sample* s = profile.add_sample();
    for (uint64_t l : leaf_first) s->add_location_id(l);
    s->add_value(count);
    s->add_value(count > INT64_MAX / 10000000 ? count : count * 10000000);
    return s;
  }
  std::string bytes() const { return profile.SerializeAsString(); }
};

std::string read_error(const std::string& bytes) {
  auto stacks = folded_from_pprof(bytes);
  return stacks ? "" : stacks.error().message;
}

}  // namespace

TEST_CASE("pprof input: gsymprof's --format pprof reads back as the folded output of the same capture") {
  GsymLocator locator = test::inline_app_locator();
  const Capture capture = make_capture();
  auto pprof = pprof_profile(capture, locator, {});
  REQUIRE(pprof.ok());
  auto symbolized = symbolize(capture, locator, {});
  REQUIRE(symbolized.ok());
  auto stacks = folded_from_pprof(pprof->gzipped);
  REQUIRE_MESSAGE(stacks.ok(), stacks.error().message);
  CHECK(stacks->sample_type == "samples/count");
  CHECK(stacks->stacks == fold_stacks(*symbolized));
  CHECK(stacks->stacks == std::vector<FoldedLine>{{"app;[truncated];main", 2},
                                                  {"app;main;app+0x1f00", 4},
                                                  {"app;main;foo(int);bar_[i]", 3},
                                                  {"other;[unknown]", 1}});
}

TEST_CASE("pprof input: Go's profiles: no comm, inline lines, kernel and unsymbolized frames, plain protobuf") {
  ProfileBuilder b;
  const uint64_t exe = b.mapping("/usr/bin/server", 0x400000, 0);
  const uint64_t kernel = b.mapping("[kernel.kallsyms]", 0xffffffff81000000, 0);
  const uint64_t main_fn = b.function("main.main"), handle = b.function("main.handle");
  const uint64_t inlined = b.function("strings.Index"), syscall = b.function("do_syscall_64");
  const uint64_t root = b.location({main_fn}, exe, 0x401000);
  const uint64_t mid = b.location({inlined, handle}, exe, 0x402000);  // Index inlined into handle
  const uint64_t raw = b.location({}, exe, 0x403abc);
  const uint64_t kern = b.location({syscall}, kernel, 0xffffffff81001000);
  b.sample({mid, root}, 5);
  b.sample({raw, root}, 2);
  b.sample({kern, mid, root}, 1);
  b.sample({root}, 0);  // no samples: left out
  b.sample({mid, root}, 4);
  for (const std::string& bytes : {gzip(b.bytes()), b.bytes()}) {
    auto stacks = folded_from_pprof(bytes);
    REQUIRE_MESSAGE(stacks.ok(), stacks.error().message);
    REQUIRE(stacks->stacks.size() == 3);
    CHECK(stacks->stacks[0].stack == "main.main;main.handle;strings.Index_[i]");
    CHECK(stacks->stacks[0].count == 9);
    CHECK(stacks->stacks[1].stack == "main.main;main.handle;strings.Index_[i];do_syscall_64_[k]");
    CHECK(stacks->stacks[2].stack == "main.main;server+0x3abc");
    CHECK(stacks->stacks[2].count == 2);
  }
}

TEST_CASE("pprof input: the value read: samples, else the default sample type, else the last") {
  ProfileBuilder b;
  const uint64_t f = b.location({b.function("f")});
  b.sample({f}, 3);
  auto stacks = folded_from_pprof(b.bytes());
  REQUIRE(stacks.ok());
  CHECK(stacks->stacks == std::vector<FoldedLine>{{"f", 3}});

  pb::Profile heap;
  heap.add_string_table("");
  for (const char* text : {"alloc_space", "bytes", "inuse_space", "f"}) heap.add_string_table(text);
  for (int64_t type : {1, 3}) {
    pb::ValueType* v = heap.add_sample_type();
    v->set_type(type);
    v->set_unit(2);
  }
  pb::Function* fn = heap.add_function();
  fn->set_id(1);
  fn->set_name(4);
  pb::Location* location = heap.add_location();
  location->set_id(1);
  location->add_line()->set_function_id(1);
  pb::Sample* sample = heap.add_sample();
  sample->add_location_id(1);
  sample->add_value(1000);
  sample->add_value(200);
  auto last = folded_from_pprof(heap.SerializeAsString());
  REQUIRE(last.ok());
  CHECK(last->sample_type == "inuse_space/bytes");
  CHECK(last->stacks == std::vector<FoldedLine>{{"f", 200}});
  heap.set_default_sample_type(1);
  auto by_default = folded_from_pprof(heap.SerializeAsString());
  REQUIRE(by_default.ok());
  CHECK(by_default->sample_type == "alloc_space/bytes");
  CHECK(by_default->stacks == std::vector<FoldedLine>{{"f", 1000}});
}

TEST_CASE("pprof input: hostile input is a one-line error") {
  // A gzip header, then a deflate block of the reserved type 3.
  CHECK(read_error(std::string("\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03\x07\x00\x00", 13)) ==
        "pprof: gzip data corrupt");
  CHECK(read_error(gzip("abc").substr(0, 12)) == "pprof: gzip data truncated");
  CHECK(read_error("\x0a\xff\xff\xff\xff\x0f") == "pprof: not a profile.proto message");
  CHECK(read_error("") == "pprof: the profile has no sample types");
  // 64 MiB of zeros compress 1000:1, beyond the 16 MiB floor of the bound.
  const std::string bomb = gzip(std::string(64 << 20, '\0'));
  CHECK(read_error(bomb).starts_with("pprof: decompresses to more than 16777216 bytes"));

  ProfileBuilder b;
  const uint64_t f = b.location({b.function("f")});
  b.sample({f, 999}, 1);
  CHECK(read_error(b.bytes()) == "pprof: sample 0 refers to location 999, which the profile lacks");
  ProfileBuilder negative;
  negative.sample({negative.location({negative.function("f")})}, -5);
  CHECK(read_error(negative.bytes()) == "pprof: sample 0 has a negative value");
  ProfileBuilder bad_string;
  const uint64_t g = bad_string.function("g");
  bad_string.profile.mutable_function(0)->set_name(77);
  bad_string.sample({bad_string.location({g})}, 1);
  CHECK(read_error(bad_string.bytes()).starts_with("pprof: string 77 is not in the string table"));
  ProfileBuilder no_function;
  no_function.sample({no_function.location({5})}, 1);
  CHECK(read_error(no_function.bytes()) ==
        "pprof: location 101 refers to function 5, which the profile lacks");
  ProfileBuilder short_values;
  short_values.sample({short_values.location({short_values.function("f")})}, 1)->clear_value();
  CHECK(read_error(short_values.bytes()) == "pprof: sample 0 has 0 values for 2 sample types");
  ProfileBuilder overflow;
  const uint64_t o = overflow.location({overflow.function("o")});
  overflow.sample({o}, INT64_MAX);
  overflow.sample({o}, INT64_MAX);
  overflow.sample({o}, INT64_MAX);
  CHECK(read_error(overflow.bytes()) == "pprof: sample counts overflow 64 bits");
  // Names cannot split frames or lines; bytes that are not UTF-8 are read
  // (as Go's pprof reads them) and escaped.
  ProfileBuilder names;
  names.sample({names.location({names.function("a;b\nc\xff")})}, 1);
  auto sanitized = folded_from_pprof(names.bytes());
  REQUIRE_MESSAGE(sanitized.ok(), sanitized.error().message);
  CHECK(sanitized->stacks == std::vector<FoldedLine>{{"a:b\\x0ac\\xff", 1}});
}
