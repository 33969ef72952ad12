package hub

import (
	"context"
	"fmt"
	"path"
	"strings"
)

// IsPattern reports whether a file name is a glob pattern (*, ? or [...])
// rather than a name, as llama-cpp-python's Llama.from_pretrained takes
// them ("*Q4_K_M.gguf").
func IsPattern(file string) bool { return strings.ContainsAny(file, "*?[") }

// ResolvePattern fills in ref.File when it is a glob pattern: the one file
// of the repository that matches it (fnmatch-style: a pattern without "/"
// may also match the file's base name, so "*Q4_K_M.gguf" finds
// "sub/model-Q4_K_M.gguf"). No match, or several, is ErrNoMatch naming the
// candidates. A reference that is not a pattern is returned as it is.
func (c *Client) ResolvePattern(ctx context.Context, ref Ref) (Ref, error) {
	if !IsPattern(ref.File) {
		return ref, nil
	}
	if _, err := path.Match(ref.File, ""); err != nil {
		return ref, fmt.Errorf("%w: bad file pattern %q: %v", ErrBadRef, ref.File, err)
	}
	names, err := c.Files(ctx, ref)
	if err != nil {
		return ref, err
	}
	got := MatchFiles(ref.File, names)
	switch {
	case len(got) == 0:
		return ref, fmt.Errorf("%w: no file in %s matches %q; its files: %s", ErrNoMatch, ref.Repo, ref.File, strings.Join(names, ", "))
	case len(got) > 1:
		return ref, fmt.Errorf("%w: %d files in %s match %q (%s); name one", ErrNoMatch, len(got), ref.Repo, ref.File, strings.Join(got, ", "))
	}
	if isSplit(got[0]) {
		return ref, fmt.Errorf("%w: %s is one part of a split GGUF, which kvwarden does not load; pick a single-file quantization", ErrNoMatch, got[0])
	}
	ref.File = got[0]
	return ref, nil
}

// MatchFiles returns the names that match pattern (see ResolvePattern).
func MatchFiles(pattern string, names []string) []string {
	var out []string
	for _, n := range names {
		ok, _ := path.Match(pattern, n)
		if !ok && !strings.Contains(pattern, "/") {
			ok, _ = path.Match(pattern, path.Base(n))
		}
		if ok {
			out = append(out, n)
		}
	}
	return out
}
