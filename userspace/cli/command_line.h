// userspace/cli/command_line.h - one declarative option table per command,
// parsed by CLI11, with the conventions every gsymprof command shares:
//   --flag value and --flag=value (short flags: -f value), options before or
//   after positional arguments, "--" ends the options (profile and record
//   take the command after it), -h/--help prints the help generated from the
//   table (with the command's examples), and a usage error is one line
//   "gsymprof CMD: MESSAGE" followed by the usage, exit 2. A mistyped option
//   or command is answered with the closest name ("did you mean ...?").
// The same table also writes the command's section of the manual page
// (ManPageSections, `gsymprof --man`), so --help and gsymprof.1 agree.
// Values are handed to their handlers in command-line order, as they are read.
#pragma once

#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "userspace/base/parse_number.h"

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace gsymprof {

// Thrown by a value handler for a bad value; the message is the usage error.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A flag's number from `minimum` to `maximum`, else a UsageError:
// "FLAG: WHAT, at least MIN, not 'VALUE'" (no maximum) or
// "FLAG: WHAT from MIN to MAX, not 'VALUE'".
template <typename T>
T parse_flag_number(const std::string& flag, const std::string& value, const std::string& what, T minimum,
                    T maximum = std::numeric_limits<T>::max()) {
  std::optional<T> n = parse_unsigned<T>(value);
  if (n && *n >= minimum && *n <= maximum) return *n;
  const std::string range = maximum == std::numeric_limits<T>::max()
                                ? ", at least " + std::to_string(minimum)
                                : " from " + std::to_string(minimum) + " to " + std::to_string(maximum);
  throw UsageError(flag + ": " + what + range + ", not '" + value + "'");
}

class CommandLine {
 public:
  using ValueHandler = std::function<void(const std::string& value)>;

  // `command`: what follows "gsymprof " in messages ("profile", "gsym lookup").
  // `about` is printed between the usage and the options, `epilogue` after
  // the options; both are preformatted lines ending in '\n' (or empty).
  CommandLine(std::string command, std::string about, std::string epilogue = "");
  ~CommandLine();
  CommandLine(const CommandLine&) = delete;
  CommandLine& operator=(const CommandLine&) = delete;

  // --- the table, in the order the help lists it ---

  // Options added from here on are listed under "TITLE:" ("" = no title).
  CommandLine& section(std::string title);
  // An option with a value: `names` like "-o,--output", `value_name` as in
  // "-o OUT". The handler throws UsageError for a bad value.
  CommandLine& value(const std::string& names, std::string value_name, std::string help,
                     ValueHandler handler);
  // A value naming a file or directory: stored in `out`; empty is an error.
  CommandLine& path(const std::string& names, std::string value_name, std::string help,
                    std::string& out);
  // The same, repeatable, each value appended ("[--gsym-dir DIR]...").
  CommandLine& paths(const std::string& names, std::string value_name, std::string help,
                     std::vector<std::string>& out);
  // Makes the option added last mandatory ("missing -o CAPTURE" without it).
  CommandLine& required();
  // An option without a value.
  CommandLine& flag(const std::string& names, std::string help, std::function<void()> set);
  // A mandatory positional argument; without it: "missing NAME WHAT"
  // ("missing FOLDED input file"), a second one: "more than one input file".
  CommandLine& argument(std::string name, const std::string& what, std::string help,
                        std::string& out);
  // Any number of trailing positional arguments ("[ADDR...]").
  CommandLine& arguments(std::string name, std::string help, ValueHandler handler);
  // Everything after "--" is the command ("[-- CMD ARGS...]"); "--" with
  // nothing after it is an error.
  CommandLine& command_after_dashes(std::string help, std::vector<std::string>& out);
  // flamegraph's message for an unknown option has never quoted it.
  CommandLine& unquoted_unknown_options();
  // One entry of the help's "examples:" section: what it does, then the
  // command line ("sudo gsymprof profile -p 1234 -d 10 --svg flame.svg").
  CommandLine& example(std::string what, std::string command_line);

  // --- use ---

  // Parses argv (argv[0] is the command's name). nullopt: go on; otherwise
  // the exit status to end with, after the help (0) or a usage error (2)
  // has been printed.
  std::optional<int> parse(int argc, char** argv);
  // Prints the usage error and returns 2.
  int usage_error(const std::string& message) const;
  // Prints "gsymprof CMD: MESSAGE" (escaped: messages quote file names and
  // contents) and returns 1.
  int failure(const std::string& message) const;
  // "usage: gsymprof CMD ..." wrapped to 80 columns, and the whole help.
  std::string usage() const;
  std::string help() const;
  // The command's section of the manual page (roff): usage, about, the
  // options by section, examples, epilogue.
  std::string man_section() const;

 private:
  struct Row;  // one line of the help: an option, or the "-- CMD" entry
  struct RequiredArgument;
  CLI::Option* add_row(CLI::Option* option);
  // argv[1...] with "--name=" as "--name" "": CLI11 would take the next
  // argument as the value of "--name=".
  std::vector<std::string> split_empty_values(int argc, char** argv) const;
  std::string parse_remaining(const std::vector<std::string>& remaining);
  std::string missing_argument_message() const;
  std::string unknown_option_message(const std::string& arg) const;

  std::string command_, about_, epilogue_, section_;
  std::unique_ptr<CLI::App> app_;
  std::vector<Row> rows_;
  std::vector<RequiredArgument> required_;
  std::vector<std::pair<std::string, std::string>> examples_;  // (what, command line)
  std::vector<std::string>* command_out_ = nullptr;
  bool has_positional_ = false;
  bool quote_unknown_ = true;
};

// A command (or gsym's subcommand): its name, its line in the list, its
// entry point (argv[0] is its name; returns the exit status).
struct Subcommand {
  const char* name;
  const char* summary;
  int (*run)(int argc, char** argv);
};

// Runs the subcommand argv[1] names. `program` is "gsymprof" or "gsymprof
// gsym", `noun` "command" or "subcommand". The list goes to stdout for
// --help, -h or help (0), to stderr when the name is missing or unknown (2,
// with the closest name when one is close). "help NAME [ARGS...]" is "NAME
// [ARGS...] --help". `options` (preformatted lines) lists the program's own
// options after the subcommands ("" = none).
int run_subcommand(const char* program, const char* noun, std::span<const Subcommand> subcommands,
                   int argc, char** argv, const std::string& options = "");

// The name of `names` closest to `typed` (edit distance, adjacent
// transpositions counting one; or one a prefix of the other), "" when none
// is close enough to be a likely typo: at most 1 edit for names up to 4
// characters, 2 up to 8, 3 beyond.
std::string closest_name(std::string_view typed, std::span<const std::string> names);

// While one is alive, CommandLine::parse appends its command's man_section()
// to it instead of parsing (and returns 0), and run_subcommand given --help
// runs each of its subcommands so: running every command with --help writes
// the manual page's command sections (`gsymprof --man`).
class ManPageSections {
 public:
  ManPageSections();
  ~ManPageSections();
  ManPageSections(const ManPageSections&) = delete;
  ManPageSections& operator=(const ManPageSections&) = delete;
  const std::string& text() const { return text_; }

 private:
  friend class CommandLine;
  std::string text_;
};

}  // namespace gsymprof
