// userspace/cli/command_line.h - one declarative option table per command,
// parsed by CLI11, with the conventions every gsymprof command shares:
//   --flag value and --flag=value (short flags: -f value), options before or
//   after positional arguments, "--" ends the options (profile and record
//   take the command after it), -h/--help prints the help generated from the
//   table, and a usage error is one line "gsymprof CMD: MESSAGE" followed by
//   the usage, exit 2.
// Values are handed to their handlers in command-line order, as they are read.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace gsymprof {

// Thrown by a value handler for a bad value; the message is the usage error.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

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

 private:
  struct Row;  // one line of the help: an option, or the "-- CMD" entry
  struct RequiredArgument;
  CLI::Option* add_row(CLI::Option* option);
  // argv[1...] with "--name=" as "--name" "": CLI11 would take the next
  // argument as the value of "--name=".
  std::vector<std::string> split_empty_values(int argc, char** argv) const;
  std::string parse_remaining(const std::vector<std::string>& remaining);
  std::string missing_argument_message() const;

  std::string command_, about_, epilogue_, section_;
  std::unique_ptr<CLI::App> app_;
  std::vector<Row> rows_;
  std::vector<RequiredArgument> required_;
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
// --help, -h or help (0), to stderr when the name is missing or unknown (2).
int run_subcommand(const char* program, const char* noun, std::span<const Subcommand> subcommands,
                   int argc, char** argv);

}  // namespace gsymprof
