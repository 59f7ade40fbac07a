// Writing a CURVE key pair (curve_key_file.h). A target is never opened: each file is created anew
// beside it (O_EXCL | O_NOFOLLOW, so nothing planted there is ever written through) and then moved
// into place, which replaces a symlink itself instead of the file it points to.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include <cerrno>
#include <cstring>
#include <random>
#include <stdexcept>

#include "sp/keys/curve_key_file.h"

namespace sp::keys {
namespace {

[[noreturn]] void fail_errno(const std::string& path, int err) {
    throw std::runtime_error("cannot write '" + path + "': " + std::strerror(err));
}

bool write_all(int fd, const std::string& text) {
    std::size_t done = 0;
    while (done < text.size()) {
        const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        done += std::size_t(n);
    }
    return true;
}

// A new file next to `target` holding `text` with exactly `mode` (fchmod: the umask must neither
// widen nor narrow it). Returns its path.
std::string write_new_file(const std::string& target, const std::string& text, mode_t mode) {
    std::random_device random;
    for (int attempt = 0; attempt < 16; ++attempt) {
        std::string path = target + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(random());
        const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
        if (fd < 0 && errno == EEXIST) continue;
        if (fd < 0) fail_errno(target, errno);
        bool ok = ::fchmod(fd, mode) == 0 && write_all(fd, text) && ::fsync(fd) == 0;
        const int err = errno;
        ok = ::close(fd) == 0 && ok;
        if (ok) return path;
        ::unlink(path.c_str());
        fail_errno(target, err);
    }
    fail_errno(target, EEXIST);
}

// rename() replaces whatever is at the target, a symlink included (never its destination); link()
// refuses an existing one atomically, so Replace::no cannot lose a race to another writer.
void move_into_place(const std::string& tmp, const std::string& target, Replace replace) {
    const int rc =
        replace == Replace::yes ? ::rename(tmp.c_str(), target.c_str()) : ::link(tmp.c_str(), target.c_str());
    const int err = errno;
    if (replace == Replace::no || rc != 0) ::unlink(tmp.c_str());
    if (rc != 0) fail_errno(target, err);
}

void refuse_existing(const std::string& path) {
    struct stat st {};
    if (::lstat(path.c_str(), &st) == 0)
        throw std::runtime_error("'" + path + "' exists; not overwriting it (use --force)");
}

}  // namespace

std::string write_key_pair(const std::string& name, Replace replace) {
    const std::string key_path = name + ".key", pub_path = name + ".pub";
    // Both checked before either is written, so a refusal leaves nothing half done.
    if (replace == Replace::no) {
        refuse_existing(key_path);
        refuse_existing(pub_path);
    }
    char pub[41] = {}, secret[41] = {};
    if (zmq_curve_keypair(pub, secret) != 0)
        throw std::runtime_error(std::string("cannot make a CURVE key pair: ") + zmq_strerror(zmq_errno()) +
                                 " (libzmq built without CURVE?)");
    const std::string pub_line = std::string("public-key = ") + pub + "\n";
    const std::string key_tmp =
        write_new_file(key_path,
                       "# CURVE secret key (sp-ctl keygen): keep it private, mode 0600\n" + pub_line +
                           "secret-key = " + secret + "\n",
                       0600);
    std::string pub_tmp;
    try {
        pub_tmp = write_new_file(pub_path, "# CURVE public key (sp-ctl keygen)\n" + pub_line, 0644);
        move_into_place(key_tmp, key_path, replace);
    } catch (...) {
        ::unlink(key_tmp.c_str());
        if (!pub_tmp.empty()) ::unlink(pub_tmp.c_str());
        throw;
    }
    try {
        move_into_place(pub_tmp, pub_path, replace);
    } catch (...) {
        // A secret without its public half is of no use; only a file we created may be removed.
        if (replace == Replace::no) ::unlink(key_path.c_str());
        throw;
    }
    return pub;
}

}  // namespace sp::keys
