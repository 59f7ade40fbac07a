#include "sp/rank_file.h"

namespace sp {

std::string rank_file_name(const std::string& file, int rank) {
    const std::string tag = ".rank" + std::to_string(rank);
    const std::string ext = ".jsonl";
    if (file.size() > ext.size() && file.compare(file.size() - ext.size(), ext.size(), ext) == 0)
        return file.substr(0, file.size() - ext.size()) + tag + ext;
    return file + tag;
}

}  // namespace sp
