// Machine files: the shipped ones load (and carry a source comment on every value line), bad
// files are one-line InputErrors naming the file, line and what is valid, and what
// --calibrate writes reads back.

#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <sstream>

#include "dmuon/base/error.hpp"
#include "dmuon/project/machine_model.hpp"

namespace {

using namespace dmuon;
using project::parse_machine;

const std::string kGood =
    "name: good\n"
    "device: gpu\n"
    "ranks_per_node: 8\n"
    "nvlink_domain: 8\n"
    "compute:\n"
    "  peak_tflops: {fp32: 60, bf16: 900, fp16: 900}\n"
    "  gemm_efficiency: 0.8\n"
    "  sm_count: 100\n"
    "  gemm_tile: [64, 256]\n"
    "  memory_bandwidth_GBps: 3000\n"
    "network:\n"
    "  intra: {busbw_GBps: 300}\n"
    "  inter: {busbw_GBps: 40}\n";

// The InputError message of parsing `text`, "" if it parsed.
std::string error_of(const std::string& text) {
  try {
    (void)parse_machine(text, "m.yaml");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

std::string replace(std::string s, const std::string& from, const std::string& to) {
  const auto at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return s.replace(at, from.size(), to);
}

TEST(MachineModel, ParsesEveryField) {
  const auto m = parse_machine(kGood, "m.yaml");
  EXPECT_EQ(m.name, "good");
  EXPECT_EQ(m.device, project::DeviceKind::gpu);
  EXPECT_EQ(m.ranks_per_node, 8);
  EXPECT_EQ(m.nvlink_domain, 8);
  EXPECT_DOUBLE_EQ(m.compute.peak_flops(kernels::Dtype::f32), 60e12);
  EXPECT_DOUBLE_EQ(m.compute.peak_flops(kernels::Dtype::bf16), 900e12);
  EXPECT_DOUBLE_EQ(m.compute.gemm_efficiency, 0.8);
  EXPECT_EQ(m.compute.sm_count, 100);
  EXPECT_EQ(m.compute.tile_m, 64);
  EXPECT_EQ(m.compute.tile_n, 256);
  EXPECT_DOUBLE_EQ(m.compute.memory_efficiency, 1.0);  // default
  EXPECT_DOUBLE_EQ(m.intra.busbw_gbps, 300);
  EXPECT_DOUBLE_EQ(m.inter.busbw_gbps, 40);
  EXPECT_EQ(m.domain_of(7), 0);
  EXPECT_EQ(m.domain_of(8), 1);
  EXPECT_EQ(m.text, kGood);
}

TEST(MachineModel, BadFilesAreOneLineErrorsNamingLineAndValid) {
  struct Case {
    std::string text, expect;
  };
  const Case cases[] = {
      {replace(kGood, "device: gpu", "device: tpu"),
       "m.yaml:2: device 'tpu' is invalid \\(valid: gpu, cpu\\)"},
      {replace(kGood, "ranks_per_node: 8\n", ""), "m.yaml:1: the machine has no 'ranks_per_node'"},
      {replace(kGood, "gemm_efficiency: 0.8", "gemm_efficiency: 1.5"),
       "gemm_efficiency is 1.5 \\(valid: 0.001..1\\)"},
      {replace(kGood, "memory_bandwidth_GBps: 3000", "memory_bandwidth_GBps: -1"),
       "m.yaml:10: compute.memory_bandwidth_GBps is -1 \\(valid: 1e-3..1e12 GB/s\\)"},
      {replace(kGood, "memory_bandwidth_GBps: 3000", "memory_bandwidth_GBps: fast"),
       "compute.memory_bandwidth_GBps is fast \\(valid: 1e-3..1e12 GB/s\\)"},
      // Physical ranges (issue 24: 1e308 us of overhead hung the replay), long values cut.
      {replace(kGood, "  sm_count: 100\n", "  sm_count: 100\n  kernel_overhead_us: 1e308\n"),
       "m.yaml:9: compute.kernel_overhead_us is 1e308 \\(valid: 0..1e6 us\\)"},
      {replace(kGood, "  sm_count: 100\n",
               "  sm_count: 100\n  kernel_overhead_us: " + std::string(5000, '9') + "\n"),
       "kernel_overhead_us is 9{80}\\.\\.\\. \\(5000 characters\\) \\(valid: 0..1e6 us\\)"},
      {replace(kGood, "fp32: 60", "fp32: 1e9"),
       "compute.peak_tflops.fp32 is 1e9 \\(valid: 1e-6..1e6 TFLOP/s\\)"},
      {replace(kGood, "busbw_GBps: 40", "busbw_GBps: 1e-300"),
       "network.inter.busbw_GBps is 1e-300 \\(valid: 1e-3..1e12 GB/s\\)"},
      {replace(kGood, "gemm_efficiency: 0.8", "gemm_efficiency: 1e-300"),
       "gemm_efficiency is 1e-300 \\(valid: 0.001..1\\)"},
      {replace(kGood, "ranks_per_node: 8", "ranks_per_node: 99999999999"),
       "the machine.ranks_per_node is 99999999999 \\(valid: an integer 1..1048576\\)"},
      {replace(kGood, "  sm_count: 100\n", "  sm_count: 100\n  synthetic_elements_per_s: 1e-9\n"),
       "synthetic_elements_per_s is 1e-9 \\(valid: 0 or 1..1e15 elements/s\\)"},
      {replace(kGood, "  sm_count: 100\n", "  sm_count: 100\n  clock_ghz: 2\n"),
       "m.yaml:9: unknown key 'clock_ghz' in compute \\(valid keys: peak_tflops, gemm_efficiency, "
       "gemm_half_dim, sm_count,"},
      {replace(kGood, "bf16: 900, ", ""), "compute.peak_tflops has no 'bf16'"},
      {replace(kGood, "[64, 256]", "[64]"), "compute.gemm_tile must be \\[rows, cols\\]"},
      {replace(kGood, "name: good", "name: Good Machine"), "name 'Good Machine' is invalid"},
      {replace(kGood, "  intra: {busbw_GBps: 300}\n", ""), "network has no 'intra'"},
      {"name: [unclosed\n", "m.yaml:2:1: YAML syntax error"},
      {"- a\n- b\n", "m.yaml: not a mapping"},
  };
  for (const auto& c : cases) {
    const std::string e = error_of(c.text);
    EXPECT_TRUE(std::regex_search(e, std::regex(c.expect)))
        << "got: " << e << "\nwant: " << c.expect;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  }
}

TEST(MachineModel, CpuMachinesNeedOnlyFp32) {
  const auto m = parse_machine(replace(replace(kGood, "device: gpu", "device: cpu"),
                                       "{fp32: 60, bf16: 900, fp16: 900}", "{fp32: 0.1}"),
                               "m.yaml");
  EXPECT_DOUBLE_EQ(m.compute.peak_flops(kernels::Dtype::bf16), 0.1e12);
}

TEST(MachineModel, UnknownNamesListTheShippedMachines) {
  try {
    (void)project::load_machine("h1000", DMUON_MACHINES_DIR);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_TRUE(std::regex_search(
        e.what(),
        std::regex("unknown machine 'h1000' \\(valid: .*a800.*gb200-nvl72.*h100-ndr.*h200")))
        << e.what();
  }
  EXPECT_THROW((void)project::load_machine("/nonexistent/m.yaml", DMUON_MACHINES_DIR), InputError);
}

TEST(MachineModel, ShippedMachinesLoadAndCiteASourceForEveryValue) {
  for (const char* name : {"a800", "h100-ndr", "h200", "gb200-nvl72"}) {
    const auto m = project::load_machine(name, DMUON_MACHINES_DIR);
    EXPECT_EQ(m.name, name);
    EXPECT_EQ(m.device, project::DeviceKind::gpu);
    EXPECT_GT(m.inter.busbw_gbps, 0) << name;
    // Every line holding a number carries a comment (its source or the stated assumption).
    std::istringstream in(m.text);
    int line_no = 0;
    for (std::string line; std::getline(in, line);) {
      ++line_no;
      if (line.empty() || line[0] == '#') continue;
      const bool has_value =
          std::regex_search(line, std::regex("^\\s*[A-Za-z_0-9]+:\\s*[0-9\\[{]"));
      if (has_value) {
        EXPECT_NE(line.find('#'), std::string::npos) << name << ":" << line_no << ": " << line;
      }
    }
  }
}

// collective_sms (compute_contention.hpp): the SMs a collective kernel holds, per link level;
// the three streams' kernels at once must leave an SM, and only a GPU with SMs has them.
TEST(MachineModel, CollectiveSmsAreCheckedAndReadBack) {
  const auto m = parse_machine(
      replace(replace(kGood, "{busbw_GBps: 300}", "{busbw_GBps: 300, collective_sms: 24}"),
              "{busbw_GBps: 40}", "{busbw_GBps: 40, collective_sms: 33}"),
      "m.yaml");
  EXPECT_EQ(m.intra.collective_sms, 24);
  EXPECT_EQ(m.inter.collective_sms, 33);  // 3 · 33 = 99 of 100 SMs
  const auto back = parse_machine(project::to_yaml(m), "w.yaml");
  EXPECT_EQ(back.intra.collective_sms, 24);
  EXPECT_EQ(back.inter.collective_sms, 33);
  EXPECT_EQ(parse_machine(kGood, "m.yaml").intra.collective_sms, 0);  // absent: not modelled
  const auto too_many = replace(kGood, "{busbw_GBps: 40}", "{busbw_GBps: 40, collective_sms: 34}");
  EXPECT_NE(error_of(too_many).find("network.inter.collective_sms is 34 (valid: an integer 0..33)"),
            std::string::npos)
      << error_of(too_many);
  const auto cpu = replace(replace(kGood, "device: gpu", "device: cpu"), "{busbw_GBps: 300}",
                           "{busbw_GBps: 300, collective_sms: 4}");
  EXPECT_NE(error_of(cpu).find("network.intra.collective_sms needs a GPU machine"),
            std::string::npos)
      << error_of(cpu);
  const auto no_sms = replace(replace(kGood, "  sm_count: 100\n", ""), "{busbw_GBps: 300}",
                              "{busbw_GBps: 300, collective_sms: 4}");
  EXPECT_NE(error_of(no_sms).find("with compute.sm_count"), std::string::npos) << error_of(no_sms);
}

TEST(MachineModel, WrittenFilesReadBack) {
  auto m = parse_machine(kGood, "m.yaml");
  m.measured.ranks = 4;
  m.measured.kinds[static_cast<std::size_t>(comm::CollectiveKind::reduce)] =
      project::MeasuredCollective{12.5, 3.25};
  const auto back = parse_machine(project::to_yaml(m, "two\nlines"), "w.yaml");
  EXPECT_EQ(back.name, m.name);
  EXPECT_DOUBLE_EQ(back.compute.peak_flops(kernels::Dtype::f16), 900e12);
  EXPECT_EQ(back.compute.tile_n, 256);
  EXPECT_EQ(back.measured.ranks, 4);
  const auto& r = back.measured.kinds[static_cast<std::size_t>(comm::CollectiveKind::reduce)];
  ASSERT_TRUE(r.has_value());
  EXPECT_DOUBLE_EQ(r->latency_us, 12.5);
  EXPECT_DOUBLE_EQ(r->busbw_gbps, 3.25);
  EXPECT_FALSE(back.measured.kinds[0].has_value());
  EXPECT_EQ(back.compute.fp8_peak_tflops, 0);  // none given: none written
  // An fp8 peak and its GEMM efficiency (--compute-dtype fp8) are written and read back.
  m.compute.fp8_peak_tflops = 1979;
  m.compute.fp8_gemm_efficiency = 0.67;
  const auto fp8 = parse_machine(project::to_yaml(m), "w.yaml");
  EXPECT_DOUBLE_EQ(fp8.compute.fp8_peak_tflops, 1979);
  EXPECT_DOUBLE_EQ(fp8.compute.fp8_gemm_efficiency, 0.67);
}

}  // namespace
