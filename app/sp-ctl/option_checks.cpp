#include "option_checks.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <system_error>
#include <utility>

namespace sp::ctl {
namespace {

std::string in_quotes(const std::string& text) {
    return "'" + text + "'";
}

// The whole of `text` as a number of type T by std::from_chars (base 10, no sign '+', no spaces).
template <typename T>
std::optional<T> whole_text_as(const std::string& text) {
    T value{};
    const char* end = text.data() + text.size();
    const auto [ptr, ec] = std::from_chars(text.data(), end, value);
    if (text.empty() || ec != std::errc() || ptr != end) return std::nullopt;
    return value;
}

}  // namespace

std::optional<std::uint64_t> parse_count(const std::string& text) {
    return whole_text_as<std::uint64_t>(text);
}

std::vector<std::string> split_list(const std::string& text) {
    std::vector<std::string> entries;
    std::size_t start = 0;
    for (;;) {
        const std::size_t comma = text.find(',', start);
        entries.push_back(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
        if (comma == std::string::npos) return entries;
        start = comma + 1;
    }
}

CLI::Validator whole_number(std::uint64_t least, std::uint64_t most) {
    const std::string range = most == std::numeric_limits<std::uint64_t>::max()
                                  ? ">= " + std::to_string(least)
                                  : "from " + std::to_string(least) + " to " + std::to_string(most);
    return CLI::Validator(
        [least, most, range](std::string& text) -> std::string {
            const std::optional<std::uint64_t> value = parse_count(text);
            if (!value || *value < least || *value > most)
                return "must be a whole number " + range + ", got " + in_quotes(text);
            text = std::to_string(*value);  // what CLI11 converts: plain decimal
            return {};
        },
        "");
}

CLI::Validator integer(const char* what) {
    return CLI::Validator(
        [what = std::string(what)](std::string& text) -> std::string {
            const std::optional<long long> value = whole_text_as<long long>(text);
            if (!value) return in_quotes(text) + " is not " + what;
            text = std::to_string(*value);  // what CLI11 converts: plain decimal
            return {};
        },
        "");
}

CLI::Validator number(const char* what) {
    return CLI::Validator(
        [what = std::string(what)](std::string& text) -> std::string {
            return whole_text_as<double>(text) ? std::string() : in_quotes(text) + " is not " + what;
        },
        "");
}

CLI::Validator positive_number() {
    return CLI::Validator(
        [](std::string& text) -> std::string {
            const std::optional<double> value = whole_text_as<double>(text);
            if (value && std::isfinite(*value) && *value > 0.0) return {};
            return "must be a finite number > 0, got " + in_quotes(text);
        },
        "");
}

CLI::Validator seconds_up_to_a_day() {
    return CLI::Validator(
        [](std::string& text) -> std::string {
            // strtod, as sp-ctl always read seconds (leading blanks, hex and exponents included).
            char* end = nullptr;
            const double t = std::strtod(text.c_str(), &end);
            if (text.empty() || *end != '\0' || !std::isfinite(t) || t <= 0.0 || t > 86400.0)
                return "must be a number of seconds in (0, 86400], got " + in_quotes(text);
            return {};
        },
        "");
}

CLI::Validator not_empty() {
    return CLI::Validator(
        [](std::string& text) -> std::string { return text.empty() ? "must not be empty" : std::string(); },
        "");
}

CLI::Validator one_of(std::vector<std::string> choices) {
    std::string listed;
    for (std::size_t i = 0; i < choices.size(); ++i) {
        const char* separator = i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ";
        listed += separator + in_quotes(choices[i]);
    }
    return CLI::Validator(
        [choices = std::move(choices), listed](std::string& text) -> std::string {
            for (const std::string& choice : choices) {
                if (text == choice) return {};
            }
            return "must be " + listed + ", got " + in_quotes(text);
        },
        "");
}

CLI::Validator checked_by(std::function<std::string(const std::string&)> problem) {
    return CLI::Validator([problem = std::move(problem)](std::string& text) { return problem(text); }, "");
}

}  // namespace sp::ctl
