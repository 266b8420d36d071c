// The command line's answers to typos and its manual-page sections.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "userspace/cli/command_line.h"

using namespace gsymprof;

TEST_CASE("closest_name: a typo gets the name it most likely meant") {
  const std::vector<std::string> options = {"pid", "freq", "duration", "output", "svg", "title",
                                            "call-graph", "user-callchains", "help"};
  CHECK(closest_name("outptu", options) == "output");       // adjacent letters swapped
  CHECK(closest_name("otput", options) == "output");        // one left out
  CHECK(closest_name("pdi", options) == "pid");
  CHECK(closest_name("titel", options) == "title");
  CHECK(closest_name("callgraph", options) == "call-graph");
  CHECK(closest_name("frequency", options) == "freq");      // a longer spelling of it
  CHECK(closest_name("dur", options) == "duration");        // a prefix of it
  CHECK(closest_name("verbose", options) == "");            // nothing close
  CHECK(closest_name("x", options) == "");
  CHECK(closest_name("", options) == "");
  const std::vector<std::string> commands = {"profile", "record", "symbolize", "flamegraph", "gsym", "doctor"};
  CHECK(closest_name("profil", commands) == "profile");
  CHECK(closest_name("recrod", commands) == "record");
  CHECK(closest_name("symbolise", commands) == "symbolize");
  CHECK(closest_name("docter", commands) == "doctor");
  CHECK(closest_name("perf", commands) == "");
}

TEST_CASE("man_section: the option table as roff, hyphens and backslashes escaped") {
  std::string out;
  CommandLine cli("demo", "Does a thing.\n.Not a request.\n");
  cli.section("options");
  cli.path("-o,--output", "OUT", "write to OUT", out);
  cli.flag("--no-x", "no \\x", [] {});
  cli.example("the usual", "gsymprof demo -o a.txt");
  const std::string roff = cli.man_section();
  CHECK(roff.find(".SS \"gsymprof demo\"\n") == 0);
  CHECK(roff.find("\\&.Not a request.") != std::string::npos);  // not a roff request
  CHECK(roff.find(".TP\n\\fB\\-o, \\-\\-output\\fR \\fIOUT\\fR\nwrite to OUT\n") != std::string::npos);
  CHECK(roff.find(".TP\n\\fB\\-\\-no\\-x\\fR\nno \\ex\n") != std::string::npos);
  CHECK(roff.find("gsymprof demo \\-o a.txt") != std::string::npos);
  // And --help lists the example under "examples:".
  CHECK(cli.help().find("examples:\n  the usual:\n    gsymprof demo -o a.txt\n") != std::string::npos);
}
