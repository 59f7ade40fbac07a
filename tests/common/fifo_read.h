#pragma once
// Reading a FIFO that no process writes: a reader that opens it the blocking way waits for ever. The
// read runs on a thread, under a limit only a hang reaches; on a hang the FIFO is opened for writing
// once, which releases the reader's open(), so the test fails instead of hanging with it.
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <exception>
#include <future>
#include <string>

namespace sp::test {

struct FifoRead {
    bool blocked = false;  // the reader waited for a writer
    std::string refusal;   // what the reader threw ("" when it threw nothing)
};

template <typename Read>
FifoRead read_fifo_without_writer(const std::string& fifo, Read read) {
    auto done = std::async(std::launch::async, [read]() -> std::string {
        try {
            read();
        } catch (const std::exception& e) {
            return e.what();
        }
        return {};
    });
    FifoRead r;
    if (done.wait_for(std::chrono::seconds(30)) != std::future_status::ready) {
        r.blocked = true;
        const int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
        if (fd >= 0) ::close(fd);
    }
    r.refusal = done.get();
    return r;
}

}  // namespace sp::test
