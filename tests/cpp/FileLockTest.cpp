#include "core/FileLock.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <stdexcept>
#include <string>

namespace torchutil {
namespace {

std::string tempPath() {
  char name[] = "/tmp/torchutil_lock_XXXXXX";
  const int fd = mkstemp(name);
  EXPECT_GE(fd, 0);
  close(fd);
  return name;
}

// Oracle: flock(2)'s rule that two open files of one path exclude each other.
TEST(FileLockTest, TwoLocksOnOnePathExcludeEachOther) {
  const std::string path = tempPath();
  FileLock a(path), b(path);
  EXPECT_TRUE(a.tryLock());
  EXPECT_FALSE(b.tryLock());
  a.unlock();
  EXPECT_TRUE(b.tryLock());
  EXPECT_FALSE(a.tryLock());
  b.unlock();
  std::remove(path.c_str());
}

TEST(FileLockTest, DestructionReleasesTheLock) {
  const std::string path = tempPath();
  FileLock b(path);
  {
    FileLock a(path);
    a.lock();
    EXPECT_TRUE(a.held());
    EXPECT_FALSE(b.tryLock());
  }
  EXPECT_TRUE(b.tryLock());
  std::remove(path.c_str());
}

TEST(FileLockTest, LockingTwiceIsANoOp) {
  const std::string path = tempPath();
  FileLock a(path);
  a.lock();
  a.lock();
  EXPECT_TRUE(a.tryLock());
  a.unlock();
  a.unlock();
  EXPECT_FALSE(a.held());
  std::remove(path.c_str());
}

TEST(FileLockTest, AnUnopenablePathIsNamed) {
  try {
    FileLock a("/nonexistent-dir/x.lock");
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'/nonexistent-dir/x.lock'"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("No such file or directory"), std::string::npos);
  }
  EXPECT_THROW(FileLock(""), std::invalid_argument);
}

// Oracle: open(2)'s O_NOFOLLOW, which refuses a symbolic link as the last component (ELOOP).
TEST(FileLockTest, ASymbolicLinkIsRefusedAndANewFileIsTheUsersAlone) {
  const std::string target = tempPath();
  const std::string link = target + ".link";
  ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0);
  try {
    FileLock a(link);
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("it is a symbolic link"), std::string::npos) << e.what();
  }
  const std::string fresh = target + ".new";
  {
    FileLock b(fresh);
    struct stat st {};
    ASSERT_EQ(::stat(fresh.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 077, 0u);
  }
  std::remove(link.c_str());
  std::remove(fresh.c_str());
  std::remove(target.c_str());
}

}  // namespace
}  // namespace torchutil
