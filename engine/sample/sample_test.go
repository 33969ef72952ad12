package sample

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

func params(mod func(*Params)) Params {
	p := Params{Temperature: 1, TopP: 1, RepeatPenalty: 1, RepeatLastN: 64, Seed: 42}
	if mod != nil {
		mod(&p)
	}
	return p
}

// dist runs the penalty and the filters and returns id -> probability.
func dist(p Params, logits []float32, history []int) map[int]float64 {
	s := New(p)
	l := slices.Clone(logits)
	s.penalize(l, history)
	out := map[int]float64{}
	for _, c := range s.distribution(l) {
		if c.p != 0 { // zero-probability tokens (-Inf logits) are never drawn
			out[int(c.id)] = c.p
		}
	}
	return out
}

// softmax of xs/t, for expected values.
func softmax(t float64, xs ...float64) []float64 {
	m := math.Inf(-1)
	for _, x := range xs {
		m = max(m, x)
	}
	var z float64
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = math.Exp((x - m) / t)
		z += out[i]
	}
	for i := range out {
		out[i] /= z
	}
	return out
}

func TestGreedy(t *testing.T) {
	for _, tc := range []struct {
		name    string
		logits  []float32
		history []int
		p       Params
		want    int
	}{
		{"argmax", []float32{1, 3, 2}, nil, Greedy(), 1},
		{"first max wins", []float32{1, 3, 3, 2}, nil, Greedy(), 1},
		{"nan ignored", []float32{float32(math.NaN()), -1, -2}, nil, Greedy(), 1},
		{"all nan", []float32{float32(math.NaN()), float32(math.NaN())}, nil, Greedy(), 0},
		{"negative", []float32{-5, -3, -4}, nil, Greedy(), 1},
		{"penalty changes argmax", []float32{1, 3, 3, 2}, []int{1, 2}, Params{TopP: 1, RepeatPenalty: 2, RepeatLastN: 64}, 3},
		{"penalty window", []float32{1, 3, 3, 2}, []int{1, 2, 0}, Params{TopP: 1, RepeatPenalty: 2, RepeatLastN: 2}, 1},
		{"filters irrelevant", []float32{1, 3, 2}, nil, Params{TopK: 1, TopP: 0.1, MinP: 0.9, RepeatPenalty: 1}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.NoError(t, tc.p.Validate())
			require.Equal(t, tc.want, New(tc.p).Sample(slices.Clone(tc.logits), tc.history))
		})
	}
	require.Equal(t, -1, New(Greedy()).Sample(nil, nil))
}

func TestDistributions(t *testing.T) {
	logits := []float32{1, 2, 3, 4}
	sm := softmax(1, 1, 2, 3, 4)  // 0.032, 0.087, 0.237, 0.644
	sm2 := softmax(2, 1, 2, 3, 4) // temperature 2
	top3 := softmax(1, 2, 3, 4)   // over ids 1..3
	e1 := math.Exp(-1)
	for _, tc := range []struct {
		name    string
		p       Params
		logits  []float32
		history []int
		want    map[int]float64
	}{
		{"plain softmax", params(nil), logits, nil, map[int]float64{0: sm[0], 1: sm[1], 2: sm[2], 3: sm[3]}},
		{"temperature 2", params(func(p *Params) { p.Temperature = 2 }), logits, nil,
			map[int]float64{0: sm2[0], 1: sm2[1], 2: sm2[2], 3: sm2[3]}},
		{"top-k 2", params(func(p *Params) { p.TopK = 2 }), logits, nil, map[int]float64{3: 1 / (1 + e1), 2: e1 / (1 + e1)}},
		{"top-k 1", params(func(p *Params) { p.TopK = 1 }), logits, nil, map[int]float64{3: 1}},
		{"top-k ties by id", params(func(p *Params) { p.TopK = 2 }), []float32{2, 2, 2, 1}, nil, map[int]float64{0: 0.5, 1: 0.5}},
		{"top-k above n", params(func(p *Params) { p.TopK = 10 }), logits, nil, map[int]float64{0: sm[0], 1: sm[1], 2: sm[2], 3: sm[3]}},
		{"top-p 0.6", params(func(p *Params) { p.TopP = 0.6 }), logits, nil, map[int]float64{3: 1}},
		{"top-p 0.7", params(func(p *Params) { p.TopP = 0.7 }), logits, nil,
			map[int]float64{3: sm[3] / (sm[3] + sm[2]), 2: sm[2] / (sm[3] + sm[2])}},
		{"top-p 0.95", params(func(p *Params) { p.TopP = 0.95 }), logits, nil, map[int]float64{
			3: sm[3] / (1 - sm[0]), 2: sm[2] / (1 - sm[0]), 1: sm[1] / (1 - sm[0])}},
		{"min-p 0.2", params(func(p *Params) { p.MinP = 0.2 }), logits, nil, map[int]float64{3: 1 / (1 + e1), 2: e1 / (1 + e1)}},
		{"min-p 0.1", params(func(p *Params) { p.MinP = 0.1 }), logits, nil, map[int]float64{
			3: sm[3] / (1 - sm[0]), 2: sm[2] / (1 - sm[0]), 1: sm[1] / (1 - sm[0])}},
		{"min-p 1 keeps ties", params(func(p *Params) { p.MinP = 1 }), []float32{4, 1, 4}, nil, map[int]float64{0: 0.5, 2: 0.5}},
		{"top-k then top-p", params(func(p *Params) { p.TopK = 3; p.TopP = 0.9 }), logits, nil, map[int]float64{
			3: top3[2] / (top3[2] + top3[1]), 2: top3[1] / (top3[2] + top3[1])}},
		{"temperature before top-p", params(func(p *Params) { p.Temperature = 2; p.TopP = 0.5 }), logits, nil, map[int]float64{
			3: sm2[3] / (sm2[3] + sm2[2]), 2: sm2[2] / (sm2[3] + sm2[2])}},
		{"penalty", params(func(p *Params) { p.RepeatPenalty = 2 }), []float32{2, -1, 0.5, 3}, []int{0, 1, 0, 1}, func() map[int]float64 {
			s := softmax(1, 1, -2, 0.5, 3)
			return map[int]float64{0: s[0], 1: s[1], 2: s[2], 3: s[3]}
		}()},
		{"penalty last n", params(func(p *Params) { p.RepeatPenalty = 2; p.RepeatLastN = 1 }), []float32{2, -1, 0.5, 3}, []int{0, 1}, func() map[int]float64 {
			s := softmax(1, 2, -2, 0.5, 3)
			return map[int]float64{0: s[0], 1: s[1], 2: s[2], 3: s[3]}
		}()},
		{"penalty all history", params(func(p *Params) { p.RepeatPenalty = 0.5; p.RepeatLastN = -1 }), []float32{2, -1, 0.5, 3}, []int{0, 1, 2, 3, 3, 3, 9, -4}, func() map[int]float64 {
			s := softmax(1, 4, -0.5, 1, 6)
			return map[int]float64{0: s[0], 1: s[1], 2: s[2], 3: s[3]}
		}()},
		{"nan is -inf", params(nil), []float32{float32(math.NaN()), 0, 0}, nil, map[int]float64{1: 0.5, 2: 0.5}},
		{"all -inf", params(nil), []float32{float32(math.Inf(-1)), float32(math.Inf(-1))}, nil, map[int]float64{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.NoError(t, tc.p.Validate())
			got := dist(tc.p, tc.logits, tc.history)
			require.Len(t, got, len(tc.want), "%v", got)
			for id, w := range tc.want {
				require.InDelta(t, w, got[id], 1e-12, "id %d in %v", id, got)
			}
		})
	}
}

// refDistribution is the plain definition: full sort, softmax over the top
// k, then top-p and min-p prefixes.
func refDistribution(p Params, logits []float32) map[int]float64 {
	type c struct {
		id int
		l  float32
	}
	cs := make([]c, len(logits))
	for i, l := range logits {
		cs[i] = c{i, l}
	}
	slices.SortStableFunc(cs, func(a, b c) int {
		switch {
		case a.l > b.l:
			return -1
		case a.l < b.l:
			return 1
		}
		return 0
	})
	if p.TopK > 0 && p.TopK < len(cs) {
		cs = cs[:p.TopK]
	}
	pr := make([]float64, len(cs))
	var z float64
	for i, x := range cs {
		pr[i] = math.Exp(float64(x.l-cs[0].l) / float64(p.Temperature))
		z += pr[i]
	}
	keep := len(cs)
	var acc float64
	for i := range cs {
		if pr[i] < float64(p.MinP) {
			keep = i
			break
		}
		acc += pr[i] / z
		if p.TopP < 1 && acc >= float64(p.TopP) {
			keep = i + 1
			break
		}
	}
	var zk float64
	for _, v := range pr[:keep] {
		zk += v
	}
	out := map[int]float64{}
	for i := range keep {
		if pr[i] != 0 {
			out[cs[i].id] = pr[i] / zk
		}
	}
	return out
}

// TestAgainstReference checks the partial-selection and pruning paths
// against the full-sort definition on random logits (with many ties).
func TestAgainstReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	for it := range 400 {
		n := 1 + rng.IntN(3000)
		logits := make([]float32, n)
		for i := range logits {
			logits[i] = float32(math.Round(rng.NormFloat64()*8) / 4) // ties
		}
		p := params(nil)
		p.Temperature = []float32{0.3, 0.7, 1, 1.5}[rng.IntN(4)]
		p.TopK = []int{0, 0, 1, 5, 40, 300, n + 1}[rng.IntN(7)]
		p.TopP = []float32{1, 1, 0.5, 0.9, 0.95, 0.999}[rng.IntN(6)]
		p.MinP = []float32{0, 0, 0.01, 0.05, 0.3}[rng.IntN(5)]
		want := refDistribution(p, logits)
		got := dist(p, logits, nil)
		require.Len(t, got, len(want), "iteration %d %+v", it, p)
		for id, w := range want {
			require.InDelta(t, w, got[id], 1e-9, "iteration %d id %d %+v", it, id, p)
		}
	}
}

func TestQuickselect(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	for range 200 {
		n := 1 + rng.IntN(2000)
		c := make([]cand, n)
		for i := range c {
			c[i] = cand{id: int32(i), logit: float32(rng.IntN(20))}
		}
		want := slices.Clone(c)
		slices.SortFunc(want, cmpCand)
		k := 1 + rng.IntN(n)
		quickselect(c, k)
		got := slices.Clone(c[:k])
		slices.SortFunc(got, cmpCand)
		require.Equal(t, want[:k], got)
	}
}

func TestMassSelect(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	for range 300 {
		n := 1 + rng.IntN(3000)
		c := make([]cand, n)
		var z float64
		for i := range c {
			c[i] = cand{id: int32(i), logit: float32(rng.IntN(40))}
			c[i].p = math.Exp(float64(c[i].logit) / 4)
			z += c[i].p
		}
		sorted := slices.Clone(c)
		slices.SortFunc(sorted, cmpCand)
		target := z * rng.Float64()
		want := n
		var acc float64
		for i, x := range sorted {
			acc += x.p
			if acc >= target {
				want = i + 1
				break
			}
		}
		got := massSelect(c, target)
		// Summation order differs; allow the boundary to move by one.
		require.InDelta(t, want, got, 1, "n %d target %v", n, target)
		prefix := slices.Clone(c[:got])
		slices.SortFunc(prefix, cmpCand)
		require.Equal(t, sorted[:got], prefix)
	}
}

func TestSeedReproducible(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	steps := make([][]float32, 50)
	for i := range steps {
		steps[i] = make([]float32, 1000)
		for j := range steps[i] {
			steps[i][j] = float32(rng.NormFloat64() * 2)
		}
	}
	run := func(seed uint64, noise bool) []int {
		p := DefaultParams()
		p.Seed = seed
		p.RepeatPenalty = 1.1
		s := New(p)
		other := New(params(func(p *Params) { p.Seed = 777 }))
		var hist []int
		for _, l := range steps {
			if noise {
				// Another request in the same batch draws in between.
				other.Sample(slices.Clone(l), nil)
			}
			hist = append(hist, s.Sample(slices.Clone(l), hist))
		}
		return hist
	}
	a := run(1234, false)
	require.Equal(t, a, run(1234, false))
	require.Equal(t, a, run(1234, true), "independent of other requests")
	require.NotEqual(t, a, run(1235, false))
}

// TestChiSquare draws many tokens with a fixed seed and compares the counts
// with the expected distribution.
func TestChiSquare(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    Params
	}{
		{"plain", params(nil)},
		{"temperature 0.7 top-k 5", params(func(p *Params) { p.Temperature = 0.7; p.TopK = 5 })},
		{"top-p 0.9", params(func(p *Params) { p.TopP = 0.9 })},
		{"min-p 0.05", params(func(p *Params) { p.MinP = 0.05 })},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logits := []float32{0.5, 2, -1, 1.2, 0, 1.9, -3, 0.7}
			want := dist(tc.p, logits, nil)
			s := New(tc.p)
			const draws = 200000
			counts := map[int]int{}
			for range draws {
				counts[s.Sample(slices.Clone(logits), nil)]++
			}
			var chi2 float64
			for id, c := range counts {
				require.Contains(t, want, id, "drew filtered-out token %d", id)
				_ = c
			}
			for id, p := range want {
				e := p * draws
				d := float64(counts[id]) - e
				chi2 += d * d / e
			}
			// 99.99th percentile of chi-square with up to 7 degrees of
			// freedom is below 30.
			require.Less(t, chi2, 30.0, "counts %v want %v", counts, want)
		})
	}
}

func TestValidate(t *testing.T) {
	nan := float32(math.NaN())
	inf := float32(math.Inf(1))
	require.NoError(t, DefaultParams().Validate())
	require.NoError(t, Greedy().Validate())
	for _, tc := range []struct {
		name string
		mod  func(*Params)
		want string
	}{
		{"negative temperature", func(p *Params) { p.Temperature = -0.1 }, "temperature = -0.1"},
		{"nan temperature", func(p *Params) { p.Temperature = nan }, "temperature = NaN"},
		{"inf temperature", func(p *Params) { p.Temperature = inf }, "temperature = +Inf"},
		{"negative top-k", func(p *Params) { p.TopK = -1 }, "top_k = -1"},
		{"top-p negative", func(p *Params) { p.TopP = -0.1 }, "top_p = -0.1"},
		{"top-p above one", func(p *Params) { p.TopP = 1.5 }, "top_p = 1.5"},
		{"top-p nan", func(p *Params) { p.TopP = nan }, "top_p = NaN"},
		{"min-p negative", func(p *Params) { p.MinP = -0.5 }, "min_p = -0.5"},
		{"min-p above one", func(p *Params) { p.MinP = 2 }, "min_p = 2"},
		{"min-p nan", func(p *Params) { p.MinP = nan }, "min_p = NaN"},
		{"penalty negative", func(p *Params) { p.RepeatPenalty = -1 }, "repeat_penalty = -1"},
		{"penalty inf", func(p *Params) { p.RepeatPenalty = inf }, "repeat_penalty = +Inf"},
		{"last n", func(p *Params) { p.RepeatLastN = -2 }, "repeat_last_n = -2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := params(tc.mod).Validate()
			require.ErrorIs(t, err, ErrInvalidParams)
			require.ErrorContains(t, err, tc.want)
		})
	}
	require.NoError(t, Params{}.Validate(), "the zero Params means greedy, no filter, no penalty")
	logits := []float32{1, 3, 2, 3}
	require.Equal(t, New(Greedy()).Sample(slices.Clone(logits), []int{1}), New(Params{}).Sample(slices.Clone(logits), []int{1}))
}

func TestInvalidParamsNoPanic(t *testing.T) {
	logits := []float32{1, 2, 3}
	for _, p := range []Params{
		{},
		{Temperature: float32(math.NaN()), TopP: float32(math.NaN()), MinP: float32(math.NaN()), RepeatPenalty: float32(math.NaN()), RepeatLastN: -5, TopK: -3},
		{Temperature: -1, TopP: 7, MinP: -1, RepeatPenalty: -1},
	} {
		id := New(p).Sample(slices.Clone(logits), []int{0, 1, 99, -1})
		require.True(t, id >= 0 && id < 3, "%+v gave %d", p, id)
	}
	id := New(params(nil)).Sample([]float32{float32(math.Inf(1)), 0}, nil)
	require.Equal(t, 0, id)
}

func benchLogits(n int) []float32 {
	rng := rand.New(rand.NewPCG(1, 2))
	l := make([]float32, n)
	for i := range l {
		l[i] = float32(rng.NormFloat64() * 3)
	}
	return l
}

// BenchmarkSample measures Sample over 32000 logits. Each iteration copies
// the logits first (Sample uses them as scratch); BenchmarkCopy32000 is that
// copy alone.
func BenchmarkSample(b *testing.B) {
	logits := benchLogits(32000)
	hist := make([]int, 64)
	for i := range hist {
		hist[i] = i * 37
	}
	for _, bc := range []struct {
		name string
		p    Params
	}{
		{"greedy", Greedy()},
		{"temperature", params(nil)},
		{"top-k40", params(func(p *Params) { p.TopK = 40 })},
		{"top-p0.9", params(func(p *Params) { p.TopP = 0.9 })},
		{"min-p0.05", params(func(p *Params) { p.MinP = 0.05 })},
		{"default+penalty", func() Params { p := DefaultParams(); p.RepeatPenalty = 1.1; return p }()},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s := New(bc.p)
			buf := make([]float32, len(logits))
			b.ReportAllocs()
			for b.Loop() {
				copy(buf, logits)
				s.Sample(buf, hist)
			}
		})
	}
}

func BenchmarkCopy32000(b *testing.B) {
	logits := benchLogits(32000)
	buf := make([]float32, len(logits))
	for b.Loop() {
		copy(buf, logits)
	}
}
