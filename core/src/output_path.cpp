#include "sp/output_path.h"

#include <filesystem>
#include <system_error>

namespace sp {
namespace {

std::string quoted(const std::string& s) {
    return "'" + s + "'";
}

}  // namespace

std::string output_path_problem(const std::string& path, const std::string& what) {
    namespace fs = std::filesystem;
    const fs::path file(path);
    std::error_code ec;
    const fs::file_status status = fs::symlink_status(file, ec);
    if (fs::is_symlink(status))
        return quoted(path) + " is a symbolic link; " + what +
               " is never written through one (give the file itself, or a new name)";
    if (fs::is_directory(status)) return quoted(path) + " is a directory";
    if (fs::is_fifo(status) || fs::is_socket(status) || fs::is_block_file(status))
        return quoted(path) + " is not a regular file (" +
               (fs::is_fifo(status)     ? "a FIFO"
                : fs::is_socket(status) ? "a socket"
                                        : "a block device") +
               ")";
    const fs::path folder = file.has_parent_path() ? file.parent_path() : fs::path(".");
    if (!fs::is_directory(folder, ec)) return "the folder " + quoted(folder.string()) + " does not exist";
    return {};
}

}  // namespace sp
