// The service's request decoders and naming: a store holding the inline_app
// GSYM names OTLP and pprof locations with the inline chain innermost
// first; other identities, named locations and hostile references.
#include <doctest/doctest.h>

#include <chrono>

#include "tests/unit/inline_app_gsym.h"
#include "tests/unit/test_files.h"
#include "userspace/output/pprof_input.h"
#include "userspace/output/pprof_output.h"
#include "userspace/output/profile.pb.h"
#include "userspace/serve/frame_namer.h"
#include "userspace/serve/otlp_request.h"
#include "userspace/serve/pprof_request.h"
#include "userspace/serve/symbol_store.h"

using namespace gsymprof;

namespace {

namespace otlp = opentelemetry::proto::profiles::v1development;
namespace pb = perftools::profiles;
using Clock = std::chrono::steady_clock;

struct Store {
  test_files::TempDir dir{"gsymprof_serve"};
  ServeMetrics metrics;
  std::unique_ptr<SymbolStore> store;
  Store() {
    test_files::write_file(dir / "app.gsym", test::inline_app_gsym());
    SymbolStoreOptions options;
    options.dir = dir.path;
    auto opened = SymbolStore::open(options, metrics);
    REQUIRE(opened.ok());
    store = std::move(*opened);
  }
  FrameNamer namer(Clock::duration budget = std::chrono::seconds(10)) { return FrameNamer(*store, Clock::now() + budget); }
};

// A mapping at 0x7f0000 of file offset 0x1000 (the GSYM is keyed by file
// offsets: no ELF in the store), so address 0x7f0000 + X is GSYM 0x1000 + X.
constexpr uint64_t kStart = 0x7f0000, kOffset = 0x1000;
uint64_t runtime(uint64_t gsym_addr) { return kStart + gsym_addr - kOffset; }

otlp_collector::ExportProfilesServiceRequest otlp_request(const std::string& build_id_hex) {
  otlp_collector::ExportProfilesServiceRequest request;
  otlp::ProfilesDictionary& d = *request.mutable_dictionary();
  for (const char* s : {"", kGnuBuildIdAttribute, "app", "process.executable.build_id.htlhash", "named"})
    d.add_string_table(s);
  d.add_attribute_table();
  otlp::KeyValueAndUnit* gnu = d.add_attribute_table();
  gnu->set_key_strindex(1);
  gnu->mutable_value()->set_string_value(build_id_hex);
  otlp::KeyValueAndUnit* htl = d.add_attribute_table();
  htl->set_key_strindex(3);
  htl->mutable_value()->set_string_value("0123456789abcdef0123456789abcdef");
  d.add_mapping_table();
  otlp::Mapping* app = d.add_mapping_table();  // 1: GNU build ID
  app->set_memory_start(kStart);
  app->set_memory_limit(kStart + 0x1000);
  app->set_file_offset(kOffset);
  app->set_filename_strindex(2);
  app->add_attribute_indices(1);
  otlp::Mapping* hashed = d.add_mapping_table();  // 2: the OTel profiler's file ID only
  *hashed = *app;
  hashed->clear_attribute_indices();
  hashed->add_attribute_indices(2);
  d.add_function_table();
  d.add_function_table()->set_name_strindex(4);  // 1: "named"
  d.add_location_table();
  auto location = [&](int32_t mapping, uint64_t address) {
    otlp::Location* l = d.add_location_table();
    l->set_mapping_index(mapping);
    l->set_address(address);
    return l;
  };
  location(1, runtime(0x1120));                               // 1: bar inlined in foo
  location(1, runtime(0x1010));                               // 2: main
  location(2, runtime(0x1010));                               // 3: file-ID hash only
  location(0, 0x1234);                                        // 4: no mapping
  location(1, runtime(0x1010))->add_lines()->set_function_index(1);  // 5: named already
  location(1, runtime(0x1300));                               // 6: no function there
  location(1, kStart + 0x2000);                               // 7: outside the mapping
  return request;
}

std::string otlp_name(const otlp::ProfilesDictionary& d, const otlp::Line& line) {
  return d.string_table(d.function_table(line.function_index()).name_strindex());
}

}  // namespace

TEST_CASE("serve: a build ID in a request is hex of 4 to 64 bytes") {
  CHECK(parse_request_build_id("aa010203").has_value());
  const std::optional<BuildId> upper = parse_request_build_id("AA010203");
  REQUIRE(upper.has_value());
  CHECK(upper->hex() == "aa010203");
  CHECK(!parse_request_build_id("aa0102"));         // 3 bytes
  CHECK(!parse_request_build_id("aa01020"));        // odd
  CHECK(!parse_request_build_id("../../etc/passwd"));
  CHECK(!parse_request_build_id("aa01020g"));
  CHECK(!parse_request_build_id(std::string(130, 'a')));
  CHECK(parse_request_build_id(std::string(128, 'a')).has_value());
}

TEST_CASE("serve: mapping addresses to GSYM addresses by PT_LOAD, executable segment or file offset") {
  AddressRule segments;
  segments.kind = AddressRule::Segments;
  segments.segments = {{0, 0x400000, 0x800, 0x800, false}, {0x1000, 0x401000, 0x500, 0x500, true}};
  CHECK(gsym_address(segments, 0x7000, 0x8000, 0x1000, 0x7010) == 0x401010u);
  CHECK(!gsym_address(segments, 0x7000, 0x8000, 0x1000, 0x7600));  // past the segment's file bytes
  CHECK(!gsym_address(segments, 0x7000, 0x8000, 0x1000, 0x6fff));  // before the mapping
  CHECK(!gsym_address(segments, 0x7000, 0x8000, 0x1000, 0x8000));  // at its limit
  AddressRule text;
  text.kind = AddressRule::ExecutableSegment;
  text.text_page = 0x401000;
  CHECK(gsym_address(text, 0x7000, 0x8000, 0x1000, 0x7010) == 0x401010u);
  AddressRule offsets;
  CHECK(gsym_address(offsets, 0x7000, 0, 0x1000, 0x7010) == 0x1010u);  // limit 0: unknown
}

// The OTel eBPF profiler does not send process addresses: its mapping's
// start and limit, and its locations' addresses, are in the ELF file's
// virtual address space (start = the virtual address of the mapping's file
// offset), and a caller's frame is already its return address minus one.
// A PIE's text (p_offset 0x1000, p_vaddr 0x1000) mapped at 0x555555554000 +
// 0x1000: both views of one frame give one GSYM address, every rule.
TEST_CASE("serve: the OTel eBPF profiler's file-relative mappings name the same address as process ones") {
  AddressRule segments;
  segments.kind = AddressRule::Segments;
  segments.segments = {{0, 0, 0x800, 0x800, false}, {0x1000, 0x1000, 0x3000, 0x3000, true}};
  AddressRule text;
  text.kind = AddressRule::ExecutableSegment;
  text.text_page = 0x1000;
  AddressRule offsets;
  const uint64_t base = 0x555555554000;
  for (const AddressRule* rule : {&segments, &text, &offsets}) {
    CAPTURE(static_cast<int>(rule->kind));
    const auto process = gsym_address(*rule, base + 0x1000, base + 0x4000, 0x1000, base + 0x2345);
    const auto otel = gsym_address(*rule, 0x1000, 0x4000, 0x1000, 0x2345);
    REQUIRE(process.has_value());
    CHECK(*process == 0x2345u);
    CHECK(otel == process);
    CHECK(!gsym_address(*rule, 0x1000, 0x4000, 0x1000, 0x4000));  // the OTel limit holds too
  }
}

TEST_CASE("serve: OTLP locations named innermost first; other identities and named ones left alone") {
  Store s;
  auto request = otlp_request("AA010203");
  FrameNamer namer = s.namer();
  REQUIRE(symbolize_otlp(request, namer).ok());
  const otlp::ProfilesDictionary& d = request.dictionary();
  const otlp::Location& inlined = d.location_table(1);
  REQUIRE(inlined.lines_size() == 2);
  CHECK(otlp_name(d, inlined.lines(0)) == "bar");
  CHECK(inlined.lines(0).line() == 50);
  CHECK(otlp_name(d, inlined.lines(1)) == "foo(int)");
  CHECK(inlined.lines(1).line() == 20);
  const otlp::Function& foo = d.function_table(inlined.lines(1).function_index());
  CHECK(d.string_table(foo.system_name_strindex()) == "_Z3fooi");
  CHECK(d.string_table(foo.filename_strindex()) == "/src/app.c");
  REQUIRE(d.location_table(2).lines_size() == 1);
  CHECK(otlp_name(d, d.location_table(2).lines(0)) == "main");
  CHECK(d.location_table(3).lines_size() == 0);
  CHECK(d.location_table(4).lines_size() == 0);
  REQUIRE(d.location_table(5).lines_size() == 1);
  CHECK(otlp_name(d, d.location_table(5).lines(0)) == "named");
  CHECK(d.location_table(6).lines_size() == 0);
  CHECK(d.location_table(7).lines_size() == 0);
  const FrameCounts& counts = namer.counts();
  CHECK(counts[static_cast<size_t>(FrameOutcome::Named)] == 2);
  CHECK(counts[static_cast<size_t>(FrameOutcome::NoBuildId)] == 1);
  CHECK(counts[static_cast<size_t>(FrameOutcome::NoMapping)] == 1);
  CHECK(counts[static_cast<size_t>(FrameOutcome::AlreadyNamed)] == 1);
  CHECK(counts[static_cast<size_t>(FrameOutcome::NoFunction)] == 1);
  CHECK(counts[static_cast<size_t>(FrameOutcome::OutsideMapping)] == 1);
  // Strings and functions are not repeated: main and foo once each.
  int mains = 0;
  for (const otlp::Function& f : d.function_table()) mains += d.string_table(f.name_strindex()) == "main";
  CHECK(mains == 1);
}

TEST_CASE("serve: OTLP with a build ID the store lacks, past the deadline, hostile references") {
  Store s;
  {
    auto request = otlp_request("bb010203");
    FrameNamer namer = s.namer();
    REQUIRE(symbolize_otlp(request, namer).ok());
    CHECK(request.dictionary().location_table(1).lines_size() == 0);
    CHECK(namer.counts()[static_cast<size_t>(FrameOutcome::NoSymbols)] == 4);
  }
  {
    auto request = otlp_request("aa010203");
    FrameNamer namer = s.namer(-std::chrono::seconds(1));
    REQUIRE(symbolize_otlp(request, namer).ok());
    CHECK(request.dictionary().location_table(1).lines_size() == 0);
    CHECK(namer.counts()[static_cast<size_t>(FrameOutcome::Deadline)] == 4);
  }
  auto refused = [&](auto spoil) {
    auto request = otlp_request("aa010203");
    spoil(*request.mutable_dictionary());
    FrameNamer namer = s.namer();
    return !symbolize_otlp(request, namer).ok();
  };
  CHECK(refused([](otlp::ProfilesDictionary& d) { d.mutable_location_table(1)->set_mapping_index(9); }));
  CHECK(refused([](otlp::ProfilesDictionary& d) { d.mutable_location_table(2)->set_mapping_index(-1); }));
  CHECK(refused([](otlp::ProfilesDictionary& d) { d.mutable_mapping_table(1)->add_attribute_indices(99); }));
  CHECK(refused([](otlp::ProfilesDictionary& d) { d.mutable_attribute_table(1)->set_key_strindex(99); }));
  CHECK(refused([](otlp::ProfilesDictionary& d) { d.mutable_function_table(1)->set_name_strindex(-3); }));
  CHECK(refused([](otlp::ProfilesDictionary& d) { d.mutable_location_table(5)->mutable_lines(0)->set_function_index(7); }));
  FrameNamer namer = s.namer();
  CHECK(!symbolize_otlp_bytes("\xff\xff\xff", namer).ok());
}

// Linux allows any bytes in a thread name or a path, and the OTel eBPF
// profiler and the Collector pass them on as they are: such a request is
// named like any other and its strings come back byte for byte (with the
// upstream protos' `string` fields the parse failed and the window was
// refused; userspace/export/proto/README.md).
TEST_CASE("serve: OTLP strings that are not UTF-8 are kept, and the request named") {
  Store s;
  auto request = otlp_request("aa010203");
  otlp::ProfilesDictionary& d = *request.mutable_dictionary();
  const std::string thread("work\xff\xfe" "er", 8), path("/opt/\xc3(/app", 11);
  d.set_string_table(2, path);  // the mapping's file name
  d.add_string_table("thread.name");
  d.add_string_table(thread);
  otlp::KeyValueAndUnit* name = d.add_attribute_table();
  name->set_key_strindex(d.string_table_size() - 2);
  name->mutable_value()->set_string_value(thread);
  request.add_resource_profiles()->add_scope_profiles()->add_profiles()->add_samples()->add_attribute_indices(
      d.attribute_table_size() - 1);
  std::string bytes;
  REQUIRE(request.SerializeToString(&bytes));
  FrameNamer namer = s.namer();
  auto named = symbolize_otlp_bytes(bytes, namer);
  REQUIRE(named.ok());
  otlp_collector::ExportProfilesServiceRequest back;
  REQUIRE(back.ParseFromString(*named));
  const otlp::ProfilesDictionary& b = back.dictionary();
  CHECK(b.string_table(2) == path);
  CHECK(b.attribute_table(b.attribute_table_size() - 1).value().string_value() == thread);
  REQUIRE(b.location_table(1).lines_size() == 2);
  CHECK(otlp_name(b, b.location_table(1).lines(0)) == "bar");
  CHECK(namer.counts()[static_cast<size_t>(FrameOutcome::Named)] == 2);
}

TEST_CASE("serve: pprof locations named, the mapping flagged; hostile profiles refused") {
  Store s;
  pb::Profile profile;
  for (const char* text : {"", "app", "aa010203", "samples", "count"}) profile.add_string_table(text);
  pb::ValueType* type = profile.add_sample_type();
  type->set_type(3);
  type->set_unit(4);
  pb::Mapping* mapping = profile.add_mapping();
  mapping->set_id(1);
  mapping->set_memory_start(kStart);
  mapping->set_memory_limit(kStart + 0x1000);
  mapping->set_file_offset(kOffset);
  mapping->set_filename(1);
  mapping->set_build_id(2);
  pb::Location* leaf = profile.add_location();
  leaf->set_id(1);
  leaf->set_mapping_id(1);
  leaf->set_address(runtime(0x1120));
  pb::Location* root = profile.add_location();
  root->set_id(2);
  root->set_mapping_id(1);
  root->set_address(runtime(0x1010));
  pb::Sample* sample = profile.add_sample();
  sample->add_location_id(1);
  sample->add_location_id(2);
  sample->add_value(7);

  FrameNamer namer = s.namer();
  auto named = symbolize_pprof(profile.SerializeAsString(), 1 << 20, namer);
  REQUIRE(named.ok());
  auto plain = gunzip_bytes(*named, 1 << 20);
  REQUIRE(plain.ok());
  pb::Profile answer;
  REQUIRE(answer.ParseFromString(*plain));
  auto name_of = [&](const pb::Line& line) {
    for (const pb::Function& f : answer.function())
      if (f.id() == line.function_id()) return answer.string_table(static_cast<int>(f.name()));
    return std::string("?");
  };
  REQUIRE(answer.location(0).line_size() == 2);
  CHECK(name_of(answer.location(0).line(0)) == "bar");
  CHECK(name_of(answer.location(0).line(1)) == "foo(int)");
  REQUIRE(answer.location(1).line_size() == 1);
  CHECK(name_of(answer.location(1).line(0)) == "main");
  CHECK(answer.mapping(0).has_functions());
  CHECK(answer.mapping(0).has_inline_frames());
  // go tool pprof's reading of it, folded: root first, inline marks.
  auto folded = folded_from_pprof(*named);
  REQUIRE(folded.ok());
  REQUIRE(folded->stacks.size() == 1);
  CHECK(folded->stacks[0].stack == "main;foo(int);bar_[i]");
  CHECK(folded->stacks[0].count == 7);

  auto refused = [&](auto spoil) {
    pb::Profile bad = profile;
    spoil(bad);
    FrameNamer n = s.namer();
    auto result = symbolize_pprof(bad.SerializeAsString(), 1 << 20, n);
    return !result.ok() && result.error().message.find('\n') == std::string::npos;
  };
  CHECK(refused([](pb::Profile& p) { p.mutable_mapping(0)->set_build_id(99); }));
  CHECK(refused([](pb::Profile& p) { p.mutable_location(0)->set_mapping_id(5); }));
  CHECK(refused([](pb::Profile& p) { p.mutable_mapping(0)->set_id(0); }));
  CHECK(refused([](pb::Profile& p) { p.set_string_table(0, "x"); }));
  CHECK(refused([](pb::Profile& p) { *p.add_mapping() = p.mapping(0); }));
  CHECK(refused([](pb::Profile& p) {
    pb::Function* f = p.add_function();
    f->set_id(3);
    f->set_name(-1);
  }));
  FrameNamer n = s.namer();
  CHECK(!symbolize_pprof("\x1f\x8b garbage", 1 << 20, n).ok());
}


TEST_CASE("serve: a GSYM's demangled names are kept for the next request") {
  DemangleCache cache;
  const std::string table("_Z3fooi\0main\0", 13);  // as a GSYM's string table holds them
  const std::string_view mangled(table.data(), 7), plain(table.data() + 8, 4);
  std::string spare;
  const std::string_view first = cache.get(mangled, spare);
  CHECK(first == "foo(int)");
  CHECK(cache.get(mangled, spare).data() == first.data());  // kept, not demangled again
  CHECK(cache.get(plain, spare).empty());                    // "" = the symbol itself
  CHECK(spare.empty());

  // Two requests on one store name foo alike; the second from the kept name.
  Store s;
  for (int round = 0; round < 2; ++round) {
    auto request = otlp_request("aa010203");
    FrameNamer namer = s.namer();
    REQUIRE(symbolize_otlp(request, namer).ok());
    const otlp::ProfilesDictionary& d = request.dictionary();
    REQUIRE(d.location_table(1).lines_size() == 2);
    CHECK(otlp_name(d, d.location_table(1).lines(1)) == "foo(int)");
    CHECK(d.string_table(d.function_table(d.location_table(1).lines(1).function_index()).system_name_strindex()) ==
          "_Z3fooi");
  }
}
