// Package hub downloads GGUF models from a Hugging Face hub into a local
// cache, as `ollama pull` and llama.cpp's -hf do: a reference names a
// repository and a file or a quantization tag, the file is fetched with
// resume (HTTP Range), checked against the size and SHA-256 the hub
// publishes (X-Linked-Size, X-Linked-Etag), and renamed into the cache only
// once complete and verified.
//
// Cache layout (Client.CacheDir):
//
//	models/<owner>/<repo>/<file>               complete, verified files
//	models/<owner>/<repo>/<file>.kvwarden.json what was verified (sha256, size, revision)
//	downloads/<owner>/<repo>/<file>.partial    an interrupted download, resumed by the next pull
//
// Nothing under models/ is ever half-written, and nothing is written
// outside the cache: every write goes through an os.Root of it, and names
// from the hub that would leave it are refused (ErrUnsafeName).
package hub

import (
	"errors"
	"fmt"
	"net/url"
	"path"
	"regexp"
	"strings"
)

// ErrBadRef is wrapped by errors for references that cannot be parsed.
var ErrBadRef = errors.New("hub: bad model reference")

// DefaultTag is the quantization picked when a reference names only a
// repository (llama.cpp's default).
const DefaultTag = "Q4_K_M"

// Ref names a file in a hub repository: File, or a quantization Tag that
// picks one of the repository's GGUF files (Resolve fills File in).
type Ref struct {
	Repo     string // "owner/name"
	Revision string // branch, tag or commit; "main" by default
	File     string // path inside the repository
	Tag      string // quantization tag such as "Q4_K_M", when File is ""
}

// String formats the reference as ParseRef reads it.
func (r Ref) String() string {
	s := r.Repo
	switch {
	case r.File != "":
		s += ":" + r.File
	case r.Tag != "":
		s += ":" + r.Tag
	}
	if r.Revision != "" && r.Revision != "main" {
		s += "@" + r.Revision
	}
	return s
}

var (
	namePart = `[A-Za-z0-9][A-Za-z0-9._-]*`
	repoRe   = regexp.MustCompile(`^` + namePart + `/` + namePart + `$`)
	tagRe    = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)
)

// ParseRef reads a model reference:
//
//	owner/repo                       the DefaultTag file, else the first GGUF
//	owner/repo:Q4_K_M                the GGUF whose name ends in that tag
//	owner/repo:file.gguf             that file (any name ending in .gguf)
//	owner/repo:dir/file.gguf@rev     a file at a revision
//	hf://owner/repo/dir/file.gguf    the same as owner/repo:dir/file.gguf
//	https://huggingface.co/owner/repo/resolve/rev/file.gguf (or /blob/)
func ParseRef(s string) (Ref, error) {
	bad := func(why string) (Ref, error) { return Ref{}, fmt.Errorf("%w %q: %s", ErrBadRef, s, why) }
	var r Ref
	switch {
	case strings.HasPrefix(s, "hf://"):
		parts := strings.SplitN(strings.TrimPrefix(s, "hf://"), "/", 3)
		if len(parts) < 2 {
			return bad("want hf://owner/repo/file.gguf")
		}
		name, rev, _ := strings.Cut(parts[1], "@") // hf://owner/repo@rev/file
		r.Repo, r.Revision = parts[0]+"/"+name, rev
		if len(parts) == 3 {
			r.File = parts[2]
		}
	case strings.HasPrefix(s, "https://") || strings.HasPrefix(s, "http://"):
		u, err := url.Parse(s)
		if err != nil {
			return bad(err.Error())
		}
		parts := strings.SplitN(strings.Trim(u.Path, "/"), "/", 5)
		if len(parts) < 2 {
			return bad("want https://HOST/owner/repo/resolve/REVISION/file.gguf")
		}
		r.Repo = parts[0] + "/" + parts[1]
		if len(parts) == 5 && (parts[2] == "resolve" || parts[2] == "blob") {
			r.Revision, r.File = parts[3], parts[4]
		} else if len(parts) != 2 {
			return bad("want https://HOST/owner/repo/resolve/REVISION/file.gguf")
		}
	default:
		rest, rev := cutRevision(s)
		r.Revision = rev
		repo, spec, _ := strings.Cut(rest, ":")
		r.Repo = repo
		if isFileName(spec) {
			r.File = spec
		} else if spec != "" {
			r.Tag = spec
		}
	}
	if !repoRe.MatchString(r.Repo) {
		return bad("the repository must be owner/name")
	}
	if r.Revision == "" {
		r.Revision = "main"
	}
	if strings.ContainsAny(r.Revision, "/?#") && !strings.HasPrefix(r.Revision, "refs/") {
		return bad("bad revision " + r.Revision)
	}
	if r.File != "" {
		clean := path.Clean(r.File)
		if clean != r.File || strings.HasPrefix(clean, "../") || clean == ".." || strings.HasPrefix(clean, "/") {
			return bad("the file path must be relative and clean")
		}
	}
	if r.Tag != "" && !tagRe.MatchString(r.Tag) {
		return bad("bad quantization tag " + r.Tag)
	}
	return r, nil
}

func cutRevision(s string) (string, string) {
	if i := strings.LastIndex(s, "@"); i > 0 {
		return s[:i], s[i+1:]
	}
	return s, ""
}

func isFileName(spec string) bool {
	return strings.HasSuffix(strings.ToLower(spec), ".gguf") || strings.Contains(spec, "/")
}

// LooksLikeRef reports whether a --model value is meant as a hub
// reference rather than a local path. Callers check for a local file
// first; this only tells a reference from a missing file's path.
func LooksLikeRef(s string) bool {
	if strings.HasPrefix(s, "hf://") || strings.HasPrefix(s, "https://huggingface.co/") {
		return true
	}
	if strings.HasPrefix(s, "/") || strings.HasPrefix(s, ".") || strings.HasPrefix(s, "~") {
		return false
	}
	rest, _ := cutRevision(s)
	repo, spec, hasSpec := strings.Cut(rest, ":")
	if !repoRe.MatchString(repo) {
		return false
	}
	if !hasSpec {
		// "dir/model.gguf" is a missing local file, not a repository.
		low := strings.ToLower(repo)
		return !strings.HasSuffix(low, ".gguf") && !strings.HasSuffix(low, ".bin")
	}
	return spec != ""
}
