package kvseal

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/require"
)

func fp(s string) func() []byte { return func() []byte { return []byte(s) } }

func testKey(b byte) []byte { return bytes.Repeat([]byte{b}, KeySize) }

func TestSealOpenBindings(t *testing.T) {
	k, err := New(testKey(1), fp("model-a"))
	require.NoError(t, err)
	defer k.Close()
	plain := bytes.Repeat([]byte("kv page bytes "), 100)
	sealed, err := k.Seal(nil, "alice", []byte("slot 3 gen 7"), plain)
	require.NoError(t, err)
	require.Len(t, sealed, len(plain)+Overhead)
	require.False(t, bytes.Contains(sealed, []byte("kv page bytes")))

	got, err := k.Open(nil, "alice", []byte("slot 3 gen 7"), sealed)
	require.NoError(t, err)
	require.Equal(t, plain, got)

	other, err := New(testKey(2), fp("model-a"))
	require.NoError(t, err)
	defer other.Close()
	otherModel, err := New(testKey(1), fp("model-b"))
	require.NoError(t, err)
	defer otherModel.Close()
	for _, tc := range []struct {
		name   string
		k      *Keyring
		tenant string
		ad     string
	}{
		{"another tenant", k, "bob", "slot 3 gen 7"},
		{"another slot", k, "alice", "slot 4 gen 7"},
		{"another generation", k, "alice", "slot 3 gen 8"},
		{"another master key", other, "alice", "slot 3 gen 7"},
		{"another model", otherModel, "alice", "slot 3 gen 7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.k.Open(nil, tc.tenant, []byte(tc.ad), sealed)
			require.ErrorIs(t, err, ErrOpen)
		})
	}
}

func TestFlipAnyByteFails(t *testing.T) {
	k, err := New(testKey(1), fp("m"))
	require.NoError(t, err)
	defer k.Close()
	sealed, err := k.Seal(nil, "t", []byte("id"), []byte("sixteen byte msg and more"))
	require.NoError(t, err)
	for i := range sealed {
		b := bytes.Clone(sealed)
		b[i] ^= 0x01
		_, err := k.Open(nil, "t", []byte("id"), b)
		require.ErrorIs(t, err, ErrOpen, "byte %d", i)
	}
	_, err = k.Open(nil, "t", []byte("id"), sealed[:len(sealed)-1])
	require.ErrorIs(t, err, ErrOpen)
	_, err = k.Open(nil, "t", []byte("id"), sealed[:3])
	require.ErrorIs(t, err, ErrOpen)
}

func TestEraseMakesOldPagesUnreadable(t *testing.T) {
	k, err := New(testKey(1), fp("m"))
	require.NoError(t, err)
	defer k.Close()
	a, err := k.Seal(nil, "alice", nil, []byte("alice's page"))
	require.NoError(t, err)
	b, err := k.Seal(nil, "bob", nil, []byte("bob's page"))
	require.NoError(t, err)
	ep, err := k.Erase("alice")
	require.NoError(t, err)
	require.Equal(t, uint64(2), ep)
	_, err = k.Open(nil, "alice", nil, a)
	require.ErrorIs(t, err, ErrOpen)
	got, err := k.Open(nil, "bob", nil, b)
	require.NoError(t, err)
	require.Equal(t, "bob's page", string(got))

	// A page sealed under the old epoch stays unreadable even when the
	// epoch number is forged to the current one: the salt changed.
	forged := bytes.Clone(a)
	forged[1] = 2
	_, err = k.Open(nil, "alice", nil, forged)
	require.ErrorIs(t, err, ErrOpen)

	a2, err := k.Seal(nil, "alice", nil, []byte("new page"))
	require.NoError(t, err)
	got, err = k.Open(nil, "alice", nil, a2)
	require.NoError(t, err)
	require.Equal(t, "new page", string(got))
}

func TestPersistedEpochsReopen(t *testing.T) {
	k1, err := New(testKey(9), fp("m"))
	require.NoError(t, err)
	sealed, err := k1.Seal(nil, "alice", []byte("x"), []byte("persisted"))
	require.NoError(t, err)
	eps := k1.Epochs()
	k1.Close()

	k2, err := New(testKey(9), fp("m"))
	require.NoError(t, err)
	defer k2.Close()
	_, err = k2.Open(nil, "alice", []byte("x"), sealed)
	require.ErrorIs(t, err, ErrOpen, "a fresh salt cannot open it")
	require.NoError(t, k2.SetEpoch("alice", eps["alice"]))
	got, err := k2.Open(nil, "alice", []byte("x"), sealed)
	require.NoError(t, err)
	require.Equal(t, "persisted", string(got))
}

func TestCloseZeroes(t *testing.T) {
	k, err := New(testKey(5), fp("m"))
	require.NoError(t, err)
	_, err = k.Seal(nil, "t", nil, []byte("x"))
	require.NoError(t, err)
	tk := k.tenants["t"]
	k.Close()
	require.Equal(t, [KeySize]byte{}, k.master)
	require.Equal(t, [KeySize]byte{}, tk.key)
	_, err = k.Seal(nil, "t", nil, []byte("x"))
	require.ErrorIs(t, err, ErrClosed)
	require.NotContains(t, k.String(), "05")
}

func TestReadKeyFile(t *testing.T) {
	dir := t.TempDir()
	raw := filepath.Join(dir, "raw")
	require.NoError(t, os.WriteFile(raw, testKey(7), 0o600))
	hexf := filepath.Join(dir, "hex")
	require.NoError(t, os.WriteFile(hexf, []byte("07070707070707070707070707070707070707070707070707070707070707\x30\x37\n"), 0o600))
	short := filepath.Join(dir, "short")
	require.NoError(t, os.WriteFile(short, []byte("secret-but-short"), 0o600))
	for _, tc := range []struct {
		name, path string
		ok         bool
	}{{"raw", raw, true}, {"hex", hexf, true}, {"short", short, false}, {"missing", filepath.Join(dir, "none"), false}} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := ReadKeyFile(tc.path)
			if !tc.ok {
				require.ErrorIs(t, err, ErrKey)
				require.NotContains(t, err.Error(), "secret")
				return
			}
			require.NoError(t, err)
			require.Equal(t, testKey(7), k)
		})
	}
}

// TestCiphertextIncompressible: a sealed page of a very regular plaintext
// has no structure a compressor finds.
func TestCiphertextIncompressible(t *testing.T) {
	k, err := New(testKey(3), fp("m"))
	require.NoError(t, err)
	defer k.Close()
	plain := make([]byte, 64<<10)
	sealed, err := k.Seal(nil, "t", nil, plain)
	require.NoError(t, err)
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedBestCompression))
	require.NoError(t, err)
	defer enc.Close()
	require.Less(t, len(enc.EncodeAll(plain, nil)), 1000)
	require.GreaterOrEqual(t, len(enc.EncodeAll(sealed, nil)), len(sealed))
}

// TestSealInPlace: the in-place form is the same format as Seal's (Open
// reads it, with the same bindings), uses the caller's memory, and refuses
// a buffer without room for the header or the tag.
func TestSealInPlace(t *testing.T) {
	k, err := New(testKey(1), fp("m"))
	require.NoError(t, err)
	defer k.Close()
	plain := bytes.Repeat([]byte("page "), 200)
	buf := make([]byte, HeaderSize+len(plain), HeaderSize+len(plain)+TagSize)
	copy(buf[HeaderSize:], plain)
	sealed, err := k.SealInPlace(buf, "t", []byte("id"))
	require.NoError(t, err)
	require.Len(t, sealed, len(plain)+Overhead)
	require.Same(t, &buf[0], &sealed[0], "sealed where it was")
	require.False(t, bytes.Contains(sealed, []byte("page page")))
	got, err := k.Open(nil, "t", []byte("id"), sealed)
	require.NoError(t, err)
	require.Equal(t, plain, got)
	_, err = k.Open(nil, "u", []byte("id"), sealed)
	require.ErrorIs(t, err, ErrOpen)

	for _, b := range [][]byte{make([]byte, 10, 100), make([]byte, HeaderSize+8)} {
		_, err := k.SealInPlace(b, "t", nil)
		require.Error(t, err)
	}
}
