package kvcache

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestExportImportRoundTrip: a retained sealed page exported as raw bytes
// (from the device, and from its sealed host copy: the same bytes) and
// imported into another table of the same tenant reads exactly as written;
// exports for another tenant and imports of the wrong size are refused.
func TestExportImportRoundTrip(t *testing.T) {
	for _, comp := range []string{"none", "zstd"} {
		t.Run(comp, func(t *testing.T) {
			p := newPool(t, 8, func(c *Config) {
				c.HostTierBytes, c.Compression, c.Sealer = 1<<20, comp, newKeyring(t, 4)
			})
			ps := p.geo.PageSize
			w := writer{req: 1, tenant: 3}
			a := p.NewTable(1, "a")
			require.NoError(t, a.Reserve(ps))
			writeTokens(t, a, w, ps)
			ref := a.Refs()[0]
			require.NoError(t, p.Retain(ref, "a"))
			require.NoError(t, a.Release())

			raw, err := p.ExportPage(ref, "a")
			require.NoError(t, err)
			require.Len(t, raw, p.packedLen(ps))
			_, err = p.ExportPage(ref, "b")
			require.ErrorIs(t, err, ErrIsolation)

			h, err := p.OffloadRetained(ref, "a")
			require.NoError(t, err)
			require.NoError(t, h.Wait())
			fromHost, err := p.ExportHost(h)
			require.NoError(t, err)
			require.Equal(t, raw, fromHost)
			h.Discard()
			require.NoError(t, p.Drop(ref, LeasePrefix))

			b := p.NewTable(2, "a")
			_, err = p.ImportPage(b, raw[:len(raw)-1])
			require.ErrorIs(t, err, ErrOutOfRange)
			got, err := p.ImportPage(b, raw)
			require.NoError(t, err)
			info, err := p.Info(got)
			require.NoError(t, err)
			require.Equal(t, PageSealed, info.State)
			checkTokens(t, b, 0, ps, w)
			require.NoError(t, b.Release())
			p.DropRaw(raw)
			p.DropRaw(fromHost)
			checkConsistent(t, p)
			require.Equal(t, 8, p.FreePages())
		})
	}
}
