// Package kvseal seals KV pages that leave the device pool (host tier, disk
// tier): AES-256-GCM under a per-tenant key derived with HKDF-SHA256 from
// one master key, with additional data that binds the model fingerprint,
// the tenant, the tenant's key epoch and whatever identity the caller
// gives the page (its slot, generation, prefix-chain position). A sealed
// page opened under any other binding fails its tag, and a failed tag is
// only ever a miss for the caller (ErrOpen), never data.
//
// Crypto-erase: each tenant's key is derived with a random salt of its
// own, its epoch. Erase replaces the salt; every page sealed before is
// unreadable from then on, since nothing can derive its key any more
// without the old salt. The salts are kept in memory only, unless the
// caller persists them (Salts/SetSalts: the disk tier does, so that its
// pages outlive a restart with the same master key).
package kvseal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
)

// KeySize is the size of the master key in bytes.
const KeySize = 32

// SaltSize is the size of a tenant's epoch salt.
const SaltSize = 16

// Overhead is what Seal adds to a plaintext: the header and the GCM tag.
const Overhead = headerSize + TagSize

// HeaderSize is the sealed form's header (SealInPlace's room before the
// plaintext), TagSize its trailer.
const (
	HeaderSize = headerSize
	TagSize    = 16
)

const (
	version    = 1
	headerSize = 1 + 8 + 12 // version, epoch, nonce
	info       = "kvwarden kv page key v1"
)

var (
	// ErrOpen is a sealed page that did not open: wrong key (another
	// tenant, an erased epoch, another master key), another binding
	// (model, slot, generation), or a damaged byte. Callers treat it as a
	// miss.
	ErrOpen = errors.New("kvseal: sealed page failed authentication")
	// ErrKey is a bad master key or key file.
	ErrKey = errors.New("kvseal: bad master key")
	// ErrClosed is a use after Close.
	ErrClosed = errors.New("kvseal: keyring closed")
)

// tenantKey is one tenant's state: its epoch (a counter, so a page names
// which epoch sealed it and a stale one fails fast), the salt that epoch's
// key is derived with, and the derived key's cipher.
type tenantKey struct {
	epoch uint64
	salt  [SaltSize]byte
	key   [KeySize]byte // zeroed on Erase and Close
	aead  cipher.AEAD
}

// Keyring derives and caches per-tenant keys from a master key. It is safe
// for concurrent use.
type Keyring struct {
	mu      sync.RWMutex
	master  [KeySize]byte
	fp      []byte        // model fingerprint, bound into every page
	fpFunc  func() []byte // computes fp on first use
	fpOnce  sync.Once
	tenants map[string]*tenantKey
	closed  bool
	store   EpochStore // persists epochs (disk tier); nil: memory only
	// macKey names things on disk (MAC): derived from the master key,
	// fixed from New to Close.
	macKey [KeySize]byte
}

// EpochStore persists tenants' epochs, so that pages sealed before a
// restart (disk tier) open after it with the same master key, and an
// erasure outlives the process.
type EpochStore interface {
	// Load returns tenant's persisted epoch, if any.
	Load(tenant string) (Epoch, bool)
	// Save persists tenant's epoch durably before it returns.
	Save(tenant string, e Epoch) error
}

// New is a keyring over master (KeySize bytes; copied, so the caller may
// zero its own copy). fingerprint is called once, on the first seal or
// open, for the model fingerprint every page is bound to.
func New(master []byte, fingerprint func() []byte) (*Keyring, error) {
	if len(master) != KeySize {
		return nil, fmt.Errorf("%w: %d bytes, want %d", ErrKey, len(master), KeySize)
	}
	k := &Keyring{fpFunc: fingerprint, tenants: map[string]*tenantKey{}}
	copy(k.master[:], master)
	mk, err := hkdf.Key(sha256.New, k.master[:], nil, "kvwarden names v1", KeySize)
	if err != nil {
		return nil, fmt.Errorf("kvseal: deriving the naming key: %w", err)
	}
	copy(k.macKey[:], mk)
	clear(mk)
	return k, nil
}

// MAC is HMAC-SHA256 under a key derived from the master key, over the
// parts (each length-prefixed): names of things on disk that must not
// reveal their tenant or content, and that another master key does not
// find.
func (k *Keyring) MAC(parts ...[]byte) [32]byte {
	m := hmac.New(sha256.New, k.macKey[:])
	var n [8]byte
	for _, p := range parts {
		binary.LittleEndian.PutUint64(n[:], uint64(len(p)))
		m.Write(n[:])
		m.Write(p)
	}
	var out [32]byte
	m.Sum(out[:0])
	return out
}

// SetEpochStore makes the keyring load each tenant's epoch from s on
// first use, and save every new or erased epoch to it. Call it before the
// first seal.
func (k *Keyring) SetEpochStore(s EpochStore) {
	k.mu.Lock()
	k.store = s
	k.mu.Unlock()
}

// NewRandom is a keyring over a fresh random master key: what is sealed
// with it is readable by this process only.
func NewRandom(fingerprint func() []byte) (*Keyring, error) {
	var m [KeySize]byte
	if _, err := rand.Read(m[:]); err != nil {
		return nil, fmt.Errorf("kvseal: random master key: %w", err)
	}
	k, err := New(m[:], fingerprint)
	clear(m[:])
	return k, err
}

// ReadKeyFile reads a master key: a file of exactly 32 bytes, or 64 hex
// digits (with an optional trailing newline). The error never includes
// the file's content.
func ReadKeyFile(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: key file: %w", ErrKey, err)
	}
	defer clear(b)
	if len(b) == KeySize {
		return append([]byte(nil), b...), nil
	}
	s := strings.TrimRight(string(b), "\r\n")
	if len(s) == 2*KeySize {
		k, err := hex.DecodeString(s)
		if err == nil {
			return k, nil
		}
	}
	return nil, fmt.Errorf("%w: key file %s holds %d bytes; want %d raw bytes or %d hex digits",
		ErrKey, path, len(b), KeySize, 2*KeySize)
}

// SetFingerprint sets the function that computes the model fingerprint,
// for a keyring made before its model was known. It must be called before
// the first Seal or Open.
func (k *Keyring) SetFingerprint(f func() []byte) {
	k.mu.Lock()
	k.fpFunc = f
	k.mu.Unlock()
}

// CheckKeyFile reports whether path holds a usable master key, without
// keeping it.
func CheckKeyFile(path string) error {
	k, err := ReadKeyFile(path)
	clear(k)
	return err
}

// fingerprint is the model fingerprint, computed once.
func (k *Keyring) fingerprint() []byte {
	k.fpOnce.Do(func() {
		if k.fpFunc != nil {
			k.fp = k.fpFunc()
		}
	})
	return k.fp
}

// tenantLocked returns tenant's key, deriving it (and drawing its first
// salt) on first use. k.mu is held for writing.
func (k *Keyring) tenantLocked(tenant string) (*tenantKey, error) {
	if tk := k.tenants[tenant]; tk != nil && tk.aead != nil {
		return tk, nil
	}
	tk := k.tenants[tenant]
	if tk == nil && k.store != nil {
		if e, ok := k.store.Load(tenant); ok {
			tk = &tenantKey{epoch: e.Epoch, salt: e.Salt}
			k.tenants[tenant] = tk
		}
	}
	if tk == nil {
		tk = &tenantKey{epoch: 1}
		if _, err := rand.Read(tk.salt[:]); err != nil {
			return nil, fmt.Errorf("kvseal: random salt: %w", err)
		}
		if k.store != nil {
			// Unsaved, pages sealed now only fail to open after a restart.
			if err := k.store.Save(tenant, Epoch{tk.epoch, tk.salt}); err != nil {
				return nil, fmt.Errorf("kvseal: saving tenant epoch: %w", err)
			}
		}
		k.tenants[tenant] = tk
	}
	if err := k.deriveLocked(tenant, tk); err != nil {
		return nil, err
	}
	return tk, nil
}

func (k *Keyring) deriveLocked(tenant string, tk *tenantKey) error {
	var in []byte
	in = append(in, info...)
	in = binary.LittleEndian.AppendUint64(in, uint64(len(tenant)))
	in = append(in, tenant...)
	in = binary.LittleEndian.AppendUint64(in, tk.epoch)
	key, err := hkdf.Key(sha256.New, k.master[:], tk.salt[:], string(in), KeySize)
	if err != nil {
		return fmt.Errorf("kvseal: deriving a tenant key: %w", err)
	}
	copy(tk.key[:], key)
	clear(key)
	block, err := aes.NewCipher(tk.key[:])
	if err != nil {
		return fmt.Errorf("kvseal: %w", err)
	}
	if tk.aead, err = cipher.NewGCM(block); err != nil {
		return fmt.Errorf("kvseal: %w", err)
	}
	return nil
}

func (k *Keyring) get(tenant string) (*tenantKey, error) {
	k.mu.RLock()
	if k.closed {
		k.mu.RUnlock()
		return nil, ErrClosed
	}
	tk := k.tenants[tenant]
	if tk != nil && tk.aead != nil {
		k.mu.RUnlock()
		return tk, nil
	}
	k.mu.RUnlock()
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		return nil, ErrClosed
	}
	return k.tenantLocked(tenant)
}

// additional is the additional data of one page: everything it is bound to.
func (k *Keyring) additional(dst []byte, hdr []byte, tenant string, ad []byte) []byte {
	fp := k.fingerprint()
	dst = append(dst, "kvwarden sealed page v1"...)
	dst = append(dst, hdr...)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(len(fp)))
	dst = append(dst, fp...)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(len(tenant)))
	dst = append(dst, tenant...)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(len(ad)))
	return append(dst, ad...)
}

// Seal appends to dst the sealed form of plain under tenant's current key,
// bound to ad (the page's identity) and the model fingerprint. The nonce
// is random (96 bits): a tenant key should seal well under 2^32 pages
// before its tenant is erased or the master key changes.
func (k *Keyring) Seal(dst []byte, tenant string, ad, plain []byte) ([]byte, error) {
	tk, err := k.get(tenant)
	if err != nil {
		return nil, err
	}
	// The epoch is read with the key: Erase swaps the whole record, so a
	// seal racing an erase uses one epoch's salt and number consistently.
	var hdr [headerSize]byte
	hdr[0] = version
	binary.LittleEndian.PutUint64(hdr[1:9], tk.epoch)
	if _, err := rand.Read(hdr[9:]); err != nil {
		return nil, fmt.Errorf("kvseal: nonce: %w", err)
	}
	out := append(dst, hdr[:]...)
	adb := k.additional(make([]byte, 0, 128+len(ad)), hdr[:], tenant, ad)
	return tk.aead.Seal(out, hdr[9:], plain, adb), nil
}

// SealInPlace is Seal without a copy: buf holds HeaderSize bytes of room
// and then the plaintext, and has TagSize bytes of spare capacity; the
// header is written into the room, the plaintext encrypted where it is,
// and the tag appended. It returns the sealed form, buf's own memory.
func (k *Keyring) SealInPlace(buf []byte, tenant string, ad []byte) ([]byte, error) {
	if len(buf) < headerSize || cap(buf)-len(buf) < TagSize {
		return nil, fmt.Errorf("kvseal: SealInPlace needs %d bytes of room and %d of spare capacity", headerSize, TagSize)
	}
	tk, err := k.get(tenant)
	if err != nil {
		return nil, err
	}
	hdr := buf[:headerSize]
	hdr[0] = version
	binary.LittleEndian.PutUint64(hdr[1:9], tk.epoch)
	if _, err := rand.Read(hdr[9:]); err != nil {
		return nil, fmt.Errorf("kvseal: nonce: %w", err)
	}
	adb := k.additional(make([]byte, 0, 128+len(ad)), hdr, tenant, ad)
	out := tk.aead.Seal(buf[headerSize:headerSize], hdr[9:], buf[headerSize:], adb)
	return buf[:headerSize+len(out)], nil
}

// Open appends to dst the plaintext of sealed, checking it was sealed for
// tenant, under its current epoch, with this ad and model. Any mismatch,
// or any damaged byte, is ErrOpen.
func (k *Keyring) Open(dst []byte, tenant string, ad, sealed []byte) ([]byte, error) {
	if len(sealed) < Overhead || sealed[0] != version {
		return nil, fmt.Errorf("%w: malformed (%d bytes)", ErrOpen, len(sealed))
	}
	tk, err := k.get(tenant)
	if err != nil {
		return nil, err
	}
	if binary.LittleEndian.Uint64(sealed[1:9]) != tk.epoch {
		return nil, fmt.Errorf("%w: sealed under another key epoch", ErrOpen)
	}
	hdr := sealed[:headerSize]
	adb := k.additional(make([]byte, 0, 128+len(ad)), hdr, tenant, ad)
	out, err := tk.aead.Open(dst, hdr[9:], sealed[headerSize:], adb)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrOpen, err)
	}
	return out, nil
}

// Erase rotates tenant's key epoch: a fresh salt, so that nothing sealed
// for tenant before can be opened again. The old derived key is zeroed.
// It returns the new epoch.
func (k *Keyring) Erase(tenant string) (uint64, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		return 0, ErrClosed
	}
	old := k.tenants[tenant]
	if old == nil && k.store != nil {
		if e, ok := k.store.Load(tenant); ok {
			old = &tenantKey{epoch: e.Epoch}
		}
	}
	tk := &tenantKey{epoch: 2} // a tenant never used was at epoch 1
	if old != nil {
		tk.epoch = old.epoch + 1
		clear(old.key[:])
		clear(old.salt[:])
		// old.aead keeps its expanded key schedule until collected; the
		// record is dropped from the map, so nothing can reach it.
	}
	if _, err := rand.Read(tk.salt[:]); err != nil {
		return 0, fmt.Errorf("kvseal: random salt: %w", err)
	}
	k.tenants[tenant] = tk
	if k.store != nil {
		if err := k.store.Save(tenant, Epoch{tk.epoch, tk.salt}); err != nil {
			// In memory the old epoch is gone; on disk it is not yet.
			return tk.epoch, fmt.Errorf("kvseal: saving the erased epoch: %w", err)
		}
	}
	return tk.epoch, nil
}

// Epoch is the salt state of one tenant, for persisting (disk tier). The
// salt is not secret without the master key.
type Epoch struct {
	Epoch uint64
	Salt  [SaltSize]byte
}

// Epochs returns every tenant's epoch and salt.
func (k *Keyring) Epochs() map[string]Epoch {
	k.mu.RLock()
	defer k.mu.RUnlock()
	m := make(map[string]Epoch, len(k.tenants))
	for t, tk := range k.tenants {
		m[t] = Epoch{tk.epoch, tk.salt}
	}
	return m
}

// SetEpoch installs a persisted epoch for tenant (before any seal for it).
func (k *Keyring) SetEpoch(tenant string, e Epoch) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		return ErrClosed
	}
	if old := k.tenants[tenant]; old != nil {
		clear(old.key[:])
	}
	k.tenants[tenant] = &tenantKey{epoch: e.Epoch, salt: e.Salt}
	return nil
}

// Close zeroes the master key and every derived key; later seals and
// opens fail with ErrClosed. Idempotent.
func (k *Keyring) Close() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		return
	}
	k.closed = true
	clear(k.master[:])
	clear(k.macKey[:])
	for t, tk := range k.tenants {
		clear(tk.key[:])
		clear(tk.salt[:])
		delete(k.tenants, t) // a seal in flight keeps its cipher; none starts
	}
}

// String never shows key material.
func (k *Keyring) String() string { return "kvseal.Keyring{…}" }
