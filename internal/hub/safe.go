package hub

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// Errors of Pull for what a hub (or a mirror) says that cannot be trusted.
var (
	// ErrUnsafeName is a repository or file name that would put a file
	// outside the cache: absolute, with a ".." component, a backslash,
	// or a NUL.
	ErrUnsafeName = errors.New("hub: unsafe file name")
	// ErrUnverifiable is a file the hub gives no size or no digest for;
	// Client.AllowUnverified downloads it anyway.
	ErrUnverifiable = errors.New("hub: the hub gives no size or digest to verify the file against")
)

// checkName refuses a slash-separated name that is not a plain relative
// path inside its directory. Names come from the hub's file list, which a
// hostile hub or mirror controls, so this runs before any path is built;
// the cache's os.Root refuses an escape anyway, this gives the clear error.
func checkName(what, name string) error {
	bad := func(why string) error { return fmt.Errorf("%w: %s %q %s", ErrUnsafeName, what, name, why) }
	switch {
	case name == "":
		return bad("is empty")
	case strings.ContainsAny(name, "\\\x00"):
		return bad("contains a backslash or NUL")
	case path.IsAbs(name) || filepath.IsAbs(name) || filepath.VolumeName(name) != "":
		return bad("is absolute")
	}
	for _, part := range strings.Split(name, "/") {
		if part == "" || part == "." || part == ".." {
			return bad("has an empty, . or .. component")
		}
	}
	if !filepath.IsLocal(filepath.FromSlash(name)) {
		return bad("leaves the cache")
	}
	return nil
}

// checkRef refuses a reference whose repository or file name is unsafe.
// ParseRef already refuses those, but Resolve takes File from the hub and
// callers may build a Ref themselves.
func checkRef(ref Ref) error {
	if err := checkName("repository", ref.Repo); err != nil {
		return err
	}
	if strings.Count(ref.Repo, "/") != 1 {
		return fmt.Errorf("%w: repository %q is not owner/name", ErrUnsafeName, ref.Repo)
	}
	return checkName("file", ref.File)
}

// modelRel and partialRel are the cache-relative paths of a file, for the
// cache's os.Root.
func modelRel(repo, file string) string {
	return filepath.Join("models", filepath.FromSlash(repo), filepath.FromSlash(file))
}

func partialRel(repo, file string) string {
	return filepath.Join("downloads", filepath.FromSlash(repo), filepath.FromSlash(file)) + ".partial"
}

// openCache opens the cache directory as an os.Root: every file Pull
// writes goes through it, so no name (nor a symlink planted in the cache)
// can make a write land outside.
func (c *Client) openCache() (*os.Root, error) {
	if c.CacheDir == "" {
		return nil, errors.New("hub: no cache directory")
	}
	if err := os.MkdirAll(c.CacheDir, 0o755); err != nil {
		return nil, err
	}
	return os.OpenRoot(c.CacheDir)
}

// readMetaIn reads the record of the cached file rel, checking its size.
func readMetaIn(root *os.Root, rel string) (Model, error) {
	b, err := root.ReadFile(rel + metaSuffix)
	if err != nil {
		return Model{}, err
	}
	var m Model
	if err := json.Unmarshal(b, &m); err != nil {
		return Model{}, fmt.Errorf("%s%s: %w", rel, metaSuffix, err)
	}
	st, err := root.Stat(rel)
	if err != nil {
		return Model{}, err
	}
	if !st.Mode().IsRegular() || st.Size() != m.Size {
		return Model{}, fmt.Errorf("%s: %d bytes, its record says %d", rel, st.Size(), m.Size)
	}
	m.Path = filepath.Join(root.Name(), rel)
	return m, nil
}

// fileSHA256 hashes the file rel of root.
func fileSHA256(root *os.Root, rel string) (string, error) {
	f, err := root.Open(rel)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// writeFileAtomicIn writes data to a temporary file beside rel and renames
// it into place, all inside root.
func writeFileAtomicIn(root *os.Root, rel string, data []byte) error {
	dir := filepath.Dir(rel)
	if err := root.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp := filepath.Join(dir, ".tmp-"+rand.Text())
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = root.Rename(tmp, rel)
	}
	if err != nil {
		_ = root.Remove(tmp)
	}
	return err
}
