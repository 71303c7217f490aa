#pragma once
// An exclusive advisory lock on a file (flock(2)), torch-free: processes that share one GPU take
// turns through it, so that the forwards one of them times run with the GPU to themselves.
// flock locks belong to an open file, so two FileLocks on one path exclude each other within
// one process too.
#include <string>

namespace torchutil {

class FileLock {
 public:
  // Opens (creating it, mode 0666 less the umask) the file at path; throws std::invalid_argument
  // naming the path and the system's reason when it cannot.
  explicit FileLock(std::string path);
  ~FileLock();  // unlocks and closes
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

  void lock();     // waits until the lock is ours (no-op when already held)
  bool tryLock();  // takes the lock if free; false when another holder has it
  void unlock();   // no-op when not held
  bool held() const { return held_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
  bool held_ = false;
};

}  // namespace torchutil
