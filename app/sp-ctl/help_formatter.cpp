#include "help_formatter.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace sp::ctl {
namespace {

constexpr std::size_t kLineWidth = 100;
// A label wider than this puts its text on the next line rather than pushing every row right.
constexpr std::size_t kMaxLabelWidth = 26;

using Row = std::pair<std::string, std::string>;  // label, text

std::string path_of(const CLI::App& app) {
    const CLI::App* parent = app.get_parent();
    return parent ? path_of(*parent) + " " + app.get_name() : app.get_name();
}

std::vector<const CLI::App*> listed_commands(const CLI::App& app) {
    // A command in no group (sp-ctl help) works but is not listed.
    return app.get_subcommands(
        [](const CLI::App* c) { return !c->get_group().empty() && !c->get_disabled(); });
}

bool takes_value(const CLI::Option& o) {
    return o.get_type_size() != 0;
}

// "--blocks IDS", "-h, --help", "--json".
std::string option_label(const CLI::Option& o) {
    std::string names;
    for (const std::string& s : o.get_snames()) names += (names.empty() ? "-" : ", -") + s;
    for (const std::string& l : o.get_lnames()) names += (names.empty() ? "--" : ", --") + l;
    return takes_value(o) ? names + " " + o.get_type_name() : names;
}

// The option's description, and its default when it has one.
std::string option_text(const CLI::Option& o) {
    const std::string shown_default = o.get_default_str();
    return shown_default.empty() ? o.get_description()
                                 : o.get_description() + " (default: " + shown_default + ")";
}

// `text` broken at spaces into lines of at most `width` characters (a longer word stays whole);
// its own line breaks are kept.
std::vector<std::string> wrapped(const std::string& text, std::size_t width) {
    std::vector<std::string> lines;
    std::size_t start = 0;
    while (start <= text.size()) {
        const std::size_t newline = std::min(text.find('\n', start), text.size());
        std::string line;
        for (std::size_t word = start; word < newline;) {
            const std::size_t space = std::min(text.find(' ', word), newline);
            const std::string piece = text.substr(word, space - word);
            if (!line.empty() && line.size() + 1 + piece.size() > width) {
                lines.push_back(line);
                line.clear();
            }
            line += (line.empty() ? "" : " ") + piece;
            word = space + 1;
        }
        lines.push_back(line);
        start = newline + 1;
    }
    return lines;
}

// "  LABEL   text" rows, the texts aligned at one column and wrapped to the line width.
std::string table(const std::vector<Row>& rows, std::size_t label_width) {
    std::string out;
    const std::string indent(2 + label_width + 2, ' ');
    for (const auto& [label, text] : rows) {
        std::string first = "  " + label;
        if (text.empty()) {
            out += first + "\n";
            continue;
        }
        if (first.size() + 2 > indent.size()) {
            out += first + "\n";
            first = indent;
        } else {
            first.resize(indent.size(), ' ');
        }
        const std::vector<std::string> lines = wrapped(text, kLineWidth - indent.size());
        for (std::size_t i = 0; i < lines.size(); ++i) out += (i == 0 ? first : indent) + lines[i] + "\n";
    }
    return out;
}

struct Section {
    std::string title;
    std::vector<Row> rows;
};

// The commands, the positional arguments, then the options by group: the default group first, the
// others in the order they were declared, -h/--help last in the default group.
std::vector<Section> sections_of(const CLI::App& app) {
    std::vector<Section> sections;
    Section commands{"commands", {}}, arguments{"arguments", {}}, options{kOptionsGroup, {}};
    for (const CLI::App* c : listed_commands(app)) {
        const std::string& about = c->get_description();
        commands.rows.emplace_back(c->get_name(), about.substr(0, about.find('\n')));
    }
    std::vector<Section> groups;
    for (const CLI::Option* o : app.get_options()) {
        if (o->get_group().empty() || o == app.get_help_ptr()) continue;  // hidden; help comes last
        if (!o->nonpositional()) {
            arguments.rows.emplace_back(o->get_name(true), option_text(*o));
            continue;
        }
        Section* into = &options;
        if (o->get_group() != kOptionsGroup) {
            const auto found = std::find_if(groups.begin(), groups.end(),
                                            [o](const Section& s) { return s.title == o->get_group(); });
            into = found != groups.end() ? &*found : &groups.emplace_back(Section{o->get_group(), {}});
        }
        into->rows.emplace_back(option_label(*o), option_text(*o));
    }
    if (const CLI::Option* help = app.get_help_ptr())
        options.rows.emplace_back(option_label(*help), help->get_description());
    for (Section* s : {&commands, &arguments, &options}) {
        if (!s->rows.empty()) sections.push_back(std::move(*s));
    }
    for (Section& s : groups) sections.push_back(std::move(s));
    return sections;
}

}  // namespace

std::string usage_line(const CLI::App& app) {
    std::string out = "usage: " + path_of(app);
    if (!listed_commands(app).empty()) out += " <command>";
    bool optional_options = false;
    for (const CLI::Option* o : app.get_options()) {
        if (o->get_positional() || o->get_group().empty()) continue;
        if (o->get_required())
            out += " " + option_label(*o);
        else
            optional_options = true;
    }
    for (const CLI::Option* o : app.get_options([](const CLI::Option* o) { return o->get_positional(); }))
        out += o->get_required() ? " " + o->get_name(true) : " [" + o->get_name(true) + "]";
    return optional_options ? out + " [options]" : out;
}

std::string HelpFormatter::make_help(const CLI::App* app, std::string /*name*/, CLI::AppFormatMode) const {
    std::string out = usage_line(*app) + "\n";
    if (!app->get_description().empty()) out += "\n" + app->get_description() + "\n";
    const std::vector<Section> sections = sections_of(*app);
    std::size_t label_width = 0;
    for (const Section& s : sections) {
        for (const Row& row : s.rows) {
            if (row.first.size() <= kMaxLabelWidth) label_width = std::max(label_width, row.first.size());
        }
    }
    for (const Section& s : sections) out += "\n" + s.title + ":\n" + table(s.rows, label_width);
    if (!app->get_footer().empty()) out += "\n" + app->get_footer() + "\n";
    return out;
}

}  // namespace sp::ctl
