// Exact resume across real kills: `attn train` (a tiny ViT with drop-path and augmentation, a
// checkpoint after every step) run as a separate process and SIGKILLed at random moments (during
// start-up, at random training steps, and inside checkpoint writes), then restarted with
// --resume until a run completes, ends with the uninterrupted run's checkpoint bit for bit: every
// tensor (weights and AdamW state), the train state (step, generator position, epoch sums, history)
// and log.jsonl / metrics.json, all but their wall-clock fields. After every kill the checkpoint under
// its final name (if there is one yet) is whole and loadable.
//
// Reproduce a failure: the test prints its seed and each kill's delay and the step it landed at;
// ATTN_KILL_SEED=<seed> replays the same plan (start-up delays and target steps).
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "attn/io/checkpoint.h"
#include "attn/io/safetensors.h"
#include "train_checks.h"

#ifndef ATTN_CLI_PATH
#error "ATTN_CLI_PATH (the attn binary) is set by tests/CMakeLists.txt"
#endif

extern char** environ;

using namespace attn;
namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

constexpr int64_t kTotalSteps = 128;   // 2 epochs x 4,096 / 64
constexpr double kChildTimeout = 120; // seconds: a hung child fails the test instead of hanging CI

std::vector<std::string> train_args(const std::string& out, bool resume) {
  std::vector<std::string> a = {
      ATTN_CLI_PATH, "train", "--model", "vit",
      "--model-config", R"({"dim":32,"depth":2,"heads":2,"patch_size":7,"drop_path":0.1,"drop":0.05})",
      "--epochs", "2", "--batch", "64", "--limit-train", "4096", "--limit-eval", "200", "--augment",
      "--seed", "7", "--ckpt-every", "1", "--threads", "1", "--out", out};
  if (resume) a.push_back("--resume");
  return a;
}

struct RunResult {
  bool killed = false;      // we SIGKILLed it at the requested delay
  bool timed_out = false;   // we SIGKILLed it at kChildTimeout
  int status = 0;           // waitpid status
  double seconds = 0;
  double first_checkpoint = -1;   // seconds until `watch` first existed (-1: never seen)
};

// When to SIGKILL a child: `delay` seconds (< 0: never) after it started (start-up kills) or, given
// `checkpoint` and `at_step`, once that checkpoint holds step >= at_step (training kills: by progress,
// not by wall time, so a fast or slow machine kills at the same steps); then, given `at_write_of`, at
// the first moment that path exists (a write in progress; 1 s later regardless).
struct KillPlan {
  double delay = -1;
  std::string checkpoint;
  int64_t at_step = -1;
  std::string at_write_of;
};

// Written (modified) at or after `since`.
bool written_since(const std::string& path, fs::file_time_type since) {
  std::error_code ec;
  const auto t = fs::last_write_time(path, ec);
  return !ec && t >= since;
}

// Runs `args` (no shell), stdout and stderr to `log`, killing it as `plan` says. `watch`: a path whose
// first appearance is timed.
RunResult run(const std::vector<std::string>& args, const std::string& log, const KillPlan& plan = {},
              const std::string& watch = "") {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = -1;
  const auto t0 = Clock::now();
  const auto spawned = fs::file_time_type::clock::now();
  const int rc = posix_spawn(&pid, args[0].c_str(), &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  RunResult r;
  if (rc != 0) {
    ADD_FAILURE() << "posix_spawn " << args[0] << ": " << std::strerror(rc);
    r.status = -1;
    return r;
  }
  double anchor = plan.at_step < 0 ? 0 : -1;   // when the delay starts (-1: not yet)
  fs::file_time_type seen{};                   // the checkpoint's last write time read
  for (;;) {
    int st = 0;
    const pid_t w = ::waitpid(pid, &st, WNOHANG);
    const double t = since(t0);
    if (w == pid) {
      r.status = st;
      r.seconds = t;
      return r;
    }
    if (!watch.empty() && r.first_checkpoint < 0 && fs::exists(watch)) r.first_checkpoint = t;
    if (anchor < 0 && written_since(plan.checkpoint, spawned)) {
      std::error_code ec;
      const auto mt = fs::last_write_time(plan.checkpoint, ec);
      if (!ec && mt != seen) {
        seen = mt;
        try {   // the file is replaced by rename: an open sees a whole old or new one
          const int64_t step = io::read_checkpoint_metadata(plan.checkpoint).at("train_state").at("step").get<int64_t>();
          if (step >= plan.at_step) anchor = t;
        } catch (const std::exception&) {
        }
      }
    }
    const bool due = plan.delay >= 0 && anchor >= 0 && t >= anchor + plan.delay;
    const bool kill_now = due && (plan.at_write_of.empty() || t >= anchor + plan.delay + 1.0 ||
                                  fs::exists(plan.at_write_of));
    if (kill_now || t >= kChildTimeout) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &st, 0);
      r.status = st;
      r.seconds = since(t0);
      (kill_now ? r.killed : r.timed_out) = true;
      return r;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(due ? 20 : 500));
  }
}

std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string describe(const RunResult& r, const std::string& log) {
  std::ostringstream s;
  if (r.timed_out) s << "timed out after " << kChildTimeout << " s";
  else if (WIFEXITED(r.status)) s << "exited " << WEXITSTATUS(r.status);
  else if (WIFSIGNALED(r.status)) s << "killed by signal " << WTERMSIG(r.status);
  s << "; its output:\n" << read_text(log);
  return s.str();
}

bool exited_ok(const RunResult& r) { return !r.killed && !r.timed_out && WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0; }

// The checkpoint's train state without its wall-clock fields (the total seconds, and each history
// record's throughput and seconds).
nlohmann::json train_state_sans_time(const std::string& ckpt) {
  nlohmann::json ts = io::read_checkpoint_metadata(ckpt).at("train_state");
  ts.erase("seconds");
  for (auto& h : ts.at("history")) {
    h.erase("images_per_second");
    h.erase("seconds");
  }
  return ts;
}

// log.jsonl's records without their throughput and seconds (wall clock).
std::vector<nlohmann::json> log_records(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::istringstream in(read_text(path));
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    nlohmann::json j = nlohmann::json::parse(line);
    j.erase("images_per_second");
    j.erase("seconds");
    out.push_back(j);
  }
  return out;
}

nlohmann::json metrics_sans_time(const std::string& path) {
  nlohmann::json m = nlohmann::json::parse(read_text(path));
  m.erase("images_per_second");
  m.erase("seconds");
  return m;
}

}  // namespace

TEST(KillResume, SigkilledAtRandomMomentsAndResumedEndsBitForBit) {
  const std::string dir = test::fresh_tmp_dir("attn_kill_resume_test", "run");
  const std::string a_out = dir + "/a", b_out = dir + "/b", logs = dir + "/logs";
  fs::create_directories(logs);
  const std::string a_ckpt = a_out + "/checkpoint.safetensors", b_ckpt = b_out + "/checkpoint.safetensors";

  // The uninterrupted run; its start-up time sizes the start-up kills' delays.
  const RunResult a = run(train_args(a_out, false), logs + "/a.txt", {}, a_ckpt);
  ASSERT_TRUE(exited_ok(a)) << "uninterrupted run: " << describe(a, logs + "/a.txt");
  ASSERT_GT(a.first_checkpoint, 0) << "no checkpoint seen during the uninterrupted run";
  const double startup = a.first_checkpoint;
  std::printf("  uninterrupted: %.2f s (first checkpoint after %.2f s)\n", a.seconds, startup);

  uint64_t seed = std::random_device{}();
  if (const char* s = std::getenv("ATTN_KILL_SEED")) seed = std::strtoull(s, nullptr, 10);
  std::printf("  kill seed %llu (ATTN_KILL_SEED=%llu reproduces the plan)\n", (unsigned long long)seed,
              (unsigned long long)seed);
  std::mt19937_64 rng(seed);

  // Kill, restart, repeat. A restart resumes from the checkpoint when there is one, and starts afresh
  // (as a user would: --resume without a checkpoint is an error) when the kill came before the first.
  // Each kill comes at a random moment: a quarter of them during start-up (loading the data and the
  // checkpoint, a random delay), the others in training: once the child's checkpoint reaches a random
  // step within the next third of the steps left; every other one of those then waits for the next
  // checkpoint write to begin (its .tmp to appear) and kills it there. Kills go on until
  // kProgressKills landed after the child wrote a checkpoint of its own and kTornKills interrupted a
  // checkpoint write (at most kMaxKills); then the run completes.
  constexpr int kProgressKills = 4, kTornKills = 2, kMaxKills = 40;
  const std::string b_tmp = b_ckpt + ".tmp";
  int kills = 0, progress_kills = 0, torn_kills = 0, training_kills = 0;
  int64_t final_from = -1;
  for (int attempt = 0;; ++attempt) {
    ASSERT_LE(attempt, kMaxKills) << "the run never completed";
    const bool resume = fs::exists(b_ckpt);
    const int64_t from = resume ? io::read_checkpoint_metadata(b_ckpt).at("train_state").at("step").get<int64_t>() : 0;
    // Training kills stop while fewer than 12 steps are left (each targets a step within the next third
    // of what is left, so after the kills needed at least ~30 of 128 remain).
    const bool kill = kills < kMaxKills && (progress_kills < kProgressKills || torn_kills < kTornKills) &&
                      from < kTotalSteps - 12;
    std::uniform_real_distribution<double> u(0, 1);
    const bool in_startup = u(rng) < 0.25;
    KillPlan plan;
    if (kill && in_startup) {
      plan.delay = u(rng) * startup;
    } else if (kill) {
      const int64_t span = std::max<int64_t>(1, (kTotalSteps - from) / 3);
      plan.checkpoint = b_ckpt;
      plan.at_step = from + 1 + int64_t(u(rng) * double(span));
      plan.delay = 0;
      if (training_kills++ % 2 == 1) plan.at_write_of = b_tmp;
    }
    const std::string log = logs + "/b" + std::to_string(attempt) + ".txt";
    const auto spawned = fs::file_time_type::clock::now();
    const RunResult r = run(train_args(b_out, resume), log, plan);
    const char* how = resume ? "resumed at" : "fresh from";
    if (!r.killed) {
      ASSERT_TRUE(exited_ok(r)) << "attempt " << attempt << (resume ? " (--resume)" : "") << ": " << describe(r, log);
      final_from = from;
      std::printf("  attempt %d: %s step %lld, ran to the end (%.2f s)\n", attempt, how, (long long)from, r.seconds);
      if (resume) {
        // It did resume (a fresh start would reproduce the run too, and prove nothing).
        const std::string want = "resuming " + b_ckpt + " from step " + std::to_string(from);
        EXPECT_NE(read_text(log).find(want), std::string::npos) << "attempt " << attempt << " did not say '" << want
                                                                << "':\n" << read_text(log);
      }
      break;
    }
    ++kills;
    // A kill never leaves a torn checkpoint under the final name: what is there loads.
    int64_t at = -1;
    if (fs::exists(b_ckpt)) {
      try {
        io::load_safetensors(b_ckpt);
        at = io::read_checkpoint_metadata(b_ckpt).at("train_state").at("step").get<int64_t>();
      } catch (const std::exception& e) {
        FAIL() << "after kill " << kills << " (attempt " << attempt << ", " << r.seconds << " s): " << b_ckpt
               << " does not load: " << e.what();
      }
      EXPECT_GE(at, from) << "the checkpoint went back (attempt " << attempt << ")";
    }
    // Writes this child left unfinished (a .tmp it created).
    std::string torn;
    for (const char* f : {"checkpoint.safetensors.tmp", "log.jsonl.tmp", "metrics.json.tmp"}) {
      if (written_since(b_out + "/" + f, spawned)) torn += std::string(" ") + f + " (" + std::to_string(fs::file_size(b_out + "/" + f)) + " B)";
    }
    const bool progress = at > from || (!resume && at >= 0);
    progress_kills += progress;
    torn_kills += torn.find("checkpoint") != std::string::npos;
    const std::string when = plan.at_step < 0 ? " (start-up)"
                             : " (planned at step " + std::to_string(plan.at_step) +
                                   (plan.at_write_of.empty() ? ")" : ", at the next write)");
    std::printf("  attempt %d: %s step %lld, killed after %.3f s%s at checkpoint step %lld%s%s\n", attempt, how,
                (long long)from, r.seconds, when.c_str(), (long long)at,
                torn.empty() ? "" : ", mid-write:", torn.c_str());
  }
  std::printf("  %d kills: %d after the child had checkpointed, %d during a checkpoint write\n", kills, progress_kills,
              torn_kills);
  EXPECT_GE(progress_kills, 3) << "too few kills landed in training";
  EXPECT_GE(torn_kills, 1) << "no kill landed during a checkpoint write";
  EXPECT_GT(final_from, 0) << "the completing run did not resume";

  // The killed-and-resumed run ends where the uninterrupted one did.
  EXPECT_TRUE(test::same_checkpoint(b_ckpt, a_ckpt));
  EXPECT_EQ(train_state_sans_time(b_ckpt), train_state_sans_time(a_ckpt));
  EXPECT_EQ(train_state_sans_time(b_ckpt).at("step"), kTotalSteps);
  const auto la = log_records(a_out + "/log.jsonl"), lb = log_records(b_out + "/log.jsonl");
  EXPECT_EQ(la.size(), 2u);
  EXPECT_EQ(lb, la);
  const nlohmann::json ma = metrics_sans_time(a_out + "/metrics.json"), mb = metrics_sans_time(b_out + "/metrics.json");
  EXPECT_EQ(mb.at("test_accuracy"), ma.at("test_accuracy"));
  EXPECT_EQ(mb, ma);
  if (!HasFailure()) fs::remove_all(dir);
  else std::printf("  kept %s (child outputs in logs/)\n", dir.c_str());
}
