//go:build unix

package engine

import (
	"os"
	"syscall"
)

// lockFileExclusive takes the disk tier directory's lock without waiting:
// two engines writing one directory would evict and rename each other's
// files under their own budgets.
func lockFileExclusive(f *os.File) error {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
}

func unlockFile(f *os.File) error { return syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }
