package engine

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
)

// Errors of LoadState.
var (
	// ErrStateInvalid: the bytes are not a saved state of this format, or
	// were cut short or altered after SaveState sealed them.
	ErrStateInvalid = errors.New("invalid saved state")
	// ErrStateModel: the state was saved by an engine running another
	// model. It is never loaded.
	ErrStateModel = errors.New("saved state is from another model")
)

// A saved state is a sequence's tokens sealed to the model:
//
//	magic "KVWSTATE" | version u32 | token count u32 | model fingerprint [32]
//	| tokens (u32 each) | HMAC-SHA256 [32]
//
// all little-endian, the MAC keyed with the fingerprint over everything
// before it. It holds no KV: a sequence continued from it gets its KV from
// the tenant's prefix cache when the pages are still there (the same
// engine, soon after), and is prefilled again otherwise. That keeps
// isolation simple (no KV crosses a tenant or a process) at the price of
// a prefill; the outputs are the same either way.
const (
	stateMagic   = "KVWSTATE"
	stateVersion = 1
	stateHeader  = len(stateMagic) + 4 + 4 + sha256.Size
	// MaxStateTokens bounds the tokens of one saved state.
	MaxStateTokens = 1 << 24
)

// StateSize is the size in bytes of a saved state of n tokens.
func StateSize(n int) int { return stateHeader + 4*n + sha256.Size }

// SaveState seals tokens (a sequence's context: its prompt and generated
// tokens, as Result.PromptTokens and Result.Tokens hold them) to the
// engine's model. Tokens must be in the vocabulary; at least one.
func (e *Engine) SaveState(tokens []int) ([]byte, error) {
	if len(tokens) == 0 {
		return nil, fmt.Errorf("%w: no tokens to save", ErrInvalidParams)
	}
	if len(tokens) > MaxStateTokens {
		return nil, fmt.Errorf("%w: %d tokens, a state holds at most %d", ErrInvalidParams, len(tokens), MaxStateTokens)
	}
	vocab := e.mcfg.Vocab
	fp := e.Fingerprint()
	b := make([]byte, 0, StateSize(len(tokens)))
	b = append(b, stateMagic...)
	b = binary.LittleEndian.AppendUint32(b, stateVersion)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(tokens)))
	b = append(b, fp[:]...)
	for i, t := range tokens {
		if t < 0 || t >= vocab {
			return nil, fmt.Errorf("%w: token %d at position %d is outside the vocabulary of %d", ErrInvalidParams, t, i, vocab)
		}
		b = binary.LittleEndian.AppendUint32(b, uint32(t))
	}
	return append(b, stateMAC(fp, b)...), nil
}

func stateMAC(fp [32]byte, b []byte) []byte {
	m := hmac.New(sha256.New, fp[:])
	m.Write(b)
	return m.Sum(nil)
}

// LoadState checks a state SaveState made and returns its tokens. It fails
// with ErrStateModel for a state of another model (checked first, so the
// message says so rather than "altered"), and ErrStateInvalid for anything
// else that is not a state this engine sealed.
func (e *Engine) LoadState(b []byte) ([]int, error) {
	if len(b) < stateHeader+sha256.Size || string(b[:len(stateMagic)]) != stateMagic {
		return nil, fmt.Errorf("%w: not a kvwarden state (%d bytes)", ErrStateInvalid, len(b))
	}
	off := len(stateMagic)
	if v := binary.LittleEndian.Uint32(b[off:]); v != stateVersion {
		return nil, fmt.Errorf("%w: state format version %d, this kvwarden reads %d", ErrStateInvalid, v, stateVersion)
	}
	n := int(binary.LittleEndian.Uint32(b[off+4:]))
	if n == 0 || n > MaxStateTokens || len(b) != StateSize(n) {
		return nil, fmt.Errorf("%w: %d bytes do not hold the %d tokens the header announces", ErrStateInvalid, len(b), n)
	}
	fp := e.Fingerprint()
	if got := b[off+8 : stateHeader]; !bytes.Equal(got, fp[:]) {
		return nil, fmt.Errorf("%w: it was saved with model %s…, this engine runs %s…", ErrStateModel,
			hex.EncodeToString(got[:6]), hex.EncodeToString(fp[:6]))
	}
	body := b[:len(b)-sha256.Size]
	if !hmac.Equal(b[len(body):], stateMAC(fp, body)) {
		return nil, fmt.Errorf("%w: its seal does not match (altered or damaged)", ErrStateInvalid)
	}
	tokens := make([]int, n)
	vocab := e.mcfg.Vocab
	for i := range tokens {
		t := int(binary.LittleEndian.Uint32(body[stateHeader+4*i:]))
		if t >= vocab { // sealed by this model: only a forged seal gets here
			return nil, fmt.Errorf("%w: token %d at position %d is outside the vocabulary of %d", ErrStateInvalid, t, i, vocab)
		}
		tokens[i] = t
	}
	return tokens, nil
}
