package model

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"unsafe"

	"github.com/kvwarden/kvwarden/engine/ml"
	"github.com/kvwarden/kvwarden/engine/model/arch"
)

// Experts is the mixture-of-experts FFN of one layer (arch.MoE says how it
// routes). Expert matrices are views into the file's 3-D tensors (one 2-D
// slice per expert), so a quantized file is read in place.
type Experts struct {
	// Router is ffn_gate_inp, [Experts][Dim]; RouterBias its bias
	// ([Experts], gpt-oss) and SelectBias exp_probs_b ([Experts], added to
	// the scores for the selection only), nil when absent.
	Router                 *ml.Matrix
	RouterBias, SelectBias []float32
	// Gate and Up are [Hidden][Dim], Down [Dim][Hidden], one per expert;
	// the biases, when not nil, have one vector per expert.
	Gate, Up, Down             []*ml.Matrix
	GateBias, UpBias, DownBias [][]float32
	// The shared expert (nil: none), a gated FFN of its own width whose
	// output is added to every token's, scaled by sigmoid(SharedGateInp·x)
	// when SharedGateInp ([Dim]) is not nil.
	SharedGate, SharedUp, SharedDown *ml.Matrix
	SharedGateInp                    []float32
}

// checkExperts verifies a layer's experts against c.
func checkExperts(p string, l Layer, c Config, mat func(string, *ml.Matrix, int, int) error, vec func(string, []float32, int) error) error {
	e := l.MoE
	m := c.Block.MoE
	if e == nil {
		return fmt.Errorf("%w: layer %sffn_gate_inp (experts) missing", ErrUnsupported, p)
	}
	if l.Gate != nil || l.Up != nil || l.Down != nil {
		return fmt.Errorf("model: layer %s has both a dense FFN and experts", p)
	}
	if err := mat(p+"ffn_gate_inp", e.Router, m.Experts, c.Dim); err != nil {
		return err
	}
	if len(e.Gate) != m.Experts || len(e.Up) != m.Experts || len(e.Down) != m.Experts {
		return fmt.Errorf("model: layer %s has %d/%d/%d gate/up/down experts, want %d", p, len(e.Gate), len(e.Up), len(e.Down), m.Experts)
	}
	for x := range m.Experts {
		name := func(t string) string { return fmt.Sprintf("%s%s[expert %d]", p, t, x) }
		for _, err := range []error{
			mat(name("ffn_gate_exps"), e.Gate[x], m.Hidden, c.Dim),
			mat(name("ffn_up_exps"), e.Up[x], m.Hidden, c.Dim),
			mat(name("ffn_down_exps"), e.Down[x], c.Dim, m.Hidden),
		} {
			if err != nil {
				return err
			}
		}
	}
	for _, b := range []struct {
		name string
		v    [][]float32
		n    int
	}{{"ffn_gate_exps.bias", e.GateBias, m.Hidden}, {"ffn_up_exps.bias", e.UpBias, m.Hidden}, {"ffn_down_exps.bias", e.DownBias, c.Dim}} {
		if b.v == nil {
			continue
		}
		if len(b.v) != m.Experts {
			return fmt.Errorf("model: tensor %s%s has %d experts, want %d", p, b.name, len(b.v), m.Experts)
		}
		for _, v := range b.v {
			if err := vec(p+b.name, v, b.n); err != nil {
				return err
			}
		}
	}
	for _, b := range []struct {
		name string
		v    []float32
	}{{"ffn_gate_inp.bias", e.RouterBias}, {"exp_probs_b", e.SelectBias}} {
		if b.v != nil {
			if err := vec(p+b.name, b.v, m.Experts); err != nil {
				return err
			}
		}
	}
	if e.SharedGate == nil && e.SharedUp == nil && e.SharedDown == nil {
		if e.SharedGateInp != nil {
			return fmt.Errorf("model: layer %s has a shared expert gate but no shared expert", p)
		}
		return nil
	}
	if e.SharedUp == nil {
		return fmt.Errorf("%w: tensor %sffn_up_shexp missing", ErrUnsupported, p)
	}
	h := e.SharedUp.Rows
	for _, err := range []error{
		mat(p+"ffn_gate_shexp", e.SharedGate, h, c.Dim),
		mat(p+"ffn_up_shexp", e.SharedUp, h, c.Dim),
		mat(p+"ffn_down_shexp", e.SharedDown, c.Dim, h),
	} {
		if err != nil {
			return err
		}
	}
	if e.SharedGateInp != nil {
		return vec(p+"ffn_gate_inp_shexp", e.SharedGateInp, c.Dim)
	}
	return nil
}

// experts loads layer prefix p's MoE tensors.
func (g *ggufLoader) experts(p string, c Config) (*Experts, error) {
	m := c.Block.MoE
	e := &Experts{}
	var err error
	if e.Router, err = g.matrix(p+"ffn_gate_inp", m.Experts, c.Dim); err != nil {
		return nil, err
	}
	for _, v := range []struct {
		dst  *[]*ml.Matrix
		name string
		rows int
		cols int
	}{
		{&e.Gate, "ffn_gate_exps", m.Hidden, c.Dim},
		{&e.Up, "ffn_up_exps", m.Hidden, c.Dim},
		{&e.Down, "ffn_down_exps", c.Dim, m.Hidden},
	} {
		if *v.dst, err = g.expertMatrices(p+v.name, m.Experts, v.rows, v.cols); err != nil {
			return nil, err
		}
	}
	for _, v := range []struct {
		dst  *[][]float32
		name string
		n    int
	}{
		{&e.GateBias, "ffn_gate_exps.bias", m.Hidden},
		{&e.UpBias, "ffn_up_exps.bias", m.Hidden},
		{&e.DownBias, "ffn_down_exps.bias", c.Dim},
	} {
		if _, ok := g.f.Tensor(p + v.name); !ok {
			continue
		}
		all, err := g.expertVectors(p+v.name, m.Experts, v.n)
		if err != nil {
			return nil, err
		}
		*v.dst = all
	}
	for _, v := range []struct {
		dst  *[]float32
		name string
		n    int
	}{
		{&e.RouterBias, "ffn_gate_inp.bias", m.Experts},
		{&e.SelectBias, "exp_probs_b.bias", m.Experts},
		{&e.SharedGateInp, "ffn_gate_inp_shexp.weight", c.Dim},
	} {
		if t, ok := g.f.Tensor(p + v.name); ok {
			if *v.dst, err = g.vector(t.Name, v.n); err != nil {
				return nil, err
			}
		}
	}
	if _, ok := g.tensor(p + "ffn_up_shexp"); ok {
		if e.SharedUp, err = g.matrix(p+"ffn_up_shexp", -1, c.Dim); err != nil {
			return nil, err
		}
		h := e.SharedUp.Rows
		if e.SharedGate, err = g.matrix(p+"ffn_gate_shexp", h, c.Dim); err != nil {
			return nil, err
		}
		if e.SharedDown, err = g.matrix(p+"ffn_down_shexp", c.Dim, h); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// expertMatrices views a 3-D tensor [n][rows][cols] (ggml dims cols, rows,
// n) as n matrices, without copying.
func (g *ggufLoader) expertMatrices(name string, n, rows, cols int) ([]*ml.Matrix, error) {
	t, err := g.use(name)
	if err != nil {
		// Early Mixtral conversions stored one 2-D tensor per expert
		// (blk.N.ffn_gate.E.weight); llama.cpp no longer reads them either.
		legacy := strings.Replace(name, "_exps", ".0", 1)
		if _, ok := g.tensor(legacy); ok {
			return nil, fmt.Errorf("%w: per-expert tensors such as %s (an early mixture-of-experts conversion; convert the model again for ffn_*_exps)", ErrUnsupported, legacy)
		}
		return nil, err
	}
	if len(t.Dims) != 3 || t.Dims[0] != uint64(cols) || t.Dims[1] != uint64(rows) || t.Dims[2] != uint64(n) {
		return nil, fmt.Errorf("model: gguf tensor %s has dims %v, want [%d %d %d] (ggml order: columns, rows, experts)", t.Name, t.Dims, cols, rows, n)
	}
	if !t.Type.Supported() {
		return nil, fmt.Errorf("%w: gguf tensor %s has type %v (supported: %s): %w", ErrUnsupported, t.Name, t.Type, ml.SupportedTypeNames(), ml.ErrUnsupportedType)
	}
	data := t.Data
	if len(data) > 0 && t.Type == ml.F32 && uintptr(unsafe.Pointer(&data[0]))%4 != 0 {
		data = alignedCopy(data)
	}
	all, err := ml.NewMatrix(t.Type, n*rows, cols, data)
	if err != nil {
		return nil, fmt.Errorf("model: gguf tensor %s: %w", t.Name, err)
	}
	sizes := make([]int, n)
	for i := range sizes {
		sizes[i] = rows
	}
	return splitRows(all, sizes...), nil
}

// expertVectors reads a 2-D tensor [n][width] of per-expert vectors.
func (g *ggufLoader) expertVectors(name string, n, width int) ([][]float32, error) {
	t, err := g.use(name)
	if err != nil {
		return nil, err
	}
	if len(t.Dims) != 2 || t.Dims[0] != uint64(width) || t.Dims[1] != uint64(n) {
		return nil, fmt.Errorf("model: gguf tensor %s has dims %v, want [%d %d]", t.Name, t.Dims, width, n)
	}
	all, err := decodeF32(t.Name, t.Type, t.Data, n*width)
	if err != nil {
		return nil, err
	}
	out := make([][]float32, n)
	for i := range out {
		out[i] = all[i*width : (i+1)*width : (i+1)*width]
	}
	return out, nil
}

// moeScratch holds the buffers of the MoE FFN, reused between steps.
type moeScratch struct {
	logits, wts, sel []float32
	order            []int // expert indices, sorted per token
	idx              []int // per (token, k): expert
	slot             []int // per (token, k): row in its expert's group
	count, start     []int // per expert
	xe, ge, ue, ye   []float32
	dsts, xs         [][]float32
	ns               []int
	mats             []*ml.Matrix
	active           []int
	sg, su           []float32
	sharedDsts       [][]float32
	sharedMats       []*ml.Matrix
	// streamed counts the experts whose weights were read (once per
	// step each, however many tokens chose them), for benchmarks.
	streamed int64
}

// routeTokens fills s.idx and s.wts (n x Used): each token's selected
// experts and their weights, from the router logits of x.
func routeTokens(s *moeScratch, e *Experts, m arch.MoE, x []float32, n, dim int) {
	E, k := m.Experts, m.Used
	s.logits = ml.Grow(s.logits, n*E)
	s.sel = ml.Grow(s.sel, E)
	ml.MatMul(s.logits[:n*E], x[:n*dim], n, e.Router)
	s.wts = ml.Grow(s.wts, n*k)
	s.idx = growInts(s.idx, n*k)
	s.order = growInts(s.order, E)
	for t := range n {
		RouteToken(m, s.logits[t*E:(t+1)*E], e.RouterBias, e.SelectBias, s.sel[:E], s.order, s.idx[t*k:(t+1)*k], s.wts[t*k:(t+1)*k])
	}
}

// RouteToken selects one token's experts from its router logits lg
// (Experts values, modified in place): router bias, softmax or sigmoid,
// the top len(idx) by score (plus selectBias when present; ties go to the
// lower expert; only within the best groups when m.Groups > 1), softmax over the selected (GatingSoftmaxSelected),
// normalisation (NormTopK, with llama.cpp's clamp) and the weight scale.
// It writes the chosen experts to idx and their weights to w (Used
// entries each); sel and order are scratch of Experts entries. The CPU
// and CUDA forward passes both route through it, so they choose alike.
func RouteToken(m arch.MoE, lg, routerBias, selectBias, sel []float32, order, idx []int, w []float32) {
	if routerBias != nil {
		ml.Add(lg, routerBias)
	}
	// probs: the values whose top k are selected and weighted.
	switch m.Gating {
	case arch.GatingSoftmax:
		ml.Softmax(lg)
	case arch.GatingSigmoid:
		for i, v := range lg {
			lg[i] = 1 / (1 + float32(math.Exp(float64(-v))))
		}
	}
	score := lg
	if selectBias != nil || m.Groups > 1 {
		score = sel
		copy(score, lg)
		if selectBias != nil {
			ml.Add(score, selectBias)
		}
	}
	if m.Groups > 1 {
		limitGroups(score, m.Groups, m.GroupsUsed)
	}
	for i := range order {
		order[i] = i
	}
	// Stable: ties go to the lower expert index.
	slices.SortStableFunc(order, func(a, b int) int {
		switch {
		case score[a] > score[b]:
			return -1
		case score[a] < score[b]:
			return 1
		}
		return 0
	})
	for j := range idx {
		idx[j] = order[j]
		w[j] = lg[order[j]]
	}
	if m.Gating == arch.GatingSoftmaxSelected {
		ml.Softmax(w)
	}
	if m.NormTopK {
		var sum float32
		for _, v := range w {
			sum += v
		}
		sum = max(sum, 6.103515625e-5) // llama.cpp's clamp: f16's smallest normal
		for j := range w {
			w[j] /= sum
		}
	}
	if m.WeightScale != 0 && m.WeightScale != 1 {
		ml.Scale(w, m.WeightScale)
	}
}

// moeFFN computes the layer's MoE FFN of the n rows of x (normalised
// activations, n x Dim) into out (n x Dim). Tokens are grouped by expert,
// so each selected expert's weights stream once for all its tokens, and
// the products of all selected experts run as one job on the worker pool.
// Each token's expert outputs are summed in its selection order, so a
// token's result does not depend on the rest of the batch.
func (r *Runner) moeFFN(e *Experts, x []float32, n int, out []float32) {
	c := r.cfg
	m := c.Block.MoE
	s := &r.moe
	dim, H, E, k := c.Dim, m.Hidden, m.Experts, m.Used
	routeTokens(s, e, m, x, n, dim)

	// Group (token, k) pairs by expert.
	s.count = growInts(s.count, E)
	s.start = growInts(s.start, E+1)
	clear(s.count)
	for _, ex := range s.idx {
		s.count[ex]++
	}
	s.start[0] = 0
	for ex := range E {
		s.start[ex+1] = s.start[ex] + s.count[ex]
	}
	s.slot = growInts(s.slot, n*k)
	clear(s.count)
	for i, ex := range s.idx {
		s.slot[i] = s.count[ex]
		s.count[ex]++
	}
	total := n * k
	s.xe = ml.Grow(s.xe, total*dim)
	s.ge = ml.Grow(s.ge, total*H)
	s.ue = ml.Grow(s.ue, total*H)
	s.ye = ml.Grow(s.ye, total*dim)
	for i, ex := range s.idx {
		row := s.start[ex] + s.slot[i]
		t := i / k
		copy(s.xe[row*dim:(row+1)*dim], x[t*dim:(t+1)*dim])
	}
	s.active = s.active[:0]
	for ex := range E {
		if s.count[ex] > 0 {
			s.active = append(s.active, ex)
		}
	}
	s.dsts, s.xs, s.ns, s.mats = s.dsts[:0], s.xs[:0], s.ns[:0], s.mats[:0]
	for _, ex := range s.active {
		lo, hi := s.start[ex], s.start[ex+1]
		xin := s.xe[lo*dim : hi*dim]
		if n == 1 {
			// One token: every expert multiplies x itself, whose
			// activations MatMulEach then quantizes once for all.
			xin = x[:dim]
		}
		s.dsts = append(s.dsts, s.ge[lo*H:hi*H], s.ue[lo*H:hi*H])
		s.xs = append(s.xs, xin, xin)
		s.ns = append(s.ns, hi-lo, hi-lo)
		s.mats = append(s.mats, e.Gate[ex], e.Up[ex])
	}
	s.streamed += int64(len(s.active))
	ml.MatMulEach(s.dsts, s.xs, s.ns, s.mats)

	act := func(g, u []float32) {
		switch c.Block.Activation {
		case arch.GeGLU:
			ml.GELUMul(g, u)
		case arch.SwiGLUOAI:
			ml.SwiGLUOAIMul(g, u, arch.SwiGLUOAIAlpha, arch.SwiGLUOAILimit)
		default:
			ml.SiLUMul(g, u)
		}
	}
	actRows := func(lo, hi int) {
		for _, ex := range s.active[lo:hi] {
			a, b := s.start[ex], s.start[ex+1]
			for row := a; row < b; row++ {
				g, u := s.ge[row*H:(row+1)*H], s.ue[row*H:(row+1)*H]
				if e.GateBias != nil {
					ml.Add(g, e.GateBias[ex])
				}
				if e.UpBias != nil {
					ml.Add(u, e.UpBias[ex])
				}
				act(g, u)
			}
		}
	}
	if total*H >= 1<<14 {
		ml.Parallel(len(s.active), 1, actRows)
	} else {
		actRows(0, len(s.active)) // a decode step's: less than a hand-off
	}

	s.dsts, s.xs, s.ns, s.mats = s.dsts[:0], s.xs[:0], s.ns[:0], s.mats[:0]
	for _, ex := range s.active {
		lo, hi := s.start[ex], s.start[ex+1]
		s.dsts = append(s.dsts, s.ye[lo*dim:hi*dim])
		s.xs = append(s.xs, s.ge[lo*H:hi*H])
		s.ns = append(s.ns, hi-lo)
		s.mats = append(s.mats, e.Down[ex])
	}
	ml.MatMulEach(s.dsts, s.xs, s.ns, s.mats)

	// Scatter: each token sums its experts in selection order.
	clear(out[:n*dim])
	for i, ex := range s.idx {
		row := s.start[ex] + s.slot[i]
		y := s.ye[row*dim : (row+1)*dim]
		if e.DownBias != nil {
			ml.Add(y, e.DownBias[ex])
		}
		t := i / k
		ml.Axpy(out[t*dim:(t+1)*dim], s.wts[i], y)
	}

	if e.SharedUp == nil {
		return
	}
	sh := e.SharedUp.Rows
	s.sg = ml.Grow(s.sg, n*sh)
	s.su = ml.Grow(s.su, n*sh)
	s.sharedDsts = append(s.sharedDsts[:0], s.sg[:n*sh], s.su[:n*sh])
	s.sharedMats = append(s.sharedMats[:0], e.SharedGate, e.SharedUp)
	ml.MatMulGroup(s.sharedDsts, x[:n*dim], n, s.sharedMats)
	ml.SiLUMul(s.sg[:n*sh], s.su[:n*sh])
	y := s.ye[:n*dim] // the routed outputs are summed already; total >= n
	ml.MatMul(y, s.sg[:n*sh], n, e.SharedDown)
	for t := range n {
		scale := float32(1)
		if e.SharedGateInp != nil {
			g := ml.Dot(x[t*dim:(t+1)*dim], e.SharedGateInp)
			scale = 1 / (1 + float32(math.Exp(float64(-g))))
		}
		ml.Axpy(out[t*dim:(t+1)*dim], scale, y[t*dim:(t+1)*dim])
	}
}

// limitGroups keeps the experts of the used best of groups equal groups
// of score (consecutive experts), as llama.cpp's build_moe_ffn does for
// DeepSeek-V3: a group scores the sum of its two largest values, the
// best groups win (ties: the lower group), and every other expert's score
// becomes -Inf so that no top-k picks it.
func limitGroups(score []float32, groups, used int) {
	var buf [64]float32
	gs := buf[:0]
	if groups > len(buf) {
		gs = make([]float32, 0, groups)
	}
	per := len(score) / groups
	for g := range groups {
		a, b := float32(math.Inf(-1)), float32(math.Inf(-1)) // the two largest
		for _, v := range score[g*per : (g+1)*per] {
			if v > a {
				a, b = v, a
			} else if v > b {
				b = v
			}
		}
		gs = append(gs, a+b)
	}
	// Mark the used best groups by +Inf, then drop every group not marked.
	for range used {
		best := -1
		for g, v := range gs {
			if !math.IsInf(float64(v), 1) && (best < 0 || v > gs[best]) {
				best = g
			}
		}
		if best < 0 {
			break // NaN scores
		}
		gs[best] = float32(math.Inf(1))
	}
	for g, v := range gs {
		if !math.IsInf(float64(v), 1) {
			for i := g * per; i < (g+1)*per; i++ {
				score[i] = float32(math.Inf(-1))
			}
		}
	}
}

func growInts(s []int, n int) []int {
	if cap(s) < n {
		return make([]int, n)
	}
	return s[:n]
}

// Matrices lists the layer's matrices: Q, K, V, O, Gate, Up, Down (nil
// where absent, as in an MoE layer), the latent attention's q LoRA, KV
// projection and per-head matrices, then, for an MoE layer, the router,
// every expert's gate, up and down, and the shared expert's.
func (l *Layer) Matrices() []*ml.Matrix {
	out := []*ml.Matrix{l.Q, l.K, l.V, l.O, l.Gate, l.Up, l.Down}
	if a := l.MLA; a != nil {
		out = append(out, a.QA, a.QB, a.KVA)
		out = append(out, a.KB...)
		out = append(out, a.VB...)
	}
	if e := l.MoE; e != nil {
		out = append(out, e.Router)
		for x := range e.Gate {
			out = append(out, e.Gate[x], e.Up[x], e.Down[x])
		}
		if e.SharedUp != nil {
			out = append(out, e.SharedGate, e.SharedUp, e.SharedDown)
		}
	}
	return out
}
