#include "command_line.h"

#include <cstdio>
#include <memory>
#include <optional>
#include <vector>

#include "help_formatter.h"

namespace sp::ctl {
namespace {

// The first argument that neither the command nor the root could place, if any.
std::optional<std::string> first_unplaced(const CLI::App& root, const CLI::App& command) {
    for (const CLI::App* app : {&command, &root}) {
        const std::vector<std::string> left = app->remaining();
        if (!left.empty()) return left.front();
    }
    return std::nullopt;
}

bool looks_like_option(const std::string& argument) {
    return argument.size() > 1 && argument[0] == '-';
}

}  // namespace

void configure_root(CLI::App& root) {
    root.formatter(std::make_shared<HelpFormatter>());
    root.option_defaults()->group(kOptionsGroup)->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    root.set_help_flag("-h,--help", "print this help and exit");
    root.require_subcommand(0, 1);
}

std::string root_help(const CLI::App& root) {
    return root.get_formatter()->make_help(&root, root.get_name(), CLI::AppFormatMode::Normal);
}

int report_parse_error(const CLI::App& root, const CLI::ParseError& error, const std::string& last_argument) {
    if (dynamic_cast<const CLI::CallForHelp*>(&error) != nullptr) {
        std::fputs(root.help().c_str(), stdout);  // the chosen command's help, else the root's
        return 0;
    }
    const std::vector<CLI::App*> chosen = root.get_subcommands();
    const CLI::App& command = chosen.empty() ? root : *chosen.front();
    const std::string program = chosen.empty() ? root.get_name() : root.get_name() + " " + command.get_name();
    std::string message = error.what();
    bool with_help = false;
    if (const std::optional<std::string> extra = first_unplaced(root, command)) {
        message = chosen.empty()              ? "unknown command '" + *extra + "'"
                  : looks_like_option(*extra) ? "unknown option '" + *extra + "'"
                                              : "unexpected argument '" + *extra + "'";
        with_help = true;
    } else if (dynamic_cast<const CLI::RequiredError*>(&error) != nullptr) {
        with_help = true;
    } else if (dynamic_cast<const CLI::ArgumentMismatch*>(&error) != nullptr) {
        const CLI::Option* wanting = command.get_option_no_throw(last_argument);
        if (wanting != nullptr && wanting->get_type_size() != 0)
            message = "option '" + last_argument + "' needs a value";
    }
    std::fprintf(stderr, "%s: %s\n", program.c_str(), message.c_str());
    if (with_help) std::fprintf(stderr, "\n%s", root.help().c_str());
    return kExitUsage;
}

}  // namespace sp::ctl
