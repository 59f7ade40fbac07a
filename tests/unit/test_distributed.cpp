// What the ranks of a data-parallel job exchange (core/include/sp/distributed.h), without any
// transport: sharded statistics merged as one process would compute them, the map packet and its
// checksum, Policy::adopt, rank endpoints and the config keys.
#include <QtTest>

#include <cmath>
#include <limits>
#include <random>

#include <nlohmann/json.hpp>

#include "../common/reference_moments.h"
#include "sp/config.h"
#include "sp/distributed.h"
#include "sp/policy.h"
#include "sp/protocol.h"

using namespace sp;

namespace {

// One rank's statistics of `values` (the collector's semantics: moments over the finite values,
// every element counted in numel).
BlockGradStats stats_of(int id, const std::vector<double>& values) {
    std::vector<double> finite;
    std::uint64_t nonfinite = 0;
    for (double v : values) {
        if (std::isfinite(v))
            finite.push_back(v);
        else
            ++nonfinite;
    }
    const test::ReferenceMoments m = test::reference_moments(finite, nonfinite);
    BlockGradStats s;
    s.block_id = id;
    s.numel = values.size();
    s.nonfinite_count = nonfinite;
    s.l2_norm = m.l2;
    s.max_abs = m.max_abs;
    s.mean = m.mean;
    s.variance = m.variance;
    return s;
}

std::vector<double> gradient(std::mt19937_64& rng, std::size_t n, double mean, double scale) {
    std::normal_distribution<double> d(mean, scale);
    std::vector<double> v(n);
    for (double& x : v) x = d(rng);
    return v;
}

}  // namespace

class TestDistributed : public QObject {
    Q_OBJECT
  private slots:
    void shards_merge_to_the_statistics_of_the_whole_gradient();
    void blocks_missing_on_a_rank_or_on_all_ranks();
    void merge_rejects_a_pack_of_the_wrong_size();
    void map_packet_round_trips_and_rejects_bad_codes();
    void checksum_tells_maps_apart();
    void difference_names_the_blocks();
    void rank_endpoints_add_two_ports_per_rank();
    void adopt_takes_the_leaders_map_and_amends_the_record();
    void config_keys_are_validated();
};

void TestDistributed::shards_merge_to_the_statistics_of_the_whole_gradient() {
    std::mt19937_64 rng(5);
    for (int ranks : {2, 3, 8}) {
        // Block 0: an offset mean (the cancelling case), block 1: tiny values, block 2: NaN and Inf.
        std::vector<std::vector<double>> blocks = {
            gradient(rng, 10007, 3.0, 1e-3), gradient(rng, 999, 0.0, 1e-8), gradient(rng, 4096, -1.0, 2.0)};
        blocks[2][17] = std::numeric_limits<double>::quiet_NaN();
        blocks[2][4000] = -std::numeric_limits<double>::infinity();
        std::vector<double> gathered;
        for (int r = 0; r < ranks; ++r) {
            std::vector<BlockGradStats> local;
            for (std::size_t b = 0; b < blocks.size(); ++b) {
                const std::size_t n = blocks[b].size();
                const auto first =
                    blocks[b].begin() + std::ptrdiff_t(n * std::size_t(r) / std::size_t(ranks));
                const auto last =
                    blocks[b].begin() + std::ptrdiff_t(n * std::size_t(r + 1) / std::size_t(ranks));
                local.push_back(stats_of(int(b), std::vector<double>(first, last)));
            }
            const std::vector<double> pack = pack_shard_stats(local, 3);
            gathered.insert(gathered.end(), pack.begin(), pack.end());
        }
        const std::vector<BlockGradStats> merged = merge_shard_stats(gathered, ranks, 3);
        QCOMPARE(merged.size(), std::size_t(3));
        for (std::size_t b = 0; b < blocks.size(); ++b) {
            const BlockGradStats whole = stats_of(int(b), blocks[b]);
            const BlockGradStats& got = merged[b];
            const QString what = QString("%1 ranks, block %2").arg(ranks).arg(b);
            QCOMPARE(got.block_id, int(b));
            QCOMPARE(got.numel, whole.numel);
            QCOMPARE(got.nonfinite_count, whole.nonfinite_count);
            QCOMPARE(got.max_abs, whole.max_abs);
            QVERIFY2(test::rel_close(got.l2_norm, whole.l2_norm, 1e-12), qPrintable(what + " l2"));
            QVERIFY2(test::rel_close(got.variance, whole.variance, 1e-9), qPrintable(what + " variance"));
            QVERIFY2(
                std::abs(got.mean - whole.mean) <= 1e-12 * (std::abs(whole.mean) + std::sqrt(whole.variance)),
                qPrintable(what + " mean"));
        }
    }
}

void TestDistributed::blocks_missing_on_a_rank_or_on_all_ranks() {
    // Rank 0 has block 0 only, rank 1 blocks 0 and 2; block 1 has no gradients anywhere.
    std::vector<double> gathered = pack_shard_stats({stats_of(0, {1.0, -1.0})}, 3);
    const std::vector<double> rank1 = pack_shard_stats({stats_of(0, {3.0}), stats_of(2, {2.0, 4.0})}, 3);
    gathered.insert(gathered.end(), rank1.begin(), rank1.end());
    const std::vector<BlockGradStats> merged = merge_shard_stats(gathered, 2, 3);
    QCOMPARE(merged.size(), std::size_t(2));
    QCOMPARE(merged[0].block_id, 0);
    QCOMPARE(merged[0].numel, std::uint64_t(3));
    QCOMPARE(merged[0].mean, 1.0);                                   // (1 - 1 + 3) / 3
    QVERIFY(test::rel_close(merged[0].variance, 8.0 / 3.0, 1e-15));  // (0 + 4 + 4) / 3
    QCOMPARE(merged[1].block_id, 2);
    QCOMPARE(merged[1].mean, 3.0);
    QCOMPARE(merged[1].variance, 1.0);
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, pack_shard_stats({stats_of(3, {1.0})}, 3));
}

void TestDistributed::merge_rejects_a_pack_of_the_wrong_size() {
    const std::vector<double> one_rank = pack_shard_stats({}, 4);
    QCOMPARE(one_rank.size(), 4 * kShardFields);
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, merge_shard_stats(one_rank, 2, 4));
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, merge_shard_stats(one_rank, 0, 4));
    QVERIFY(merge_shard_stats(one_rank, 1, 4).empty());
}

void TestDistributed::map_packet_round_trips_and_rejects_bad_codes() {
    MapPacket p;
    p.step = 1234567890123;
    p.precision = {Precision::bf16, Precision::int8, Precision::fp8_e5m2, Precision::int4};
    p.reason = {Reason::warmup, Reason::policy, Reason::pin, Reason::rollback};
    p.checksum = map_checksum(p.precision);
    std::vector<std::int64_t> words = encode_map_packet(p);
    QCOMPARE(words.size(), map_packet_words(4));
    const MapPacket back = decode_map_packet(words, 4);
    QCOMPARE(back.step, p.step);
    QCOMPARE(back.checksum, p.checksum);
    QVERIFY(back.precision == p.precision);
    QVERIFY(back.reason == p.reason);
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, decode_map_packet(words, 5));
    words[3] = 99;  // block 1: no such precision
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, decode_map_packet(words, 4));
    words[3] = std::int64_t(Precision::int8) | std::int64_t(200) << 8;  // no such reason
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, decode_map_packet(words, 4));
}

void TestDistributed::checksum_tells_maps_apart() {
    const std::vector<Precision> a = {Precision::bf16, Precision::int8, Precision::int8};
    std::vector<Precision> b = a;
    QCOMPARE(map_checksum(a), map_checksum(b));
    std::swap(b[0], b[1]);  // the same formats on other blocks
    QVERIFY(map_checksum(a) != map_checksum(b));
    QVERIFY(map_checksum(a) != map_checksum({Precision::bf16, Precision::int8}));
}

void TestDistributed::difference_names_the_blocks() {
    const std::vector<std::string> names = {"blocks.0", "blocks.1", "blocks.2"};
    const std::string text =
        describe_map_difference({Precision::bf16, Precision::int8, Precision::bf16},
                                {Precision::bf16, Precision::fp8_e4m3, Precision::bf16}, names, 0);
    QCOMPARE(QString::fromStdString(text), QString("blocks.1 int8 here, fp8_e4m3 on rank 0"));
    const std::vector<Precision> all_int8(8, Precision::int8), all_bf16(8, Precision::bf16);
    QVERIFY(describe_map_difference(all_int8, all_bf16, {}, 0).find("; and 4 more") != std::string::npos);
}

void TestDistributed::rank_endpoints_add_two_ports_per_rank() {
    QCOMPARE(QString::fromStdString(protocol::rank_endpoint("tcp://127.0.0.1:5556", 0)),
             "tcp://127.0.0.1:5556");
    QCOMPARE(QString::fromStdString(protocol::rank_endpoint("tcp://127.0.0.1:5557", 3)),
             "tcp://127.0.0.1:5563");
    QCOMPARE(QString::fromStdString(protocol::rank_endpoint("tcp://*:6000", 1)), "tcp://*:6002");
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, protocol::rank_endpoint("ipc:///tmp/sp", 1));
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, protocol::rank_endpoint("tcp://h:65535", 1));
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, protocol::rank_endpoint("tcp://h:55x6", 1));
}

void TestDistributed::adopt_takes_the_leaders_map_and_amends_the_record() {
    Config c;
    c.warmup_steps = 0;
    c.update_interval_steps = 1;
    c.min_steps_between_switches = 10;
    c.error_weight = 0;
    Policy policy(c, uniform_layout(3));
    for (int b = 0; b < 3; ++b) {
        BlockGradStats s;
        s.block_id = b;
        s.l2_norm = 1;
        s.max_abs = 0.5;
        s.variance = 1;
        s.numel = 100;
        policy.observe(0, s);
    }
    const UpdateRecord* rec = policy.update(0, 1.0);
    QVERIFY(rec);
    const std::vector<Precision> own = policy.precisions();
    // Rank 0 decided otherwise for block 1 (and kept the others).
    std::vector<Precision> leader = own;
    leader[1] = leader[1] == Precision::bf16 ? Precision::int8 : Precision::bf16;
    std::vector<Reason> reasons(3, Reason::initial);
    const std::vector<PrecisionChange> changes = policy.adopt(0, leader, reasons);
    QCOMPARE(changes.size(), std::size_t(1));
    QCOMPARE(changes[0].block_id, 1);
    QVERIFY(policy.precisions() == leader);
    QCOMPARE(rec->block_details[1].precision, leader[1]);
    QCOMPARE(rec->block_details[1].reason, Reason::initial);
    int int8 = 0;
    for (Precision p : leader) int8 += p == Precision::int8 ? 1 : 0;
    QCOMPARE(rec->blocks_int8, int8);
    QCOMPARE(rec->blocks_bf16, 3 - int8);
    // Adopting the map it holds changes nothing; another length is refused.
    QVERIFY(policy.adopt(0, leader, reasons).empty());
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, policy.adopt(0, {Precision::bf16}, {Reason::hold}));
}

void TestDistributed::config_keys_are_validated() {
    Config c;
    QCOMPARE(QString::fromStdString(c.distributed_stats_mode), "replicated");
    QCOMPARE(c.process_group_timeout_s, 60.0);
    c.distributed_stats_mode = "zero3";
    c.process_group_timeout_s = 0;
    const std::vector<std::string> problems = validate(c);
    QCOMPARE(problems.size(), std::size_t(2));
    QVERIFY(problems[0].find("distributed_stats_mode") != std::string::npos &&
            problems[0].find("\"zero3\"") != std::string::npos);
    QVERIFY(problems[1].find("process_group_timeout_s") != std::string::npos);
    const Config sharded = config_from_json(
        nlohmann::json{{"distributed_stats_mode", "sharded"}, {"process_group_timeout_s", 5}});
    QCOMPARE(QString::fromStdString(sharded.distributed_stats_mode), "sharded");
    QCOMPARE(sharded.process_group_timeout_s, 5.0);
    StatsMode mode{};
    QVERIFY(parse_stats_mode("sharded", mode) && mode == StatsMode::sharded);
    QVERIFY(!parse_stats_mode("Sharded", mode));
}

QTEST_GUILESS_MAIN(TestDistributed)
#include "test_distributed.moc"
