// Package kvcache owns the KV page pool: the device arena that holds every
// sequence's keys and values, the metadata that says who may touch each page,
// and every transition of a page's life (alloc, write, seal, share, lease,
// release, scrub, quarantine, offload to and restore from the host tier).
//
// A page holds PageSize token slots of every layer, a plane of K rows and
// a plane of V rows per layer (Geometry). A K-only geometry (KOnly, for
// latent attention, whose one row per token serves as key and value) has
// the K plane alone: PageBytes, copies, checksums, scrubs and host-tier
// packing all follow Geometry.Runs, and such a pool takes no V row, so it
// uses half the memory of the two-plane layout and nothing is allocated
// that is never written.
//
// It enforces the isolation contract of docs/ISOLATION.md (invariants 3-7 and 10):
//
//   - Every page carries an owner (RequestID), a tenant, a generation bumped
//     on every allocation and a written-slot count. A PageRef is
//     {Index, Gen}; a ref whose generation no longer matches is an error,
//     never a read.
//   - Reads are bounded by writes: PageTable.Written, not Reserved, decides
//     the attention span, and ValidateTable checks owner, tenant, generation
//     and written counts before every step. A failed check quarantines the
//     page for good and counts an isolation violation.
//   - Anything that touches a page holds a lease (step, copy, prefix).
//     Releasing a leased page parks it in "releasing"; it is scrubbed (if
//     ZeroOnRelease or Poison) and freed only when the last lease drops.
//     Pages released together are scrubbed in one backend call and stay
//     "scrubbing", off the free list, until it is done (scrub.go).
//   - Handoffs (prefill to decode, host tier to device, prefix cache to a new
//     request) check written counts against expectations and verify sealed
//     page checksums.
//   - Asynchronous copy completions carry (page, generation), so a stale
//     completion is refused rather than consumed.
//
// RequestIDs are never reused: they come from the engine's monotonic 64-bit
// counter, and the pool refuses RequestID 0 so a zero value cannot pass for
// a real owner.
//
// A Pool is safe for concurrent use. A PageTable belongs to one sequence and
// is used by one goroutine at a time.
package kvcache
