// The LibTorch CUDA paths (make_cuda_grad_stats_collector, the runtime's staged upload) on a GPU;
// the checks themselves are in cuda_collector_checks.cpp, shared with bench_cuda_grad_stats --check.
// Built only where LibTorch has CUDA; skips without a device.
// <torch/torch.h> before Qt: Qt's `slots` macro would otherwise break LibTorch's headers.
#include <torch/torch.h>

#include <QtTest>

#include "cuda_collector_checks.h"

class TestCudaGradStatsCollector : public QObject {
    Q_OBJECT

    static void run(const std::vector<sp::gpu_checks::Check>& checks) {
        for (const auto& [name, check] : checks) {
            const std::string e = check();
            if (e.rfind("SKIP:", 0) == 0) {
                qInfo("%s: %s", name.c_str(), e.c_str());
                continue;
            }
            QVERIFY2(e.empty(), qPrintable(QString::fromStdString(name + ": " + e)));
        }
    }

  private slots:
    void initTestCase() {
        if (!sp::gpu_checks::have_cuda_device()) QSKIP("no CUDA device");
    }
    void collector() { run(sp::gpu_checks::collector_checks()); }
    void runtime() { run(sp::gpu_checks::runtime_checks()); }
};

QTEST_GUILESS_MAIN(TestCudaGradStatsCollector)
#include "test_cuda_grad_stats_collector.moc"
