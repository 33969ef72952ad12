package server

import (
	"bufio"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"strings"
)

// Keys maps API keys to tenants. The tenant of a request comes only from
// its authenticated key (invariant 9), never from the request body.
//
// Keys are stored as SHA-256 digests, so a lookup's timing reveals nothing
// useful about a key's bytes.
type Keys struct {
	tenants map[[32]byte]string
	// short are the lines of keys shorter than RecommendedKeyLen.
	short []int
}

// RecommendedKeyLen is the key length below which `kvwarden serve` warns:
// shorter keys can be guessed (the minimum accepted is 8).
const RecommendedKeyLen = 16

// LoadKeys reads an API key file: one "KEY TENANT" pair per line, separated
// by whitespace; blank lines and lines starting with '#' are ignored. A key
// may appear once; several keys may map to one tenant.
func LoadKeys(path string) (*Keys, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ParseKeys(f, path)
}

// ParseKeys reads the key file format of LoadKeys from r; name is used in
// error messages.
func ParseKeys(r io.Reader, name string) (*Keys, error) {
	return parseKeys(r, name, 2)
}

// LoadAdminKeys reads an operator key file (Options.AdminKeys): one key
// per line, with the rules of LoadKeys otherwise.
func LoadAdminKeys(path string) (*Keys, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ParseAdminKeys(f, path)
}

// ParseAdminKeys reads the operator key file format of LoadAdminKeys from
// r; name is used in error messages.
func ParseAdminKeys(r io.Reader, name string) (*Keys, error) {
	return parseKeys(r, name, 1)
}

// parseKeys reads lines of fields fields: the key, and with 2 its tenant.
func parseKeys(r io.Reader, name string, fields int) (*Keys, error) {
	k := &Keys{tenants: map[[32]byte]string{}}
	sc := bufio.NewScanner(r)
	line := 0
	for sc.Scan() {
		line++
		t := strings.TrimSpace(sc.Text())
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		f := strings.Fields(t)
		switch {
		case fields == 1 && len(f) != 1:
			return nil, fmt.Errorf("%s:%d: want one KEY per line, got %d fields", name, line, len(f))
		case fields == 2 && len(f) != 2:
			return nil, fmt.Errorf("%s:%d: want \"KEY TENANT\", got %d fields", name, line, len(f))
		case fields == 1:
			f = append(f, "operator")
		}
		if len(f[0]) < 8 {
			return nil, fmt.Errorf("%s:%d: key is shorter than 8 characters", name, line)
		}
		if len(f[0]) < RecommendedKeyLen {
			k.short = append(k.short, line)
		}
		if len(f[1]) > 256 {
			return nil, fmt.Errorf("%s:%d: tenant name longer than 256 bytes", name, line)
		}
		h := sha256.Sum256([]byte(f[0]))
		if _, dup := k.tenants[h]; dup {
			return nil, fmt.Errorf("%s:%d: duplicate key", name, line)
		}
		k.tenants[h] = f[1]
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(k.tenants) == 0 {
		return nil, fmt.Errorf("%s: no keys", name)
	}
	return k, nil
}

// Tenant returns the tenant of key.
func (k *Keys) Tenant(key string) (string, bool) {
	t, ok := k.tenants[sha256.Sum256([]byte(key))]
	return t, ok
}

// Len is the number of keys.
func (k *Keys) Len() int { return len(k.tenants) }

// ShortKeyLines are the lines (1-based) of the keys shorter than
// RecommendedKeyLen.
func (k *Keys) ShortKeyLines() []int { return k.short }

// Shares reports whether k and o have a key in common.
func (k *Keys) Shares(o *Keys) bool {
	for h := range o.tenants {
		if _, ok := k.tenants[h]; ok {
			return true
		}
	}
	return false
}
