// Reading CURVE key files and allow-lists (curve_key_file.h): parse every line first, then refuse by
// kind, then (secret keys only) by permissions, so that a public key given as a secret one is named
// as such rather than reported as "too open".
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "sp/keys/curve_key_file.h"

namespace sp::keys {
namespace {

constexpr off_t kMaxFileBytes = 1 << 20;  // far beyond any allow-list; stops a device or log file

enum class Label { bare, public_key, secret_key };

struct Entry {
    Label label;
    std::string z85;
    int line;
};

struct FileText {
    std::string text;
    mode_t mode;
};

[[noreturn]] void fail(const std::string& message) {
    throw std::runtime_error(message);
}

std::string trim(const std::string& s) {
    std::size_t b = 0, e = s.size();
    while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
    while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
    return s.substr(b, e - b);
}

bool is_z85_key(const std::string& s) {
    unsigned char raw[32];
    return s.size() == 40 && zmq_z85_decode(raw, s.c_str()) != nullptr;
}

// Reads through the descriptor it checks, so the mode judged is the mode of the bytes read. Opened
// without blocking: a FIFO would otherwise hold open() until a writer came, before the check below
// could refuse it (reading a regular file never blocks anyway).
FileText slurp(const std::string& path, const std::string& what) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) fail("cannot read " + what + " '" + path + "': " + std::strerror(errno));
    struct stat st {};
    std::string problem;
    if (::fstat(fd, &st) != 0)
        problem = std::strerror(errno);
    else if (!S_ISREG(st.st_mode))
        problem = "not a regular file";
    else if (st.st_size > kMaxFileBytes)
        problem = "larger than 1 MiB";
    std::string text;
    char buf[4096];
    while (problem.empty()) {
        const ssize_t n = ::read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) problem = std::strerror(errno);
        if (n <= 0) break;
        text.append(buf, std::size_t(n));
    }
    ::close(fd);
    if (!problem.empty()) fail("cannot read " + what + " '" + path + "': " + problem);
    return {text, st.st_mode};
}

// "public-key = KEY" / "secret-key = KEY"; false when the line has neither label.
bool parse_labelled(const std::string& line, Entry& out, const std::string& where) {
    for (const auto& [name, label] :
         {std::pair{"public-key", Label::public_key}, {"secret-key", Label::secret_key}}) {
        if (line.rfind(name, 0) != 0) continue;
        std::string rest = trim(line.substr(std::strlen(name)));
        if (rest.empty() || rest[0] != '=') continue;
        out.z85 = trim(rest.substr(1));
        out.label = label;
        if (!is_z85_key(out.z85))
            fail(where + ": '" + name + " =' is not followed by a 40-character Z85 key");
        return true;
    }
    return false;
}

// A line that is a valid bare key is a key even when it starts with '#' (a Z85 digit).
std::vector<Entry> parse(const std::string& text, const std::string& noun, const std::string& path) {
    std::vector<Entry> entries;
    std::size_t start = 0;
    for (int number = 1; start <= text.size(); ++number) {
        const std::size_t end = std::min(text.find('\n', start), text.size());
        const std::string line = trim(text.substr(start, end - start));
        start = end + 1;
        const std::string where = noun + " '" + path + "' line " + std::to_string(number);
        Entry e{Label::bare, line, number};
        if (line.empty() || is_z85_key(line)) {
            if (!line.empty()) entries.push_back(e);
        } else if (parse_labelled(line, e, where)) {
            entries.push_back(e);
        } else if (line[0] != '#') {
            fail(where + ": not a key ('public-key = KEY', 'secret-key = KEY' or a bare 40-character " +
                 "Z85 key) nor a comment ('#')");
        }
    }
    return entries;
}

std::size_t count(const std::vector<Entry>& entries, Label label) {
    return std::size_t(
        std::count_if(entries.begin(), entries.end(), [&](const Entry& e) { return e.label == label; }));
}

const Entry* find(const std::vector<Entry>& entries, Label label) {
    for (const Entry& e : entries)
        if (e.label == label) return &e;
    return nullptr;
}

std::string derive_public(const std::string& secret_z85) {
    char pub[41] = {};
    if (zmq_curve_public(pub, secret_z85.c_str()) != 0)
        fail(std::string("cannot derive a CURVE public key: ") + zmq_strerror(zmq_errno()) +
             " (libzmq built without CURVE?)");
    return pub;
}

// Like ssh: a secret anyone else may read (or replace) is refused, not merely warned about.
void check_owner_only(const std::string& path, mode_t mode) {
    if ((mode & 077) == 0) return;
    char octal[8];
    std::snprintf(octal, sizeof octal, "%04o", unsigned(mode & 07777));
    fail(std::string("permissions ") + octal + " for '" + path +
         "' are too open; the secret key must be readable by its owner only (chmod 600 " + path + ")");
}

}  // namespace

SecretKey read_secret_key(const std::string& path) {
    const FileText file = slurp(path, "CURVE key file");
    const std::vector<Entry> entries = parse(file.text, "CURVE key file", path);
    const std::string head = "CURVE key file '" + path + "' ";
    const Entry* secret = find(entries, Label::secret_key);
    if (!secret) {
        if (count(entries, Label::public_key) > 0)
            fail(head + "holds a public key, but a secret key is expected here (give the NAME.key file " +
                 "from sp-ctl keygen, not NAME.pub)");
        if (!entries.empty())
            fail(head + "holds an unlabelled key, which cannot be told from a public key, but a secret " +
                 "key is expected here (write a new pair with sp-ctl keygen: its NAME.key says " +
                 "'secret-key = ')");
        fail(head + "holds no key");
    }
    if (entries.size() > 2 || count(entries, Label::public_key) != entries.size() - 1)
        fail(head + "holds more than one key pair (a secret key file has one 'public-key =' and one " +
             "'secret-key =' line)");
    SecretKey key{secret->z85, derive_public(secret->z85)};
    const Entry* claimed = find(entries, Label::public_key);
    if (claimed && claimed->z85 != key.public_z85)
        fail(head + "line " + std::to_string(claimed->line) + ": the public key does not belong to the " +
             "secret key (the file was edited or mixes two pairs)");
    check_owner_only(path, file.mode);
    return key;
}

std::string read_public_key(const std::string& path) {
    const std::vector<Entry> entries = parse(slurp(path, "CURVE key file").text, "CURVE key file", path);
    const std::string head = "CURVE key file '" + path + "' ";
    if (count(entries, Label::secret_key) > 0)
        fail(head + "holds a secret key, but a public key is expected here (give the NAME.pub file from " +
             "sp-ctl keygen; the NAME.key file must stay private)");
    if (entries.empty()) fail(head + "holds no key");
    if (entries.size() > 1)
        fail(head + "holds " + std::to_string(entries.size()) + " keys, but one is expected");
    return entries[0].z85;
}

std::vector<std::string> read_allow_list(const std::string& path) {
    const std::string noun = "CURVE allow-list";
    std::vector<std::string> keys;
    for (const Entry& e : parse(slurp(path, noun).text, noun, path)) {
        if (e.label == Label::secret_key)
            fail(noun + " '" + path + "' line " + std::to_string(e.line) + " holds a secret key, but only " +
                 "public keys belong here (NAME.pub files from sp-ctl keygen; NAME.key must stay private)");
        keys.push_back(e.z85);
    }
    return keys;
}

std::string secret_key_path(const std::string& option) {
    const auto ends_with = [&](const char* suffix) {
        const std::size_t n = std::strlen(suffix);
        return option.size() >= n && option.compare(option.size() - n, n, suffix) == 0;
    };
    // A NAME.pub is kept as given so that the refusal names the mistake, not a missing NAME.pub.key.
    return ends_with(".key") || ends_with(".pub") ? option : option + ".key";
}

}  // namespace sp::keys
