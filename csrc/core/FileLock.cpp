#include "core/FileLock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace torchutil {
namespace {

std::string reason(const std::string& what, const std::string& path, int error) {
  return "torchutil: cannot " + what + " the lock file '" + path + "': " + std::strerror(error);
}

}  // namespace

FileLock::FileLock(std::string path) : path_(std::move(path)) {
  if (path_.empty()) {
    throw std::invalid_argument("torchutil: gpu_lock must be a file path, got ''");
  }
  // Never through a symbolic link (one planted in a shared folder would redirect the lock), and
  // a file made here is the user's alone.
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd_ < 0) {
    const int error = errno;
    throw std::invalid_argument(
        reason("open", path_, error) +
        (error == ELOOP ? " (it is a symbolic link, which a lock file must not be)" : ""));
  }
}

FileLock::~FileLock() {
  unlock();
  ::close(fd_);
}

void FileLock::lock() {
  if (held_) {
    return;
  }
  while (::flock(fd_, LOCK_EX) != 0) {
    if (errno != EINTR) {
      throw std::invalid_argument(reason("lock", path_, errno));
    }
  }
  held_ = true;
}

bool FileLock::tryLock() {
  if (held_) {
    return true;
  }
  if (::flock(fd_, LOCK_EX | LOCK_NB) == 0) {
    held_ = true;
  } else if (errno != EWOULDBLOCK) {
    throw std::invalid_argument(reason("lock", path_, errno));
  }
  return held_;
}

void FileLock::unlock() {
  if (held_) {
    ::flock(fd_, LOCK_UN);
    held_ = false;
  }
}

}  // namespace torchutil
