package engine

import (
	"errors"
	"io"
	"os"

	"github.com/kvwarden/kvwarden/internal/kvseal"
)

// diskFS is the file-system seam of the disk tier: every page file it
// creates, reads, renames or deletes goes through it, so tests can fail
// an operation in the middle (a full disk, EIO, a torn write, a file that
// cannot be read) and check that each fault is only a miss and a counter.
// The directory itself, its lock and the epochs file use the os package.
type diskFS interface {
	// Create makes a new file for writing; it fails if path exists.
	Create(path string) (diskWriter, error)
	Open(path string) (diskReader, error)
	ReadFile(path string) ([]byte, error)
	Rename(from, to string) error
	Remove(path string) error
}

type diskWriter interface {
	io.Writer
	Sync() error
	Close() error
}

type diskReader interface {
	io.ReaderAt
	Close() error
}

type osFS struct{}

func (osFS) Create(path string) (diskWriter, error) {
	return os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
}
func (osFS) Open(path string) (diskReader, error) { return os.Open(path) }
func (osFS) ReadFile(path string) ([]byte, error) { return os.ReadFile(path) }
func (osFS) Rename(from, to string) error         { return os.Rename(from, to) }
func (osFS) Remove(path string) error             { return os.Remove(path) }

// newDiskFS gives each disk tier its file system; tests replace it to
// inject faults (never in parallel tests).
var newDiskFS = func() diskFS { return osFS{} }

// plainSealer stores pages in the clear with a zero "tag" in place of
// the authentication tag (TestHooks.UnsafePlainTiers: benchmarks of what
// encryption costs). It detects nothing.
type plainSealer struct{}

func (plainSealer) Seal(dst []byte, _ string, _, plain []byte) ([]byte, error) {
	dst = append(dst, plain...)
	return append(dst, make([]byte, kvseal.Overhead)...), nil
}

func (plainSealer) Open(dst []byte, _ string, _, sealed []byte) ([]byte, error) {
	if len(sealed) < kvseal.Overhead {
		return nil, errors.New("engine: plain page too short")
	}
	return append(dst, sealed[:len(sealed)-kvseal.Overhead]...), nil
}
