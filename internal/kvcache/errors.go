package kvcache

import "errors"

// Sentinel errors. Returned errors wrap one or more of these with %w and say
// which page, request and generation were involved. Every error that means
// isolation could have been broken also wraps ErrIsolation, so callers need
// one errors.Is to fail the request with an isolation error.
var (
	ErrIsolation     = errors.New("kvcache: isolation violation")
	ErrStaleRef      = errors.New("kvcache: stale page reference")
	ErrDoubleRelease = errors.New("kvcache: already released")
	ErrSealed        = errors.New("kvcache: page is sealed")
	ErrForeignPage   = errors.New("kvcache: page belongs to another request")
	ErrOutOfRange    = errors.New("kvcache: position out of range")
	ErrNoPages       = errors.New("kvcache: not enough free pages")
	ErrChecksum      = errors.New("kvcache: checksum mismatch")
	ErrReleasing     = errors.New("kvcache: page is being released")
	ErrHostTierFull  = errors.New("kvcache: host tier full")
	ErrClosed        = errors.New("kvcache: pool closed")
	ErrHandoff       = errors.New("kvcache: handoff check failed")
	ErrNotSealed     = errors.New("kvcache: page is not sealed")
	ErrQuarantined   = errors.New("kvcache: page is quarantined")
	ErrTableReleased = errors.New("kvcache: page table released")
	ErrNoHostTier    = errors.New("kvcache: pool has no host tier")
	ErrCopy          = errors.New("kvcache: copy failed")
	ErrConfig        = errors.New("kvcache: invalid configuration")
	ErrNoLease       = errors.New("kvcache: lease not held")
	ErrInFlight      = errors.New("kvcache: host-tier copy still in flight")
	ErrSwapping      = errors.New("kvcache: page table is being swapped out")
	// ErrSealOpen is a host copy whose authentication tag failed (a
	// damaged byte, or its tenant's key was erased): a miss, never data,
	// and not an isolation incident (nothing was read).
	ErrSealOpen = errors.New("kvcache: host copy failed its authentication tag")
)

// errBadCopy marks a host copy that failed its checksum in host memory: the
// copy is bad, the device page it was meant for is not.
var errBadCopy = errors.New("kvcache: host copy corrupted")

// ErrPageFull is ErrOutOfRange under the name a writer looks for: a write
// past a page's end is a write past the reservation.
var ErrPageFull = ErrOutOfRange
