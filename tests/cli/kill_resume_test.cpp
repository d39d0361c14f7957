// Exact resume across real kills: `attn train` (a checkpoint after every step) run as a separate
// process and SIGKILLed at random moments (during start-up, at random training steps, and inside
// checkpoint writes), then restarted with --resume until a run completes, ends with the
// uninterrupted run's checkpoint bit for bit: every tensor (weights, AdamW state, EMA weights), the
// train state (step, generator position, epoch sums, history) and log.jsonl / metrics.json, all but
// their wall-clock fields. After every kill the checkpoint under its final name (if there is one
// yet) is whole and loadable. Seven runs: a tiny ViT with drop-path and augmentation; the same with
// an EMA of the weights; a distilled DeiT with a teacher checkpoint (and an EMA); a tiny Swin with
// DeiT's distillation head (shifted windows, drop-path, an EMA); a translation Transformer on a
// synthetic task (with an EMA); a tiny BERT pre-training on the KJV (dynamic masking); a tiny BERT
// tagger (BERT fine-tuning, with an EMA).
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

#include "attn/attn.h"
#include "attn/nn/tied.h"
#include "attn/io/checkpoint.h"
#include "attn/io/safetensors.h"
#include "attn_cli.h"
#include "bert_vocab.h"
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

constexpr double kChildTimeout = 120; // seconds: a hung child fails the test instead of hanging CI

// A run to kill: its `attn train` flags (besides --out, --resume, --ckpt-every, --threads), how many
// kills it needs, and where the training kills stop.
struct Scenario {
  std::string name;
  std::vector<std::string> flags;
  int progress_kills = 4;   // kills after the child wrote a checkpoint of its own
  int torn_kills = 2;       // kills inside a checkpoint write
  int64_t last_kill_margin = 12;   // no training kill once fewer steps than this are left
};

std::vector<std::string> train_args(const Scenario& sc, const std::string& out, bool resume) {
  std::vector<std::string> a = {ATTN_CLI_PATH, "train"};
  a.insert(a.end(), sc.flags.begin(), sc.flags.end());
  for (const char* f : {"--ckpt-every", "1", "--threads", "1", "--out"}) a.push_back(f);
  a.push_back(out);
  if (resume) a.push_back("--resume");
  return a;
}

const std::vector<std::string> kTinyVit = {
    "--model", "vit", "--model-config", R"({"dim":32,"depth":2,"heads":2,"patch_size":7,"drop_path":0.1,"drop":0.05})",
    "--batch", "64", "--limit-eval", "200", "--augment", "--seed", "7"};

std::vector<std::string> operator+(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
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
// the first moment a write of that path is in progress (its temporary exists; `write_wait` seconds
// later regardless: three steps of the uninterrupted run, so a slow model's next write is waited for).
// A start-up kill given `checkpoint` comes at the child's first write of it if that is sooner than
// `delay`: a resumed child starts faster than the uninterrupted one whose start-up sized the delay,
// and would otherwise train on through many steps before the kill.
struct KillPlan {
  double delay = -1;
  std::string checkpoint;
  int64_t at_step = -1;
  std::string at_write_of;
  double write_wait = 1.0;
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
    const bool started = plan.at_step < 0 && !plan.checkpoint.empty() && written_since(plan.checkpoint, spawned);
    const bool due = plan.delay >= 0 && anchor >= 0 && (t >= anchor + plan.delay || started);
    const bool kill_now = due && (plan.at_write_of.empty() || t >= anchor + plan.delay + plan.write_wait ||
                                  !io::unfinished_writes(plan.at_write_of).empty());
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

// An object without its wall-clock fields ("seconds", "*_seconds", "*_per_second"). Its paths
// ("samples") name files relative to the run's directory, so two runs in two directories agree.
nlohmann::json sans_time(nlohmann::json j) {
  for (auto it = j.begin(); it != j.end();) {
    const std::string& k = it.key();
    const bool time = k == "seconds" || k.ends_with("_seconds") || k.ends_with("_per_second");
    it = time ? j.erase(it) : std::next(it);
  }
  return j;
}

// The checkpoint's train state without its wall-clock fields (the total seconds, and each history
// record's throughput and seconds).
nlohmann::json train_state_sans_time(const std::string& ckpt) {
  nlohmann::json ts = sans_time(io::read_checkpoint_metadata(ckpt).at("train_state"));
  for (auto& h : ts.at("history")) h = sans_time(h);
  return ts;
}

// log.jsonl's records without their throughput and seconds (wall clock).
std::vector<nlohmann::json> log_records(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::istringstream in(read_text(path));
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) out.push_back(sans_time(nlohmann::json::parse(line)));
  }
  return out;
}

nlohmann::json metrics_sans_time(const std::string& path) { return sans_time(nlohmann::json::parse(read_text(path))); }

// The temporaries of out's files that a write begun since `since` left (name and size).
std::string torn_writes(const std::string& out, fs::file_time_type since) {
  std::string torn;
  for (const char* f : {"checkpoint.safetensors", "log.jsonl", "metrics.json", "curve.svg"}) {
    for (const std::string& t : io::unfinished_writes(out + "/" + f)) {
      std::error_code ec;
      if (written_since(t, since)) torn += " " + fs::path(t).filename().string() + " (" + std::to_string(fs::file_size(t, ec)) + " B)";
    }
  }
  return torn;
}

// Runs `sc` uninterrupted (a) and killed again and again until it completes (b); checks b against a.
// Returns the number of kills (-1 when it did not get that far).
int kill_and_resume(const Scenario& sc, const std::string& dir) {
  const std::string a_out = dir + "/a", b_out = dir + "/b", logs = dir + "/logs";
  fs::create_directories(logs);
  const std::string a_ckpt = a_out + "/checkpoint.safetensors", b_ckpt = b_out + "/checkpoint.safetensors";

  // The uninterrupted run; its start-up time sizes the start-up kills' delays.
  const RunResult a = run(train_args(sc, a_out, false), logs + "/a.txt", {}, a_ckpt);
  EXPECT_TRUE(exited_ok(a)) << sc.name << ", uninterrupted run: " << describe(a, logs + "/a.txt");
  EXPECT_GT(a.first_checkpoint, 0) << sc.name << ": no checkpoint seen during the uninterrupted run";
  if (!exited_ok(a) || a.first_checkpoint <= 0) return -1;
  const double startup = a.first_checkpoint;
  const int64_t total_steps = io::read_checkpoint_metadata(a_ckpt).at("train_state").at("step").get<int64_t>();
  std::printf("  %s, uninterrupted: %lld steps in %.2f s (first checkpoint after %.2f s)\n", sc.name.c_str(),
              (long long)total_steps, a.seconds, startup);

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
  // checkpoint write to begin (its temporary to appear) and kills it there. Kills go on until
  // sc.progress_kills landed after the child wrote a checkpoint of its own and sc.torn_kills
  // interrupted a checkpoint write (at most kMaxKills); then the run completes.
  constexpr int kMaxKills = 40;
  int kills = 0, progress_kills = 0, torn_kills = 0, training_kills = 0;
  int64_t final_from = -1;
  for (int attempt = 0;; ++attempt) {
    EXPECT_LE(attempt, kMaxKills) << sc.name << ": the run never completed";
    if (attempt > kMaxKills) return -1;
    const bool resume = fs::exists(b_ckpt);
    const int64_t from = resume ? io::read_checkpoint_metadata(b_ckpt).at("train_state").at("step").get<int64_t>() : 0;
    // Training kills stop while fewer than sc.last_kill_margin steps are left (each targets a step
    // within the next third of what is left).
    const bool kill = kills < kMaxKills && (progress_kills < sc.progress_kills || torn_kills < sc.torn_kills) &&
                      from < total_steps - sc.last_kill_margin;
    std::uniform_real_distribution<double> u(0, 1);
    const bool in_startup = u(rng) < 0.25;
    KillPlan plan;
    if (kill && in_startup) {
      plan.delay = u(rng) * startup;
      plan.checkpoint = b_ckpt;
    } else if (kill) {
      const int64_t span = std::max<int64_t>(1, (total_steps - from) / 3);
      plan.checkpoint = b_ckpt;
      plan.at_step = from + 1 + int64_t(u(rng) * double(span));
      plan.delay = 0;
      if (training_kills++ % 2 == 1) plan.at_write_of = b_ckpt;
      plan.write_wait = std::max(1.0, 3.0 * a.seconds / double(std::max<int64_t>(1, total_steps)));
    }
    const std::string log = logs + "/b" + std::to_string(attempt) + ".txt";
    const auto spawned = fs::file_time_type::clock::now();
    const RunResult r = run(train_args(sc, b_out, resume), log, plan);
    const char* how = resume ? "resumed at" : "fresh from";
    if (!r.killed) {
      EXPECT_TRUE(exited_ok(r)) << sc.name << ", attempt " << attempt << (resume ? " (--resume)" : "") << ": "
                                << describe(r, log);
      if (!exited_ok(r)) return -1;
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
        ADD_FAILURE() << sc.name << ", after kill " << kills << " (attempt " << attempt << ", " << r.seconds
                      << " s): " << b_ckpt << " does not load: " << e.what();
        return -1;
      }
      EXPECT_GE(at, from) << "the checkpoint went back (attempt " << attempt << ")";
    }
    // Writes this child left unfinished (a temporary it created).
    const std::string torn = torn_writes(b_out, spawned);
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
  std::printf("  %s: %d kills: %d after the child had checkpointed, %d during a checkpoint write\n", sc.name.c_str(),
              kills, progress_kills, torn_kills);
  EXPECT_GE(progress_kills, sc.progress_kills - 1) << sc.name << ": too few kills landed in training";
  EXPECT_GE(torn_kills, 1) << sc.name << ": no kill landed during a checkpoint write";
  EXPECT_GT(final_from, 0) << sc.name << ": the completing run did not resume";

  // The killed-and-resumed run ends where the uninterrupted one did.
  EXPECT_TRUE(test::same_checkpoint(b_ckpt, a_ckpt)) << sc.name;
  EXPECT_EQ(train_state_sans_time(b_ckpt), train_state_sans_time(a_ckpt)) << sc.name;
  EXPECT_EQ(train_state_sans_time(b_ckpt).at("step"), total_steps) << sc.name;
  const auto la = log_records(a_out + "/log.jsonl"), lb = log_records(b_out + "/log.jsonl");
  EXPECT_GE(la.size(), 1u) << sc.name;
  EXPECT_EQ(lb, la) << sc.name;
  EXPECT_EQ(metrics_sans_time(b_out + "/metrics.json"), metrics_sans_time(a_out + "/metrics.json")) << sc.name;
  EXPECT_EQ(torn_writes(b_out, fs::file_time_type::min()), "") << sc.name << ": temporaries left behind";
  return kills;
}

// The run's directory, removed unless a check failed.
struct RunDir {
  std::string path;
  explicit RunDir(const std::string& name) : path(test::fresh_tmp_dir("attn_kill_resume_test", name)) {}
  ~RunDir() {
    if (!::testing::Test::HasFailure()) fs::remove_all(path);
    else std::printf("  kept %s (child outputs in logs/)\n", path.c_str());
  }
};

}  // namespace

TEST(KillResume, SigkilledAtRandomMomentsAndResumedEndsBitForBit) {
  const RunDir dir("run");
  // 2 epochs x 4,096 / 64 = 128 steps; after the kills needed at least ~30 remain.
  const Scenario sc{"vit", kTinyVit + std::vector<std::string>{"--epochs", "2", "--limit-train", "4096"}};
  const int kills = kill_and_resume(sc, dir.path);
  EXPECT_GE(kills, sc.progress_kills - 1);
  const nlohmann::json m = metrics_sans_time(dir.path + "/b/metrics.json");
  EXPECT_TRUE(m.contains("test_accuracy"));
}

// The EMA of the weights is in the checkpoint itself: a kill between writing it and the rest cannot
// happen (it used to be a second file, written first, which a kill could leave a step ahead).
TEST(KillResume, WithAnEmaOfTheWeightsEndsBitForBit) {
  const RunDir dir("ema");
  const Scenario sc{"vit + EMA",
                    kTinyVit + std::vector<std::string>{"--epochs", "1", "--limit-train", "4096", "--ema-decay", "0.9"},
                    4, 2, 8};
  const int kills = kill_and_resume(sc, dir.path);
  EXPECT_GE(kills, sc.progress_kills - 1);
  const std::string ckpt = dir.path + "/b/checkpoint.safetensors";
  ASSERT_TRUE(fs::exists(ckpt));
  EXPECT_TRUE(io::checkpoint_has_ema(io::open_checkpoint(ckpt)));
  EXPECT_FALSE(fs::exists(dir.path + "/b/checkpoint_ema.safetensors"));
  // `attn eval --ema` evaluates the EMA weights as the run's final evaluation did.
  const nlohmann::json m = nlohmann::json::parse(read_text(dir.path + "/b/metrics.json"));
  for (const bool ema : {false, true}) {
    std::vector<std::string> args = {"eval", ckpt, "--limit", "200", "--threads", "1", "--json"};
    if (ema) args.push_back("--ema");
    const test::CliRun r = test::run_attn(dir.path, args);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(nlohmann::json::parse(r.out).at("accuracy"), m.at(ema ? "test_accuracy_ema" : "test_accuracy"))
        << (ema ? "--ema" : "the model's weights");
  }
}

// A teacher checkpoint (an MLP, itself holding optimizer state and EMA weights, which its loader skips).
std::string write_teacher(const std::string& dir) {
  const std::string teacher = dir + "/teacher.safetensors";
  manual_seed(3);
  auto t = models::create_model("mlp", nlohmann::json::object());
  auto t_ema = models::create_model("mlp", nlohmann::json::object());
  optim::AdamW opt(t->parameters());
  train::save_checkpoint(teacher, *t, &opt, {{"config", t->config()}}, t_ema.get());
  return teacher;
}

// DeiT distillation: a distilled student with a teacher checkpoint, and an EMA.
TEST(KillResume, DistilledFromATeacherEndsBitForBit) {
  const RunDir dir("distill");
  const std::string teacher = write_teacher(dir.path);
  const Scenario sc{"distilled DeiT",
                    {"--model", "deit_fmnist_distilled", "--model-config",
                     R"({"dim":32,"depth":2,"heads":2,"patch_size":7,"drop_path":0.1})", "--batch", "64",
                     "--limit-train", "3072", "--limit-eval", "200", "--epochs", "1", "--augment", "--seed", "9",
                     "--teacher", teacher, "--distill", "soft", "--alpha", "0.5", "--tau", "2", "--ema-decay", "0.9"},
                    4, 2, 8};
  const int kills = kill_and_resume(sc, dir.path);
  EXPECT_GE(kills, sc.progress_kills - 1);
  const nlohmann::json m = metrics_sans_time(dir.path + "/b/metrics.json");
  EXPECT_EQ(m.at("distill").at("teacher"), teacher);
  EXPECT_TRUE(m.contains("test_accuracy_ema"));
}

// Swin (swin_fmnist's geometry at width 16: shifted windows, patch merging) with its distillation
// head trained from a teacher, drop-path, augmentation and an EMA.
TEST(KillResume, SwinWithADistillationHeadEndsBitForBit) {
  const RunDir dir("swin");
  const std::string teacher = write_teacher(dir.path);
  const Scenario sc{"distilled Swin",
                    {"--model", "swin_fmnist_distilled", "--model-config",
                     R"({"embed_dim":16,"depths":[2,2],"heads":[1,2],"drop_path":0.1})", "--batch", "64",
                     "--limit-train", "3072", "--limit-eval", "200", "--epochs", "1", "--augment", "--seed", "4",
                     "--teacher", teacher, "--distill", "hard", "--ema-decay", "0.9"},
                    4, 2, 8};
  const int kills = kill_and_resume(sc, dir.path);
  EXPECT_GE(kills, sc.progress_kills - 1);
  const nlohmann::json m = metrics_sans_time(dir.path + "/b/metrics.json");
  EXPECT_TRUE(m.contains("test_accuracy_dist"));
  EXPECT_TRUE(m.contains("test_accuracy_ema"));
}

// A translation Transformer (dropout, an EMA) on a synthetic copy task, batches by tokens.
TEST(KillResume, TranslationTransformerEndsBitForBit) {
  const RunDir dir("translation");
  const Scenario sc{"transformer",
                    {"--model", "transformer", "--model-config",
                     R"({"d_model":32,"nhead":2,"encoder_layers":1,"decoder_layers":1,"d_ff":64,"dropout":0.1,"max_length":64})",
                     "--data", "synthetic:copy", "--synthetic-size", "3000", "--max-tokens", "512", "--epochs", "1",
                     "--warmup-steps", "50", "--eval-sentences", "10", "--beam", "1", "--limit-test", "10", "--seed",
                     "5", "--ema-decay", "0.9"},
                    4, 2, 8};
  const int kills = kill_and_resume(sc, dir.path);
  EXPECT_GE(kills, sc.progress_kills - 1);
  // The checkpoint translates with either weights (the translator's loader skips the other's keys).
  const std::string ckpt = dir.path + "/b/checkpoint.safetensors";
  ASSERT_TRUE(fs::exists(ckpt));
  const io::CheckpointFile f = io::read_checkpoint(ckpt);
  for (const auto which : {io::CheckpointWeights::model, io::CheckpointWeights::ema}) {
    const infer::Translator t = infer::load_translator(ckpt, which);
    const io::TensorList& want = which == io::CheckpointWeights::ema ? f.ema : f.model;
    // The file holds a tied tensor (the output projection's weight, tgt_embed's) once, under its first name.
    io::TensorList sd = t.model().state_dict();
    for (const auto& names : nn::tied_names(t.model())) {
      const std::string& tied = names.first;
      std::erase_if(sd, [&](const auto& e) { return e.first == tied; });
    }
    ASSERT_EQ(sd.size(), want.size());
    for (size_t i = 0; i < sd.size(); ++i)
      EXPECT_EQ(std::memcmp(sd[i].second.contiguous().raw_data(), want[i].second.contiguous().raw_data(),
                            size_t(sd[i].second.numel()) * sd[i].second.element_size()), 0)
          << sd[i].first;
  }
}

// A tiny BERT fine-tuned for sequence labelling (dropout on, an EMA): the data order is a function of
// (seed, epoch), the dropout draws come from the resumed generator.
TEST(KillResume, BertTaggerEndsBitForBit) {
  ATTN_NEED_BERT_VOCAB(test::bert_vocab_path());
  const RunDir dir("bert-tag");
  const Scenario sc{"bert tagger",
                    {"--task", "tag", "--model", "bert-mini", "--model-config",
                     R"({"hidden_size":32,"num_hidden_layers":1,"num_attention_heads":2,"intermediate_size":64})",
                     "--data", "wordnet-supersense", "--max-steps", "30", "--eval-every", "10", "--batch", "8",
                     "--max-length", "32", "--limit-eval", "40", "--limit-train", "400", "--seed", "5", "--ema-decay", "0.9"},
                    3, 1, 8};
  const int kills = kill_and_resume(sc, dir.path);
  EXPECT_GE(kills, sc.progress_kills - 1);
}

// BERT pre-training (masked LM + next sentence, dynamic masking, dropout) on the KJV, tiny steps;
// the checkpoint then fills in masks with `attn fill-mask`.
TEST(KillResume, BertPretrainingEndsBitForBit) {
  const std::string vocab = test::bert_vocab_path();
  ATTN_NEED_BERT_VOCAB(vocab);
  const RunDir dir("bert_pretrain");
  const Scenario sc{"bert pre-training",
                    {"--model", "bert-mini", "--task", "pretrain", "--model-config",
                     R"({"hidden_size":32,"num_hidden_layers":1,"num_attention_heads":2,"intermediate_size":64})",
                     "--data", "bible", "--vocab", vocab, "--limit-train", "256", "--batch", "8", "--epochs", "1",
                     "--limit-eval", "16", "--eval-every", "10", "--seed", "3"},
                    3, 1, 8};
  const int kills = kill_and_resume(sc, dir.path);
  EXPECT_GE(kills, sc.progress_kills - 1);
  const nlohmann::json m = metrics_sans_time(dir.path + "/b/metrics.json");
  EXPECT_GT(m.at("val_mlm_accuracy").get<double>(), 0.0);
  const test::CliRun r = test::run_attn(dir.path, {"fill-mask", dir.path + "/b/checkpoint.safetensors",
                                                   "In the beginning God created the [MASK].", "--topk", "3", "--vocab", vocab});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("in the beginning god created the"), std::string::npos) << r.out;
}
