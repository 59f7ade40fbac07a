// selective_precision._core: the C++ agent, core's quantizers and the reference runtime, bound for
// Python (python/README.md). The only file of the package that knows pybind11; every call that may
// take long (a step, the run's end) releases the GIL, and no thread of the agent ever takes it.
#include <torch/csrc/utils/pybind.h>

#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "py_agent.h"
#include "sp/agent/rounding.h"
#include "sp/agent/threads.h"
#include "sp/config.h"
#include "sp/precision.h"
#include "sp/quantize.h"

namespace py = pybind11;
using sp::python::BlockSpec;
using sp::python::PyAgent;
using sp::python::PyAgentOptions;

namespace {

sp::Precision precision_named(const std::string& name) {
    if (const auto p = sp::parse_precision(name)) return *p;
    throw std::invalid_argument("unknown precision '" + name + "' (bf16, int8, int4, fp8_e4m3 or fp8_e5m2)");
}

std::size_t group_size(std::int64_t group) {
    if (group < 1) throw std::invalid_argument("int4_group must be >= 1, got " + std::to_string(group));
    return std::size_t(group);
}

// A bad config is the user's value to fix (ValueError); a file, endpoint or key the system refuses
// is an OSError; both carry the message the command-line tools print.
std::unique_ptr<PyAgent> make_agent(const PyAgentOptions& options) {
    try {
        return std::make_unique<PyAgent>(options);
    } catch (const sp::ConfigError& e) {
        throw py::value_error(e.what());
    } catch (const std::logic_error& e) {
        throw py::value_error(e.what());
    } catch (const std::runtime_error& e) {
        PyErr_SetString(PyExc_OSError, e.what());
        throw py::error_already_set();
    }
}

// torch.distributed's ProcessGroup object, as the C++ type torch binds it to (torch and this module
// share pybind11's type registry: the same pybind11 ABI, gcc, libstdc++).
c10::intrusive_ptr<c10d::ProcessGroup> process_group_of(const py::object& group) {
    if (group.is_none()) return {};
    try {
        return group.cast<c10::intrusive_ptr<c10d::ProcessGroup>>();
    } catch (const py::cast_error&) {
        throw py::type_error("process_group must be a torch.distributed process group, not " +
                             std::string(py::str(group.get_type().attr("__name__"))));
    }
}

std::vector<std::string> precision_names(const std::vector<sp::Precision>& map) {
    std::vector<std::string> out;
    out.reserve(map.size());
    for (sp::Precision p : map) out.emplace_back(sp::to_string(p));
    return out;
}

py::dict overhead_of(const PyAgent& agent) {
    const auto o = agent.overhead();
    py::dict d;
    d["collect_s"] = o.collect_s;
    d["hints_s"] = o.hints_s;
    d["step_bookkeeping_s"] = o.step_bookkeeping_s;
    d["distribution_s"] = o.distribution_s;
    d["total_s"] = o.total_s();
    d["steps"] = o.steps;
    return d;
}

// Calibration through Python callables: `input(block, sample)` -> tensor, `forward(block, x)` ->
// tensor, `compute_format(block, name)`. The GIL is released while the C++ side runs; pybind11 takes
// it again around each callable. Returns {errors, fingerprint, cache_path, from_cache}.
py::dict calibrate_with(PyAgent& agent, std::function<at::Tensor(int, int)> input,
                        std::function<at::Tensor(int, const at::Tensor&)> forward,
                        std::function<void(int, const std::string&)> compute_format,
                        const std::string& model_identity) {
    sp::agent::CalibrationHooks hooks;
    hooks.input = std::move(input);
    hooks.forward = std::move(forward);
    hooks.compute_format = [format = std::move(compute_format)](int block, sp::Precision p) {
        format(block, std::string(sp::to_string(p)));
    };
    sp::agent::CalibrationResult result;
    {
        const py::gil_scoped_release unlocked;
        result = agent.calibrate(hooks, model_identity);
    }
    return py::dict(py::arg("errors") = result.errors, py::arg("fingerprint") = result.fingerprint,
                    py::arg("cache_path") = result.cache_path, py::arg("from_cache") = result.from_cache);
}

void bind_agent(py::module_& m) {
    using Blocks = std::vector<
        std::tuple<std::string, std::vector<std::string>, std::vector<at::Tensor>, std::vector<bool>>>;
    py::class_<PyAgent>(m, "_Agent")
        .def(py::init([](std::optional<std::string> config_json, std::optional<std::string> config_path,
                         std::optional<std::string> telemetry, bool every_step_stats, bool network,
                         std::string telemetry_endpoint, std::string control_endpoint, std::string server_key,
                         std::string allowed_clients, std::string run_id, std::string model_identity,
                         const py::object& process_group) {
                 PyAgentOptions o;
                 o.config_json = std::move(config_json);
                 o.config_path = std::move(config_path);
                 o.telemetry = std::move(telemetry);
                 o.every_step_stats = every_step_stats;
                 o.network = network;
                 o.telemetry_endpoint = std::move(telemetry_endpoint);
                 o.control_endpoint = std::move(control_endpoint);
                 o.server_key = std::move(server_key);
                 o.allowed_clients = std::move(allowed_clients);
                 o.run_id = std::move(run_id);
                 o.model_identity = std::move(model_identity);
                 o.process_group = process_group_of(process_group);
                 return make_agent(o);
             }),
             py::arg("config_json"), py::arg("config_path"), py::arg("telemetry"),
             py::arg("every_step_stats"), py::arg("network"), py::arg("telemetry_endpoint"),
             py::arg("control_endpoint"), py::arg("server_key"), py::arg("allowed_clients"),
             py::arg("run_id"), py::arg("model_identity"), py::arg("process_group") = py::none())
        .def("register_blocks",
             [](PyAgent& a, const Blocks& blocks) {
                 std::vector<BlockSpec> specs;
                 for (const auto& [name, names, params, transposed] : blocks)
                     specs.push_back({name, names, params, transposed});
                 try {
                     a.register_blocks(std::move(specs));
                 } catch (const sp::ConfigError& e) {
                     throw py::value_error(e.what());
                 } catch (const std::invalid_argument& e) {
                     throw py::value_error(e.what());
                 }
             })
        .def("attach_runtime", &PyAgent::attach_runtime, py::arg("as_is") = std::vector<std::vector<bool>>{})
        .def("before_optimizer_step", &PyAgent::before_optimizer_step,
             py::call_guard<py::gil_scoped_release>())
        .def("reload_masters", &PyAgent::reload_masters, py::call_guard<py::gil_scoped_release>())
        .def("checkpoint_value",
             [](const PyAgent& a, int block, int k) -> std::optional<at::Tensor> {
                 at::Tensor t = a.checkpoint_value(block, k);
                 if (!t.defined()) return std::nullopt;
                 return t;
             })
        .def("calibrate", &calibrate_with)
        .def("before_forward", &PyAgent::before_forward, py::call_guard<py::gil_scoped_release>())
        .def("begin_step", &PyAgent::begin_step, py::call_guard<py::gil_scoped_release>())
        .def("end_step", &PyAgent::end_step, py::call_guard<py::gil_scoped_release>())
        .def("wants_layer_inputs", &PyAgent::wants_layer_inputs)
        .def("observe_layer_input", &PyAgent::observe_layer_input, py::call_guard<py::gil_scoped_release>())
        .def("observe_layer_output_grad", &PyAgent::observe_layer_output_grad,
             py::call_guard<py::gil_scoped_release>())
        .def("set_precision_scope", &PyAgent::set_precision_scope)
        .def_property_readonly("precision_scope", &PyAgent::precision_scope)
        .def("record_eval_loss", &PyAgent::record_eval_loss, py::arg("loss"), py::arg("step") = py::none())
        .def("enqueue", &PyAgent::enqueue)
        .def("end_run", &PyAgent::end_run, py::call_guard<py::gil_scoped_release>())
        .def_property_readonly("ended", &PyAgent::ended)
        .def_property_readonly("step_open", &PyAgent::step_open)
        .def_property_readonly("current_step", &PyAgent::current_step)
        .def_property_readonly("has_runtime", &PyAgent::has_runtime)
        .def_property_readonly("run_id", &PyAgent::run_id)
        .def_property_readonly("rank", &PyAgent::rank)
        .def_property_readonly("world_size", &PyAgent::world_size)
        .def_property_readonly("int4_group_size", [](const PyAgent& a) { return a.config().int4_group_size; })
        .def("precisions", [](const PyAgent& a) { return precision_names(a.precisions()); })
        .def("block_names", &PyAgent::block_names)
        .def("block_steps",
             [](const PyAgent& a) {
                 py::dict d;
                 for (sp::Precision p : sp::kAllPrecisions)
                     if (const auto n = a.block_steps()[std::size_t(p)]; n > 0)
                         d[py::str(std::string(sp::to_string(p)))] = n;
                 return d;
             })
        .def_property_readonly("switches", &PyAgent::switches)
        .def_property_readonly("map_version", &PyAgent::map_version)
        .def("config_json", [](const PyAgent& a) { return sp::to_json(a.config()).dump(); })
        .def("take_log", &PyAgent::take_log)
        .def("overhead", &overhead_of)
        .def("total_bytes",
             [](const PyAgent& a) {
                 const auto b = a.total_bytes();
                 return std::make_pair(b.copied, b.bf16);
             })
        .def("telemetry_loss",
             [](const PyAgent& a) {
                 sp::agent::Agent::TelemetryLoss l;
                 {
                     const py::gil_scoped_release unlocked;  // waits for the writer thread
                     l = a.telemetry_loss();
                 }
                 return py::dict(py::arg("offered") = l.offered, py::arg("lost") = l.lost,
                                 py::arg("lost_to_errors") = l.lost_to_errors, py::arg("error") = l.error);
             })
        // The benchmark's baseline (tests/bench/bench_python_agent.py): `steps` monitoring steps driven
        // from C++ alone, as a C++ trainer drives the agent, on the same model's gradients.
        .def(
            "_run_steps_natively",
            [](PyAgent& a, int steps, double loss) {
                for (int i = 0; i < steps; ++i) a.end_step(loss);
            },
            py::call_guard<py::gil_scoped_release>());
}

}  // namespace

PYBIND11_MODULE(_core, m) {
    m.doc() = "Selective Precision's C++ agent and quantizers (use the selective_precision package)";
    m.attr("__version__") = SP_VERSION;
    m.attr("PRECISIONS") = precision_names({sp::kAllPrecisions.begin(), sp::kAllPrecisions.end()});
    m.attr("DEFAULT_INT4_GROUP") = sp::kDefaultInt4GroupSize;
#if SP_AGENT_HAVE_CUDA
    m.attr("HAS_CUDA") = true;  // the CUDA statistics collector and upload paths are built in
#else
    m.attr("HAS_CUDA") = false;
#endif
    bind_agent(m);
    m.def(
        "statistics_device",
        [](const std::vector<std::pair<std::string, std::string>>& params) {
            std::vector<std::pair<std::string, c10::Device>> devices;
            devices.reserve(params.size());
            for (const auto& [what, device] : params) devices.emplace_back(what, c10::Device(device));
            try {
                return sp::python::statistics_device(devices);
            } catch (const std::invalid_argument& e) {
                throw py::value_error(e.what());
            }
        },
        "The collector register_blocks picks for parameters on these devices ([(name, 'cuda:0')]): 'cpu' "
        "or 'cuda'; ValueError when this build cannot read them.");
    m.def("configure_threads", &sp::agent::configure_threads, py::arg("threads") = py::none(),
          "Gives the matrix products `threads` threads as sp-trainer does (OpenBLAS's pool, LibTorch's 1).");
    m.def(
        "round_rows",
        [](const at::Tensor& x, const std::string& precision, std::int64_t int4_group) {
            return sp::agent::rounded_rows(x, precision_named(precision), group_size(int4_group));
        },
        py::arg("x"), py::arg("precision"), py::arg("int4_group") = sp::kDefaultInt4GroupSize,
        py::call_guard<py::gil_scoped_release>(),
        "Rows (last dimension) of x rounded to the format with core's reference quantizers.");
    m.def(
        "reference_roundtrip",
        [](const std::string& precision, const std::vector<float>& values, std::size_t rows, std::size_t cols,
           std::int64_t int4_group) {
            if (rows * cols != values.size())
                throw std::invalid_argument("reference_roundtrip: rows * cols != len(values)");
            std::vector<float> out(values.size());
            if (!values.empty())
                sp::roundtrip(precision_named(precision), values.data(), rows, cols, out.data(),
                              group_size(int4_group));
            return out;
        },
        py::arg("precision"), py::arg("values"), py::arg("rows"), py::arg("cols"),
        py::arg("int4_group") = sp::kDefaultInt4GroupSize,
        "core's quantize-then-dequantize on a plain list: the reference the tests compare against.");
}
