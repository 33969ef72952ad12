package hub

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestMatchFiles(t *testing.T) {
	names := []string{"a-Q4_K_M.gguf", "a-Q8_0.gguf", "sub/b-Q4_K_M.gguf", "README.md"}
	for _, tc := range []struct {
		pattern string
		want    []string
	}{
		{"*Q8_0.gguf", []string{"a-Q8_0.gguf"}},
		{"*Q4_K_M.gguf", []string{"a-Q4_K_M.gguf", "sub/b-Q4_K_M.gguf"}},
		{"sub/*.gguf", []string{"sub/b-Q4_K_M.gguf"}},
		{"*.bin", nil},
		{"a-Q?_0.gguf", []string{"a-Q8_0.gguf"}},
	} {
		require.Equal(t, tc.want, MatchFiles(tc.pattern, names), tc.pattern)
	}
}

func TestPullByPattern(t *testing.T) {
	h := newFakeHub(t)
	data := blob(5000, 7)
	h.add("owner/repo", "model-Q8_0.gguf", data, false)
	h.add("owner/repo", "model-Q4_K_M.gguf", blob(100, 8), false)
	h.add("owner/repo", "sub/other-Q4_K_M.gguf", blob(100, 9), false)
	c := h.client(t)

	ref, err := c.ResolvePattern(t.Context(), Ref{Repo: "owner/repo", Revision: "main", File: "*Q8_0.gguf"})
	require.NoError(t, err)
	require.Equal(t, "model-Q8_0.gguf", ref.File)
	m, err := c.Pull(t.Context(), ref)
	require.NoError(t, err)
	got, err := os.ReadFile(m.Path)
	require.NoError(t, err)
	require.Equal(t, data, got)

	_, err = c.ResolvePattern(t.Context(), Ref{Repo: "owner/repo", Revision: "main", File: "*Q4_K_M.gguf"})
	require.ErrorIs(t, err, ErrNoMatch)
	require.Contains(t, err.Error(), "2 files")
	_, err = c.ResolvePattern(t.Context(), Ref{Repo: "owner/repo", Revision: "main", File: "*f16.gguf"})
	require.ErrorIs(t, err, ErrNoMatch)
	_, err = c.ResolvePattern(t.Context(), Ref{Repo: "owner/repo", Revision: "main", File: "[.gguf"})
	require.ErrorIs(t, err, ErrBadRef)

	plain := Ref{Repo: "owner/repo", Revision: "main", File: "model-Q8_0.gguf"}
	same, err := c.ResolvePattern(t.Context(), plain)
	require.NoError(t, err)
	require.Equal(t, plain, same)
}
