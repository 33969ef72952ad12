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
}

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
		if len(f) != 2 {
			return nil, fmt.Errorf("%s:%d: want \"KEY TENANT\", got %d fields", name, line, len(f))
		}
		if len(f[0]) < 8 {
			return nil, fmt.Errorf("%s:%d: key is shorter than 8 characters", name, line)
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
