// JsonlReader::parse_on_two_threads (sp/jsonl.h). Parsing is nearly all of a reader's time, and
// lines parse independently: the calling thread splits batches of lines (next_line, as on one
// thread), a worker parses some while the caller parses the others (see Parallel), and next() hands
// them out in order. Everything the splitting counts or reports (lines, bytes, a line over the
// limit, a read error) is kept in the batch and applied when next() gets to it, so the counts and
// problems are those of the one-thread reader at every record.
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
// lines_ and bytes_ swapped for the splitting's own counts (see split_next).
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
        if (p.oldest_parsed()) {
            Batch& batch = p.at(0);
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
            p.pop_oldest();
            continue;
        }
        if (!advance_parallel()) return false;
    }
}

// One step towards the oldest batch being parsed; false once the input is done and every batch
// handed out. Batches are split ahead first, so the worker has one to take while this thread
// parses the oldest unclaimed batch, or, when the worker has claimed them all, waits for the oldest.
bool JsonlReader::advance_parallel() {
    Parallel& p = *parallel_;
    while (split_next()) {
    }
    if (p.count == 0) return false;
    if (Batch* mine = p.claim()) {
        mine->parse();
        p.mark_parsed(*mine);
        return true;
    }
    p.wait_oldest_parsed();
    return true;
}

// Splits the next lines into the free batch after the others and hands it to the ring; false when
// none is free or the input is done. The splitting keeps its own line and byte counts (next()
// reports them entry by entry).
bool JsonlReader::split_next() {
    Parallel& p = *parallel_;
    if (p.input_done || p.count == Parallel::kBatches) return false;
    std::swap(lines_, p.split_lines);
    std::swap(bytes_, p.split_bytes);
    const bool any = fill_batch(p.at(p.count));
    std::swap(lines_, p.split_lines);
    std::swap(bytes_, p.split_bytes);
    if (!any) {
        p.input_done = true;
        return false;
    }
    p.publish_split();
    return true;
}

// A problem the splitting met (a line over the limit, a read error), for next() to report in turn.
bool JsonlReader::defer_problem(std::string& reason) {
    if (!parallel_ || parallel_->filling == nullptr) return false;
    Batch::Entry& e = parallel_->filling->add(Batch::Kind::problem, lines_, bytes_);
    e.error = std::move(reason);
    return true;
}

}  // namespace sp
