package ml

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestParallelForGuidedCovers requires the guided split to hand out every
// item exactly once, each piece starting on the alignment and (but the
// last) at least the minimum long, whatever the thread count.
func TestParallelForGuidedCovers(t *testing.T) {
	defer SetThreads(0)
	for _, c := range []struct{ total, minChunk, align, threads int }{
		{1, 1, 1, 2},
		{100, 16, 16, 2},
		{2048, 32, 16, 2},
		{5632, 16, 16, 3},
		{32000, 16, 4, 4},
		{77, 16, 4, 2},
		{1000, 1, 1, 8},
		{130, 40, 16, 2}, // minChunk rounds up to the alignment
	} {
		t.Run(fmt.Sprint(c), func(t *testing.T) {
			var mu sync.Mutex
			type piece struct{ lo, hi int }
			var got []piece
			parallelForGuided(c.total, c.minChunk, c.align, c.threads, func(lo, hi int) {
				mu.Lock()
				got = append(got, piece{lo, hi})
				mu.Unlock()
			})
			sort.Slice(got, func(i, j int) bool { return got[i].lo < got[j].lo })
			minc := (c.minChunk + c.align - 1) / c.align * c.align
			at := 0
			for _, p := range got {
				require.Equal(t, at, p.lo, "pieces tile [0,total) without gaps or overlaps")
				require.Zero(t, p.lo%c.align, "piece %v starts on the alignment", p)
				if p.hi != c.total {
					require.GreaterOrEqual(t, p.hi-p.lo, minc, "piece %v is at least the minimum", p)
				}
				at = p.hi
			}
			require.Equal(t, c.total, at)
		})
	}
}

// TestGuidedMatchesEqualChunks requires one-row products split by guided
// self-scheduling to give, bit for bit, what the equal-chunk split gives,
// alone and grouped, for row counts off the kernels' 4- and 16-row groups.
func TestGuidedMatchesEqualChunks(t *testing.T) {
	defer SetThreads(0)
	saved := guidedChunks
	defer func() { guidedChunks = saved }()
	const K = 512
	r := rand.New(rand.NewPCG(3, 30))
	for _, ty := range []Type{Q4_K, Q6_K, Q5_K, Q8_0, Q4_0, IQ4_XS, F16, F32} {
		for _, rows := range []int{300, 333, 1024} {
			w := randMatrix(t, r, ty, rows, K)
			w2 := randMatrix(t, r, ty, rows/3+5, K)
			x := randF32(r, K)
			for _, threads := range []int{2, 3} {
				SetThreads(threads)
				run := func(guided bool) (one, a, b []float32) {
					guidedChunks = guided
					one = make([]float32, rows)
					MatMul(one, x, 1, w)
					a, b = make([]float32, rows), make([]float32, w2.Rows)
					MatMulGroup([][]float32{a, b}, x, 1, []*Matrix{w, w2})
					return one, a, b
				}
				e1, ea, eb := run(false)
				g1, ga, gb := run(true)
				name := fmt.Sprintf("%v rows %d threads %d", ty, rows, threads)
				require.Equal(t, e1, g1, name)
				require.Equal(t, ea, ga, name+" grouped")
				require.Equal(t, eb, gb, name+" grouped, second")
				require.Equal(t, e1, ga, name+" grouped against alone")
			}
		}
	}
}
