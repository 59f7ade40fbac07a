#pragma once
// CURVE key files (agent/PROTOCOL.md §9): the one reader and writer that sp-trainer, sp-ctl and the
// dashboard share, so that each refuses the same mistakes in the same words. Every function throws
// std::runtime_error whose message names the file and says what to do.
//
// `sp-ctl keygen NAME` writes, each line labelled so that one kind can never pass for the other:
//   NAME.key (mode 0600)  "# ...comment\npublic-key = <Z85>\nsecret-key = <Z85>\n"
//   NAME.pub              "# ...comment\npublic-key = <Z85>\n"
// A public key may also be a bare 40-character Z85 line (hand-written allow-lists, older files);
// a bare key is never taken as a secret one, since nothing tells it from a public key.
#include <string>
#include <vector>

namespace sp::keys {

struct SecretKey {
    std::string secret_z85;
    std::string public_z85;  // derived from the secret, never trusted from the file
};

// Refuses, like ssh: a file with any permission for group or others, a public or unlabelled key, a
// public-key line that does not belong to the secret-key line, or more than one key.
SecretKey read_secret_key(const std::string& path);

// One public key (labelled or bare); refuses a file that holds a secret key. Any mode.
std::string read_public_key(const std::string& path);

// The agent's allow-list: public keys one per line, labelled or bare; blank lines and lines that
// start with '#' and are not a key are comments ('#' is also a Z85 digit). So `cat NAME.pub >>
// allowed` adds a client. Refuses a secret key. Any mode. The keys are Z85, 40 characters each.
std::vector<std::string> read_allow_list(const std::string& path);

// The secret key file a client option names: "NAME" as "NAME.key"; "NAME.key" as given, and
// "NAME.pub" too, so that read_secret_key refuses it as the public key it is.
std::string secret_key_path(const std::string& option);

enum class Replace { no, yes };

// Writes a fresh pair as NAME.key and NAME.pub. Each is a new file created exclusively beside its
// target (never through a symlink) and then moved into place, so a symlink at a target is replaced
// itself and whatever it points to is left untouched. Replace::no refuses an existing target (a
// dangling symlink too) and leaves nothing behind. Returns the public key (Z85).
std::string write_key_pair(const std::string& name, Replace replace);

}  // namespace sp::keys
