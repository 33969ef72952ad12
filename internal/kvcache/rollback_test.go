package kvcache

import (
	"fmt"
	"testing"

	"github.com/kvwarden/kvwarden/internal/device"

	"github.com/stretchr/testify/require"
)

// writeTentative writes n tokens' K/V past the written count without
// advancing, as a forward step writes speculative draft tokens.
func writeTentative(tb testing.TB, t *PageTable, w writer, n int) {
	tb.Helper()
	g := t.pool.geo
	for pos := t.Written(); pos < t.Written()+n; pos++ {
		for l := range g.Layers {
			k, v := rows(g, w, pos, l)
			require.NoError(tb, t.WriteKV(pos, l, k, v))
		}
	}
}

// slotFloats is the K and V values of slot in every layer of page idx.
func slotFloats(p *Pool, idx uint32, slot int) []float32 {
	page := pageFloats(p, idx)
	base := p.geo.KOffset(idx, 0, 0)
	var out []float32
	for l := range p.geo.Layers {
		for _, off := range []int{p.geo.KOffset(idx, l, slot), p.geo.VOffset(idx, l, slot)}[:p.geo.Planes()] {
			f := (off - base) / p.geo.RowUnits() * p.geo.KVDim() // rows of a decoded page
			out = append(out, page[f:f+p.geo.KVDim()]...)
		}
	}
	return out
}

func TestRollbackDropsTentativeWrites(t *testing.T) {
	ps := smallGeo().PageSize
	for _, tc := range []struct {
		name      string
		mod       func(*Config)
		scrubbed  func([]float32) bool
		scrubTail bool
	}{
		{"zero", func(c *Config) { c.ZeroOnRelease = true }, allZero, true},
		{"poison", func(c *Config) { c.Poison = true }, allNaN, true},
		{"no scrub", nil, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPool(t, 4, tc.mod)
			a := p.NewTable(1, "a")
			w := writer{1, 1, 1}
			// 2 verified tokens, then 5 drafts reaching into a second page;
			// 1 draft accepted: written ends at 3, inside page 0.
			require.NoError(t, a.Reserve(2))
			writeTokens(t, a, w, 2)
			require.NoError(t, a.Reserve(2+5))
			require.Equal(t, 2, a.Len())
			writeTentative(t, a, w, 5)
			pages := a.Pages()
			require.NoError(t, a.Advance(1))
			require.NoError(t, a.Rollback())

			require.Equal(t, 3, a.Written())
			require.Equal(t, 1, a.Len(), "the page of rejected drafts only is released")
			st := p.Stats()
			require.Equal(t, 3, st.Free)
			require.Equal(t, 1, st.Owned)
			checkTokens(t, a, 0, 3, w)
			if tc.scrubbed != nil {
				require.True(t, tc.scrubbed(pageFloats(p, pages[1])), "released page scrubbed")
			}
			for slot := 3; slot < ps; slot++ {
				tail := slotFloats(p, pages[0], slot)
				if tc.scrubTail {
					require.True(t, tc.scrubbed(tail), "slot %d of the rejected tail scrubbed", slot)
				}
			}
			for slot := range 3 {
				require.False(t, allZero(slotFloats(p, pages[0], slot)) || allNaN(slotFloats(p, pages[0], slot)), "written slot %d intact", slot)
			}
			// Decoding goes on from the rolled-back count: the slots are
			// writable again and seal the page as usual.
			require.NoError(t, a.Reserve(ps+1))
			writeTokens(t, a, writer{1, 1, 2}, ps-2)
			require.Equal(t, ps+1, a.Written())
			checkTokens(t, a, 0, 3, w)
			require.NoError(t, a.Release())
			checkConsistent(t, p)
		})
	}
}

func TestRollbackAtPageBoundaryAndMisuse(t *testing.T) {
	ps := smallGeo().PageSize
	p := newPool(t, 4, func(c *Config) { c.ZeroOnRelease = true })
	a := p.NewTable(1, "a")
	require.NoError(t, a.Reserve(ps+3))
	writeTokens(t, a, writer{1, 1, 1}, ps)
	writeTentative(t, a, writer{1, 1, 1}, 3)
	require.NoError(t, a.Rollback())
	require.Equal(t, 1, a.Len())
	require.Equal(t, 3, p.FreePages())
	// Nothing tentative: a no-op.
	require.NoError(t, a.Rollback())
	require.Equal(t, 1, a.Len())
	require.NoError(t, a.Release())
	require.ErrorIs(t, a.Rollback(), ErrTableReleased)
	checkConsistent(t, p)
}

// Rows whose byte length is not a multiple of 4 (one q4_0 block of 18
// bytes, one q8_0 block of 34, three f16 values) put the rejected tail on
// any even byte: Rollback scrubs exactly it, leaving the written slots
// before it and the rows after it (the next layer's, V after K) intact.
func TestRollbackOddRowBytes(t *testing.T) {
	for _, geo := range []Geometry{
		{PageSize: 4, Layers: 2, KVHeads: 1, HeadDim: 32, DType: device.Q4_0},
		{PageSize: 4, Layers: 2, KVHeads: 1, HeadDim: 32, DType: device.Q8_0},
		{PageSize: 5, Layers: 3, KVHeads: 1, HeadDim: 3, DType: device.F16},
	} {
		for _, sc := range []struct {
			name     string
			mod      func(*Config)
			scrubbed func([]float32) bool
		}{
			{"zero", func(c *Config) { c.ZeroOnRelease = true }, allZero},
			{"poison", func(c *Config) { c.Poison = true }, allNaN},
		} {
			for accepted := range geo.PageSize - 1 {
				t.Run(fmt.Sprintf("%s/%dB/%s/accept%d", geo.DType, geo.RowBytes(), sc.name, accepted), func(t *testing.T) {
					require.NotZero(t, geo.RowBytes()%4, "the case needs a ragged row")
					p := newPool(t, 3, func(c *Config) { c.Geometry = geo; sc.mod(c) })
					a := p.NewTable(1, "a")
					w := writer{1, 1, 1}
					// 1 verified token, then drafts filling the page: the
					// rejected tail starts at slot 1+accepted.
					require.NoError(t, a.Reserve(geo.PageSize))
					writeTokens(t, a, w, 1)
					writeTentative(t, a, w, geo.PageSize-1)
					require.NoError(t, a.Advance(accepted))
					require.NoError(t, a.Rollback())
					page := a.Pages()[0]
					kept := 1 + accepted
					for slot := range geo.PageSize {
						f := slotFloats(p, page, slot)
						if slot < kept {
							require.False(t, allZero(f) || allNaN(f), "written slot %d intact", slot)
						} else {
							require.True(t, sc.scrubbed(f), "rejected slot %d scrubbed", slot)
						}
					}
					checkTokens(t, a, 0, kept, w)
					require.NoError(t, a.Release())
					checkConsistent(t, p)
				})
			}
		}
	}
}
