#pragma once
// Shared by the safety tests: a folder of inputs and foreign files to aim commands at, a
// hash of a whole folder (names, kinds, sizes and contents), and running fpgallm as a child
// process that can be signalled.
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace safety {

// FNV-1a 64, written out here from its definition (the manifest's checksum).
std::uint64_t fnv1a64(const std::string& bytes);

// Every entry under dir, recursively: relative name, kind, size and content checksum.
std::string hash_tree(const std::string& dir);

// Entries under dir whose names mark an fpgallm temporary or lock.
std::vector<std::string> debris(const std::string& dir);

// A folder with: model.bin (stories260K), tok.bin, text.txt (the sample stories),
// design.json (data/designs), notes.txt and notes.gguf (a user's files), foreign/ (a
// user's folder), fifo, and bad inputs made by the table test.
std::string prepare_inputs(const std::string& name);

// Writes an fpgallm-looking folder: files plus a manifest whose checksums match them.
void write_fpgallm_folder(const std::string& dir, const std::vector<std::pair<std::string, std::string>>& files);

struct Child {
  pid_t pid = -1;
  std::string out, err;  // files receiving stdout and stderr
};
// Starts fpgallm with args (split on spaces) and SIGINT/SIGTERM at their defaults.
Child spawn_fpgallm(const std::string& args, const std::string& log_prefix);
// Waits; returns the raw wait status.
int wait_child(const Child& c);
std::string read_file(const std::string& path);

}  // namespace safety
