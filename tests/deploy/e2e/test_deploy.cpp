// fpgallm deploy end to end on the bundled model: the artifacts, determinism, the report
// in headless Chromium, and no half-written folder on failure.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "engine/perplexity.hpp"
#include "testing.hpp"

namespace {

namespace fs = std::filesystem;
using testing_support::read_bytes;
using testing_support::run_fpgallm;

// The first eight stories of the sample: four calibrate, four are held out. Keeps the
// test short; the demo runs on the whole file.
std::string short_text(const std::string& dir) {
  auto stories = engine::split_stories(read_bytes(testing_support::sample_text()));
  std::string text;
  for (std::size_t i = 0; i < 8 && i < stories.size(); ++i) text += stories[i] + "\n";
  const std::string path = dir + "/text.txt";
  testing_support::write_bytes(path, text);
  return path;
}

std::string deploy_args(const std::string& text, const std::string& out) {
  return testing_support::stories260k() + " -z " + testing_support::tok512() + " --device u280 --text " + text +
         " --sample-steps 40 -o " + out;
}

// Every file but the log (it holds times) and the top manifest (it holds the log's checksum).
std::map<std::string, std::string> tree_bytes(const std::string& dir) {
  std::map<std::string, std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    const std::string rel = fs::relative(e.path(), dir).string();
    if (e.is_regular_file() && e.path().filename() != "deploy.log" && rel != "fpgallm-manifest.json")
      files[rel] = read_bytes(e.path().string());
  }
  return files;
}

TEST(Deploy, WritesEveryArtifactDeterministicallyAndTheReportRenders) {
  const std::string dir = testing_support::scratch_dir("deploy");
  const std::string text = short_text(dir);
  auto r1 = run_fpgallm("deploy " + deploy_args(text, dir + "/a"), 600);
  ASSERT_EQ(r1.status, 0) << r1.err;
  for (const char* f : {"design.json", "model.q.gguf", "plan.json", "simulate.json", "trace_decode.json", "report.html",
                        "summary.json", "deploy.log", "hls/Makefile", "hls/connectivity.cfg", "hls/README.md"})
    EXPECT_TRUE(fs::exists(dir + "/a/" + f)) << f;
  EXPECT_NE(r1.out.find("report: " + dir + "/a/report.html"), std::string::npos) << r1.out;

  auto summary = nlohmann::json::parse(read_bytes(dir + "/a/summary.json"));
  const auto& v = summary["verify"];
  // The kernels run the quantized model as the fp32 engine's simulated quantization does
  // (docs/accelerator.md states the bound: the vector unit's table exp and lane sums).
  EXPECT_LT(std::abs(v["accel_vs_simulated_rel"].get<double>()), 0.01);
  EXPECT_TRUE(summary["resources"]["fits"].get<bool>());
  // No prediction beats the design's own peak arithmetic rate.
  const auto& p = summary["predicted"];
  EXPECT_GT(p["decode_tokens_per_s"].get<double>(), 0);
  EXPECT_LE(p["decode_breakdown"]["flops"].get<double>() / p["decode_step_s"].get<double>(),
            p["peak_ops_per_s"].get<double>() * 1.0000001);

  auto r2 = run_fpgallm("deploy " + deploy_args(text, dir + "/b"), 600);
  ASSERT_EQ(r2.status, 0) << r2.err;
  EXPECT_EQ(tree_bytes(dir + "/a"), tree_bytes(dir + "/b")) << "two runs with the same inputs differ";

  // The report renders in headless Chromium and shows the key figures.
  const std::string profile = dir + "/chromium-profile";
  const std::string dom = dir + "/dom.html";
  const std::string cmd = "timeout 120 chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run "
                          "--disable-background-networking --disable-component-update --disable-sync --user-data-dir=" +
                          profile + " --dump-dom file://" + dir + "/a/report.html >" + dom + " 2>/dev/null";
  if (std::system("command -v chromium >/dev/null 2>&1") != 0) GTEST_SKIP() << "chromium is not installed";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  const std::string html = read_bytes(dom);
  for (const char* id : {"id=\"decode-tps\"", "id=\"watts\"", "id=\"accel-ppl\"", "id=\"resources\"", "id=\"gpus\"",
                         "id=\"verify\"", "<svg"})
    EXPECT_NE(html.find(id), std::string::npos) << id;
  std::ostringstream tps;
  tps << static_cast<long>(p["decode_tokens_per_s"].get<double>());
  EXPECT_NE(html.find(tps.str()), std::string::npos) << "decode tokens/s " << tps.str() << " not in the rendered page";
}

TEST(Deploy, AFailureLeavesNoFolder) {
  const std::string dir = testing_support::scratch_dir("deploy-fail");
  const std::string text = short_text(dir);
  auto r = run_fpgallm("deploy " + testing_support::stories260k() + " -z " + testing_support::tok512() +
                       " --device u999 --text " + text + " -o " + dir + "/out");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("u999"), std::string::npos) << r.err;
  for (const auto& e : fs::directory_iterator(dir))
    EXPECT_EQ(e.path().filename().string().find("out"), std::string::npos) << e.path();
  // A GPU is not a deployment target either.
  auto g = run_fpgallm("deploy " + testing_support::stories260k() + " -z " + testing_support::tok512() +
                       " --device h100-sxm --text " + text + " -o " + dir + "/out");
  EXPECT_EQ(g.status, 2);
  EXPECT_FALSE(fs::exists(dir + "/out"));
}

}  // namespace
