// util/output.hpp directly: the rules each command relies on.
#include <sys/xattr.h>

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>

#include "safety_support.hpp"
#include "testing.hpp"
#include "util/error.hpp"
#include "util/output.hpp"

namespace {

namespace fs = std::filesystem;

struct NoForce {
  NoForce() { fpgallm::set_output_force(false); }
  ~NoForce() { fpgallm::set_output_force(true); }
};

void write(fpgallm::OutputFile& f, const std::string& s) { f.write(s.data(), s.size()); }

TEST(Output, AFileThatAppearsWhileWritingIsNotReplaced) {
  NoForce no_force;
  const std::string d = testing_support::scratch_dir("out-appear");
  {
    fpgallm::OutputFile f(d + "/x.json");
    write(f, "new");
    testing_support::write_bytes(d + "/x.json", "someone else's");
    EXPECT_THROW(f.commit(), fpgallm::InputError);
  }
  EXPECT_EQ(testing_support::read_bytes(d + "/x.json"), "someone else's");
  EXPECT_TRUE(safety::debris(d).empty());
  {
    fpgallm::OutputFile f(d + "/y.json");
    write(f, "mine");
    f.commit();
  }
  EXPECT_EQ(testing_support::read_bytes(d + "/y.json"), "mine");
  // A file fpgallm wrote, unchanged since, may be replaced without --force (where the file
  // system keeps user attributes); once someone else writes it, it is theirs.
  if (::getxattr((d + "/y.json").c_str(), "user.fpgallm.written", nullptr, 0) > 0) {
    EXPECT_NO_THROW(fpgallm::check_output(d + "/y.json", fpgallm::OutputKind::file));
  }
  testing_support::write_bytes(d + "/y.json", "edited");
  EXPECT_THROW(fpgallm::check_output(d + "/y.json", fpgallm::OutputKind::file), fpgallm::InputError);
}

TEST(Output, AnInputIsNeverReplacedEvenWithForce) {
  const std::string d = testing_support::scratch_dir("out-input");
  testing_support::write_bytes(d + "/in.bin", "input");
  fpgallm::note_input(d + "/in.bin");
  EXPECT_TRUE(fpgallm::output_force());
  EXPECT_THROW(fpgallm::check_output(d + "/in.bin", fpgallm::OutputKind::file), fpgallm::InputError);
  {
    fpgallm::OutputFile f(d + "/in.bin");
    write(f, "output");
    EXPECT_THROW(f.commit(), fpgallm::InputError);
  }
  EXPECT_EQ(testing_support::read_bytes(d + "/in.bin"), "input");
  EXPECT_TRUE(safety::debris(d).empty());
}

TEST(Output, AFolderIsReplacedOnlyWhileItMatchesItsManifest) {
  const std::string d = testing_support::scratch_dir("out-folder");
  for (const char* content : {"first", "second"}) {
    fpgallm::OutputFolder out(d + "/proj");
    testing_support::write_bytes(out.dir() + "/a.txt", content);
    fs::create_directories(out.dir() + "/sub");
    testing_support::write_bytes(out.dir() + "/sub/b.txt", content);
    out.commit();
    EXPECT_EQ(testing_support::read_bytes(d + "/proj/sub/b.txt"), content);
  }
  EXPECT_EQ(fpgallm::foreign_folder_reason(d + "/proj"), "");
  testing_support::write_bytes(d + "/proj/sub/b.txt", "edited by hand");
  EXPECT_NE(fpgallm::foreign_folder_reason(d + "/proj").find("changed since"), std::string::npos);
  {
    fpgallm::OutputFolder out(d + "/proj");
    testing_support::write_bytes(out.dir() + "/a.txt", "third");
    EXPECT_THROW(out.commit(), fpgallm::InputError);
  }
  EXPECT_EQ(testing_support::read_bytes(d + "/proj/sub/b.txt"), "edited by hand");
  EXPECT_TRUE(safety::debris(d).empty()) << safety::debris(d).front();
  // The manifest's checksum is FNV-1a 64, as written out in the test support.
  EXPECT_EQ(fpgallm::fnv1a64("hello", 5), safety::fnv1a64("hello"));
}

TEST(Output, OneWriterHoldsAnOutputAtATime) {
  const std::string d = testing_support::scratch_dir("out-lock");
  {
    fpgallm::OutputFolder first(d + "/dep");
    EXPECT_THROW(fpgallm::OutputFolder second(d + "/dep"), fpgallm::InputError);
    first.commit();
  }
  // A lock whose owner has exited is taken over.
  pid_t gone = ::fork();
  if (gone == 0) ::_exit(0);
  ::waitpid(gone, nullptr, 0);
  testing_support::write_bytes(d + "/dep2.fpgallm-lock", std::to_string(gone) + "\n");
  {
    fpgallm::OutputFolder taken(d + "/dep2");
    taken.commit();
  }
  EXPECT_TRUE(fs::exists(d + "/dep2/fpgallm-manifest.json"));
  EXPECT_TRUE(safety::debris(d).empty()) << safety::debris(d).front();
}

TEST(Output, SigintRemovesTemporariesAndTheFoldersMadeForThem) {
  const std::string d = testing_support::scratch_dir("out-sigint");
  const pid_t child = ::fork();
  if (child == 0) {
    std::signal(SIGINT, SIG_DFL);
    fpgallm::install_interrupt_cleanup();
    fpgallm::OutputFolder out(d + "/new/deeper/dep");
    testing_support::write_bytes(out.dir() + "/half.bin", std::string(1 << 16, 'x'));
    fpgallm::OutputFile f(d + "/new/file.gguf");
    write(f, "partial");
    ::raise(SIGINT);
    ::_exit(3);  // not reached
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGINT);
  EXPECT_EQ(safety::hash_tree(d), "") << safety::hash_tree(d);
}

// Once an output is in place the run is past the point of no return: a signal then lets
// it finish (every output written, normal exit), never leaves some outputs and not others.
// A file committed inside a temporary folder is not such a point.
TEST(Output, SigintAfterAnOutputIsInPlaceLetsTheRunFinish) {
  const std::string d = testing_support::scratch_dir("out-sigint-late");
  const pid_t child = ::fork();
  if (child == 0) {
    std::signal(SIGINT, SIG_DFL);
    fpgallm::install_interrupt_cleanup();
    {
      fpgallm::OutputFolder folder(d + "/dep");
      fpgallm::OutputFile inner(folder.dir() + "/inner.bin");
      write(inner, "inside the temporary folder");
      inner.commit();
      fpgallm::OutputFile first(d + "/first.gguf");
      write(first, "first");
      first.commit();
      ::raise(SIGINT);
      fpgallm::OutputFile second(d + "/second.json");
      write(second, "second");
      second.commit();
      folder.commit();
    }
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0);
  for (const char* f : {"/first.gguf", "/second.json", "/dep/inner.bin"}) EXPECT_TRUE(fs::exists(d + f)) << f;
  EXPECT_TRUE(safety::debris(d).empty()) << safety::debris(d).front();

  // The same signal before the first output is in place (only the folder's inner file
  // committed) ends the run and leaves nothing.
  const std::string e = testing_support::scratch_dir("out-sigint-early");
  const pid_t early = ::fork();
  if (early == 0) {
    std::signal(SIGINT, SIG_DFL);
    fpgallm::install_interrupt_cleanup();
    fpgallm::OutputFolder folder(e + "/dep");
    fpgallm::OutputFile inner(folder.dir() + "/inner.bin");
    write(inner, "inside the temporary folder");
    inner.commit();
    ::raise(SIGINT);
    ::_exit(3);
  }
  ::waitpid(early, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGINT);
  EXPECT_EQ(safety::hash_tree(e), "") << safety::hash_tree(e);
}

}  // namespace
