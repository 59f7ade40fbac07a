// JsonlReader::parse_on_two_threads (sp/jsonl.h). Parsing is nearly all of a reader's time, and
// lines parse independently: the calling thread splits two batches of lines (next_line, as on one
// thread), a worker parses the second while the caller parses the first, then next() hands them
// out in order. Everything the splitting counts or reports (lines, bytes, a line over the limit, a
// read error) is kept in the batch and applied when next() gets to it, so the counts and problems
// are those of the one-thread reader at every record.
#include "jsonl_reader_parallel.h"

#include <algorithm>

namespace sp {

void JsonlReader::parse_on_two_threads(std::size_t batch_bytes) {
    if (parallel_) return;
    parallel_ = std::make_unique<Parallel>(std::max<std::size_t>(batch_bytes, 1));
    parallel_->split_lines = lines_;
    parallel_->split_bytes = bytes_;
}

// Splits lines into `batch` until it has taken batch_bytes of input or kMaxBatchEntries entries
// (blank lines and skipped long ones hold no text but an entry each), or the input ends. Runs with
// lines_ and bytes_ swapped for the splitting's own counts (see next_parallel).
bool JsonlReader::fill_batch(Batch& batch) {
    constexpr std::size_t kMaxBatchEntries = std::size_t(1) << 16;
    batch.text.clear();
    batch.used = batch.taken = 0;
    parallel_->filling = &batch;
    const std::uint64_t start = bytes_;
    std::string_view line;
    bool had_newline = false;
    while (bytes_ - start < parallel_->batch_bytes && batch.used < kMaxBatchEntries &&
           next_line(line, had_newline)) {
        ++lines_;
        bytes_ += line.size() + (had_newline ? 1 : 0);
        const bool blank = detail::is_blank_line(line);
        Batch::Entry& e = batch.add(blank ? Batch::Kind::blank : Batch::Kind::line, lines_, bytes_);
        e.had_newline = had_newline;
        if (blank) continue;
        e.offset = batch.text.size();
        e.size = line.size();
        batch.text.insert(batch.text.end(), line.begin(), line.end());
        batch.text.push_back('\n');
    }
    parallel_->filling = nullptr;
    batch.text.insert(batch.text.end(), detail::kLinePadding, '\0');
    return batch.used > 0;
}

bool JsonlReader::next_parallel(TelemetryRecord& out) {
    Parallel& p = *parallel_;
    for (;;) {
        Batch& batch = p.batches[p.current];
        while (batch.taken < batch.used) {
            const std::size_t i = batch.taken++;
            const Batch::Entry& e = batch.entries[i];
            lines_ = e.lines;
            bytes_ = e.bytes;
            if (e.kind == Batch::Kind::problem) add_problem(e.error);
            if (e.kind != Batch::Kind::line) continue;
            if (count_parsed(e.status, e.had_newline, e.error)) {
                std::swap(out, batch.records[i]);  // the batch keeps the caller's old record to reuse
                return true;
            }
        }
        if (p.current == 0) {
            p.current = 1;
            continue;
        }
        std::swap(lines_, p.split_lines);
        std::swap(bytes_, p.split_bytes);
        const bool any = fill_batch(p.batches[0]);
        if (any) fill_batch(p.batches[1]);
        std::swap(lines_, p.split_lines);
        std::swap(bytes_, p.split_bytes);
        if (!any) return false;
        p.parse_both();
        p.current = 0;
    }
}

// A problem the splitting met (a line over the limit, a read error), for next() to report in turn.
bool JsonlReader::defer_problem(std::string& reason) {
    if (!parallel_ || parallel_->filling == nullptr) return false;
    Batch::Entry& e = parallel_->filling->add(Batch::Kind::problem, lines_, bytes_);
    e.error = std::move(reason);
    return true;
}

}  // namespace sp
