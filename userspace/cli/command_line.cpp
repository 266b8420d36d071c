#include "userspace/cli/command_line.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <limits>

#include "userspace/base/text_escape.h"

namespace gsymprof {
namespace {

constexpr size_t kWidth = 80;       // help and usage lines
constexpr size_t kHelpColumn = 20;  // where option descriptions start

// "-o,--output" -> "-o": the name messages use, whichever spelling was typed.
std::string first_name(const std::string& names) { return names.substr(0, names.find(',')); }

// `text` word-wrapped to `width`, every line after the first indented by
// `indent` spaces; '\n' in `text` forces a break.
std::string wrap(const std::string& text, size_t first_column, size_t indent, size_t width) {
  std::string out;
  size_t column = first_column;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    bool line_empty = true;
    for (size_t word = start; word < end;) {
      size_t space = text.find(' ', word);
      if (space == std::string::npos || space > end) space = end;
      const size_t length = space - word;
      if (length == 0) {
        ++word;
        continue;
      }
      if (!line_empty && column + 1 + length > width) {
        out += '\n' + std::string(indent, ' ');
        column = indent;
        line_empty = true;
      }
      if (!line_empty) {
        out += ' ';
        ++column;
      }
      out.append(text, word, length);
      column += length;
      line_empty = false;
      word = space;
    }
    if (end == text.size()) break;
    out += '\n' + std::string(indent, ' ');
    column = indent;
    start = end + 1;
  }
  return out;
}

// Optimal string alignment distance: insertions, deletions, substitutions
// and swaps of adjacent characters cost one each.
size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1,
                          d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

// Set while a ManPageSections is alive (one at a time).
ManPageSections* g_man_sections = nullptr;

// `text` for roff: backslashes and hyphens escaped, no line starting with a
// control character.
std::string roff(std::string_view text) {
  std::string out;
  bool line_start = true;
  for (char c : text) {
    if (line_start && (c == '.' || c == '\'')) out += "\\&";
    if (c == '\\') out += "\\e";
    else if (c == '-') out += "\\-";
    else out += c;
    line_start = c == '\n';
  }
  return out;
}

// Preformatted help text (lines ending in '\n', blank lines between
// paragraphs) as roff paragraphs; indented lines stay as they are.
std::string roff_paragraphs(std::string_view text) {
  std::string out = ".PP\n";
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(start, end - start);
    if (line.empty()) out += ".PP\n";
    else if (line.front() == ' ') out += ".br\n" + roff(line) + "\n";
    else out += roff(line) + "\n";
    start = end + 1;
  }
  return out;
}

}  // namespace

std::string closest_name(std::string_view typed, std::span<const std::string> names) {
  if (typed.empty()) return "";
  const size_t limit = typed.size() <= 4 ? 1 : typed.size() <= 8 ? 2 : 3;
  std::string best;
  size_t best_score = std::numeric_limits<size_t>::max();
  for (const std::string& name : names) {
    size_t score = edit_distance(typed, name);
    // "--dur" for --duration, "--frequency" for --freq.
    const bool prefix = std::min(typed.size(), name.size()) >= 3 &&
                        (name.starts_with(typed) || typed.starts_with(name));
    if (score > limit && !prefix) continue;
    if (prefix) score = std::min(score, limit);
    if (score < best_score) {
      best_score = score;
      best = name;
    }
  }
  return best;
}

ManPageSections::ManPageSections() { g_man_sections = this; }
ManPageSections::~ManPageSections() { g_man_sections = nullptr; }

struct CommandLine::Row {
  std::string section;
  CLI::Option* option = nullptr;  // nullptr: the "-- CMD ARGS..." entry
  std::string value_name;         // "" for flags and positional arguments
  std::string help;
  bool repeatable = false;
  bool required = false;

  bool positional() const { return option && option->get_positional(); }

  // "-o, --output OUT", "CAPTURE", "ADDR...", "-- CMD ARGS...".
  std::string label() const {
    if (!option) return "-- CMD ARGS...";
    if (positional()) return option->get_name() + (repeatable ? "..." : "");
    std::string names;
    for (const std::string& name : option->get_snames()) names += (names.empty() ? "-" : ", -") + name;
    for (const std::string& name : option->get_lnames()) names += (names.empty() ? "--" : ", --") + name;
    return value_name.empty() ? names : names + " " + value_name;
  }

  // How the usage line shows it: "[-F HZ]", "-o CAPTURE", "[--gsym-dir DIR]...".
  std::string usage() const {
    if (!option) return "[-- CMD ARGS...]";
    if (positional()) return required ? option->get_name() : "[" + label() + "]";
    std::string name = option->get_snames().empty() ? "--" + option->get_lnames().front()
                                                     : "-" + option->get_snames().front();
    if (!value_name.empty()) name += " " + value_name;
    if (required) return name;
    return "[" + name + "]" + (repeatable ? "..." : "");
  }
};

struct CommandLine::RequiredArgument {
  std::string missing_message;
  bool seen = false;
};

CommandLine::CommandLine(std::string command, std::string about, std::string epilogue)
    : command_(std::move(command)),
      about_(std::move(about)),
      epilogue_(std::move(epilogue)),
      app_(std::make_unique<CLI::App>("", "gsymprof " + command_)) {
  // Unknown options and extra arguments come back as remaining(): our
  // messages, and the command after "--".
  app_->allow_extras();
  // Our own help flag, so that it acts where it stands, like every option.
  // (Not a row: help() lists it last.)
  app_->set_help_flag();
  app_->add_option("-h,--help", [](const CLI::results_t&) -> bool { throw CLI::CallForHelp(); })
      ->expected(0)
      ->trigger_on_parse();
}

CommandLine::~CommandLine() = default;

CLI::Option* CommandLine::add_row(CLI::Option* option) {
  rows_.push_back(Row{section_, option, "", option->get_description(), false, false});
  return option;
}

CommandLine& CommandLine::section(std::string title) {
  section_ = std::move(title);
  return *this;
}

CommandLine& CommandLine::value(const std::string& names, std::string value_name, std::string help,
                                ValueHandler handler) {
  add_row(app_->add_option_function<std::string>(names, std::move(handler), std::move(help)))
      ->trigger_on_parse();
  rows_.back().value_name = std::move(value_name);
  return *this;
}

CommandLine& CommandLine::path(const std::string& names, std::string value_name, std::string help,
                               std::string& out) {
  const std::string name = first_name(names);
  return value(names, std::move(value_name), std::move(help), [name, &out](const std::string& v) {
    if (v.empty()) throw UsageError(name + " needs a non-empty value");
    out = v;
  });
}

CommandLine& CommandLine::paths(const std::string& names, std::string value_name, std::string help,
                                std::vector<std::string>& out) {
  const std::string name = first_name(names);
  value(names, std::move(value_name), std::move(help), [name, &out](const std::string& v) {
    if (v.empty()) throw UsageError(name + " needs a non-empty value");
    out.push_back(v);
  });
  rows_.back().repeatable = true;
  return *this;
}

CommandLine& CommandLine::required() {
  Row& row = rows_.back();
  row.required = true;
  const size_t index = required_.size();
  required_.push_back({"missing " + row.usage(), false});
  // Every value the option is given marks it as given.
  row.option->each([this, index](const std::string&) { required_[index].seen = true; });
  return *this;
}

CommandLine& CommandLine::flag(const std::string& names, std::string help, std::function<void()> set) {
  const std::string name = first_name(names);
  // CLI11 hands a flag "true", or what follows '=' in "--flag=VALUE".
  auto callback = [name, set = std::move(set)](const CLI::results_t& results) {
    if (results.size() != 1 || results.front() != "true") throw UsageError(name + " takes no value");
    set();
    return true;
  };
  add_row(app_->add_option(names, std::move(callback), std::move(help)))
      ->expected(0)
      ->trigger_on_parse();
  return *this;
}

CommandLine& CommandLine::argument(std::string name, const std::string& what, std::string help,
                                   std::string& out) {
  const size_t index = required_.size();
  required_.push_back({"missing " + name + (what.empty() ? "" : " " + what), false});
  auto store = [this, index, &out](const std::string& v) {
    out = v;
    required_[index].seen = true;
  };
  add_row(app_->add_option_function<std::string>(std::move(name), std::move(store), std::move(help)))
      ->trigger_on_parse();
  rows_.back().required = true;
  has_positional_ = true;
  return *this;
}

CommandLine& CommandLine::arguments(std::string name, std::string help, ValueHandler handler) {
  auto each = [handler = std::move(handler)](const std::vector<std::string>& values) {
    for (const std::string& v : values) handler(v);
  };
  add_row(app_->add_option_function<std::vector<std::string>>(std::move(name), std::move(each),
                                                              std::move(help)));
  rows_.back().repeatable = true;
  has_positional_ = true;
  return *this;
}

CommandLine& CommandLine::command_after_dashes(std::string help, std::vector<std::string>& out) {
  rows_.push_back(Row{section_, nullptr, "", std::move(help), false, false});
  command_out_ = &out;
  return *this;
}

CommandLine& CommandLine::unquoted_unknown_options() {
  quote_unknown_ = false;
  return *this;
}

CommandLine& CommandLine::example(std::string what, std::string command_line) {
  examples_.emplace_back(std::move(what), std::move(command_line));
  return *this;
}

std::string CommandLine::unknown_option_message(const std::string& arg) const {
  const std::string quote = quote_unknown_ ? "'" : "";
  std::string message = "unknown option " + quote + arg + quote;
  // "--outptu=x" and "--outptu" alike; single-letter options are not guessed.
  if (!arg.starts_with("--")) return message;
  const std::string typed = arg.substr(2, arg.find('=') - 2);
  std::vector<std::string> names = {"help"};
  for (const Row& row : rows_)
    if (row.option && !row.positional())
      for (const std::string& name : row.option->get_lnames()) names.push_back(name);
  const std::string best = closest_name(typed, names);
  if (!best.empty()) message += " (did you mean " + quote + "--" + best + quote + "?)";
  return message;
}

std::string CommandLine::parse_remaining(const std::vector<std::string>& remaining) {
  for (size_t i = 0; i < remaining.size(); ++i) {
    const std::string& arg = remaining[i];
    if (arg == "--") {
      if (!command_out_) continue;  // it only ended the options
      if (i + 1 == remaining.size()) return "-- needs a command";
      command_out_->assign(remaining.begin() + static_cast<std::ptrdiff_t>(i) + 1, remaining.end());
      return "";
    }
    if (arg.size() > 1 && arg[0] == '-') return unknown_option_message(arg);
    return has_positional_ ? "more than one input file" : "unexpected argument '" + arg + "'";
  }
  return "";
}

std::string CommandLine::missing_argument_message() const {
  for (const RequiredArgument& argument : required_)
    if (!argument.seen) return argument.missing_message;
  return "";
}

std::vector<std::string> CommandLine::split_empty_values(int argc, char** argv) const {
  auto takes_value = [this](const std::string& name) {
    const CLI::Option* option = app_->get_option_no_throw(name);
    return option && !option->get_positional() && option->get_items_expected_max() > 0;
  };
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") {
      args.insert(args.end(), argv + i, argv + argc);
      break;
    }
    if (arg.starts_with("--") && arg.ends_with('=') && takes_value(arg.substr(0, arg.size() - 1))) {
      args.push_back(arg.substr(0, arg.size() - 1));
      args.emplace_back();
      continue;
    }
    args.push_back(arg);
    if (takes_value(arg) && i + 1 < argc) args.emplace_back(argv[++i]);  // whatever it looks like
  }
  return args;
}

std::optional<int> CommandLine::parse(int argc, char** argv) {
  if (g_man_sections) {
    g_man_sections->text_ += man_section();
    return 0;
  }
  std::vector<std::string> args = split_empty_values(argc, argv);
  try {
    std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 pops from the back
    app_->parse(reversed);
    if (std::string error = parse_remaining(app_->remaining()); !error.empty())
      return usage_error(error);
    if (std::string missing = missing_argument_message(); !missing.empty()) return usage_error(missing);
  } catch (const CLI::CallForHelp&) {
    std::fputs(help().c_str(), stdout);
    return 0;
  } catch (const UsageError& error) {
    return usage_error(error.what());
  } catch (const CLI::ArgumentMismatch&) {
    // CLI11 takes the argument after an option as its value whatever it
    // looks like, so only an option given last can lack its value.
    return usage_error(args.back() + " needs a value");
  } catch (const CLI::ParseError& error) {
    return usage_error(error.what());
  }
  return std::nullopt;
}

int CommandLine::usage_error(const std::string& message) const {
  std::fprintf(stderr, "gsymprof %s: %s\n%s", command_.c_str(), escape_control(message).c_str(),
               usage().c_str());
  return 2;
}

int CommandLine::failure(const std::string& message) const {
  std::fprintf(stderr, "gsymprof %s: %s\n", command_.c_str(), escape_control(message).c_str());
  return 1;
}

std::string CommandLine::usage() const {
  // Positional arguments, then options with a short name, then the others
  // (getopt's convention), then the command after "--".
  std::vector<const Row*> order;
  for (const Row& row : rows_)
    if (row.positional()) order.push_back(&row);
  for (const Row& row : rows_)
    if (row.option && !row.positional() && !row.option->get_snames().empty()) order.push_back(&row);
  for (const Row& row : rows_)
    if (row.option && !row.positional() && row.option->get_snames().empty()) order.push_back(&row);
  for (const Row& row : rows_)
    if (!row.option) order.push_back(&row);
  const std::string prefix = "usage: gsymprof " + command_;
  std::string line = prefix, out;
  for (const Row* row : order) {
    const std::string item = row->usage();
    if (line.size() > prefix.size() && line.size() + 1 + item.size() > kWidth) {
      out += line + '\n';
      line = std::string(prefix.size(), ' ');
    }
    line += ' ' + item;
  }
  return out + line + '\n';
}

std::string CommandLine::help() const {
  std::string out = usage();
  if (!about_.empty()) out += '\n' + about_;
  std::vector<std::string> sections;
  for (const Row& row : rows_)
    if (std::find(sections.begin(), sections.end(), row.section) == sections.end())
      sections.push_back(row.section);
  // -h is listed last among the options (not under positional arguments).
  std::string help_section = "options";
  for (const Row& row : rows_)
    if (!row.positional()) help_section = row.section;
  if (std::find(sections.begin(), sections.end(), help_section) == sections.end())
    sections.push_back(help_section);
  for (const std::string& section : sections) {
    out += section.empty() ? "\n" : '\n' + section + ":\n";
    std::vector<std::pair<std::string, std::string>> lines;
    for (const Row& row : rows_)
      if (row.section == section) lines.emplace_back(row.label(), row.help);
    if (section == help_section) lines.emplace_back("-h, --help", "show this help");
    for (const auto& [label, text] : lines) {
      std::string entry = "  " + label;
      if (entry.size() + 2 <= kHelpColumn)
        entry.resize(kHelpColumn, ' ');
      else
        entry += '\n' + std::string(kHelpColumn, ' ');
      out += entry + wrap(text, kHelpColumn, kHelpColumn, kWidth) + '\n';
    }
  }
  if (!examples_.empty()) {
    out += "\nexamples:\n";
    for (const auto& [what, command_line] : examples_)
      out += "  " + wrap(what + ":", 2, 2, kWidth) + "\n    " + command_line + '\n';
  }
  if (!epilogue_.empty()) out += '\n' + epilogue_;
  return out;
}

std::string CommandLine::man_section() const {
  std::string out = ".SS \"gsymprof " + roff(command_) + "\"\n.nf\n" + roff(usage()) + ".fi\n";
  if (!about_.empty()) out += roff_paragraphs(about_);
  std::vector<std::string> sections;
  for (const Row& row : rows_)
    if (std::find(sections.begin(), sections.end(), row.section) == sections.end())
      sections.push_back(row.section);
  for (const std::string& section : sections) {
    if (!section.empty()) out += ".PP\n" + roff(section) + ":\n";
    for (const Row& row : rows_) {
      if (row.section != section) continue;
      // The names bold, the value's name italic.
      const std::string label = row.label();
      const size_t names_end =
          row.value_name.empty() ? label.size() : label.size() - row.value_name.size() - 1;
      std::string term = "\\fB" + roff(label.substr(0, names_end)) + "\\fR";
      if (!row.value_name.empty()) term += " \\fI" + roff(row.value_name) + "\\fR";
      out += ".TP\n" + term + "\n" + roff(row.help) + "\n";
    }
  }
  if (!examples_.empty()) {
    out += ".PP\nExamples:\n";
    for (const auto& [what, command_line] : examples_)
      out += ".PP\n" + roff(what) + ":\n.RS\n.nf\n" + roff(command_line) + "\n.fi\n.RE\n";
  }
  if (!epilogue_.empty()) out += roff_paragraphs(epilogue_);
  return out;
}

namespace {

std::string subcommand_list(const std::string& program, const std::string& noun,
                            std::span<const Subcommand> subcommands, const std::string& options) {
  std::string upper = noun;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  std::string out = "usage: " + program + " " + upper + " [ARGS...]\n\n" + noun + "s:\n";
  for (const Subcommand& subcommand : subcommands) {
    std::string name = "  " + std::string(subcommand.name);
    name.resize(14, ' ');
    out += name + subcommand.summary + '\n';
  }
  if (!options.empty()) out += "\noptions:\n" + options;
  return out + "\nRun '" + program + " help " + upper + "' for a " + noun + "'s options.\n";
}

}  // namespace

int run_subcommand(const char* program, const char* noun, std::span<const Subcommand> subcommands,
                   int argc, char** argv, const std::string& options) {
  const std::string list = subcommand_list(program, noun, subcommands, options);
  if (g_man_sections) {
    // Every subcommand's section, as its --help would print it.
    for (const Subcommand& subcommand : subcommands) {
      std::string name = subcommand.name, help = "--help";
      char* args[] = {name.data(), help.data(), nullptr};
      subcommand.run(2, args);
    }
    return 0;
  }
  if (argc < 2) {
    std::fputs(list.c_str(), stderr);
    return 2;
  }
  std::string_view name = argv[1];
  // "help NAME ARGS..." is "NAME ARGS... --help".
  std::vector<char*> help_args;
  std::string help_flag = "--help";
  if (name == "help" && argc > 2) {
    help_args.push_back(argv[0]);
    help_args.insert(help_args.end(), argv + 2, argv + argc);
    help_args.push_back(help_flag.data());
    argc = static_cast<int>(help_args.size());
    help_args.push_back(nullptr);
    argv = help_args.data();
    name = argv[1];
  }
  if (name == "--help" || name == "-h" || name == "help") {
    std::fputs(list.c_str(), stdout);
    return 0;
  }
  for (const Subcommand& subcommand : subcommands)
    if (name == subcommand.name) return subcommand.run(argc - 1, argv + 1);
  std::vector<std::string> names;
  for (const Subcommand& subcommand : subcommands) names.emplace_back(subcommand.name);
  const std::string best = closest_name(name, names);
  const std::string guess = best.empty() ? "" : " (did you mean '" + best + "'?)";
  std::fprintf(stderr, "%s: unknown %s '%s'%s\n%s", program, noun,
               escape_control(std::string(name)).c_str(), guess.c_str(), list.c_str());
  return 2;
}

}  // namespace gsymprof
