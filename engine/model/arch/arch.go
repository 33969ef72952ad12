// Package arch describes decoder architectures as data. A Block says what
// one transformer block computes (biases, RoPE style and scaling, Q/K norm,
// extra norms, soft-caps, sliding windows, activation, a mixture-of-experts
// FFN and its routing); the registry maps a
// GGUF general.architecture to the metadata that fills a Block and to the
// tensor layout the loader reads. Both forward passes (CPU and CUDA)
// interpret a Block; neither knows architecture names.
//
// Adding an architecture is one file in this package: an init function
// that calls Register with a Describe function (and, when the file fuses
// tensors, the fusion flags). A genuinely new operation also needs a field
// here and its implementation in both forward passes.
package arch

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
)

// ErrUnsupported is wrapped by every error about a model the engine cannot
// run: an unknown architecture, tensor type, RoPE scaling type or a tensor
// the architecture needs that the file lacks (or one it has that nothing
// reads). engine/model re-exports it as model.ErrUnsupported.
var ErrUnsupported = errors.New("model: unsupported")

// RopeStyle is how RoPE pairs the dimensions of a head.
type RopeStyle uint8

const (
	// RopeAdjacent rotates pairs (2i, 2i+1): llama2.c and llama.cpp's
	// "llama" GGUFs (whose Q/K rows the converter permuted for it).
	RopeAdjacent RopeStyle = iota
	// RopeNeoX rotates pairs (i, i+d/2): Qwen, Phi-3, Gemma.
	RopeNeoX
)

func (s RopeStyle) String() string {
	if s == RopeNeoX {
		return "neox"
	}
	return "adjacent"
}

// ScalingKind is the RoPE scaling method.
type ScalingKind uint8

const (
	ScalingNone ScalingKind = iota
	// ScalingLinear divides positions by Factor.
	ScalingLinear
	// ScalingYaRN blends interpolated and extrapolated frequencies per
	// dimension (llama.cpp's rope_yarn), with an attention magnitude scale.
	ScalingYaRN
)

func (k ScalingKind) String() string {
	switch k {
	case ScalingLinear:
		return "linear"
	case ScalingYaRN:
		return "yarn"
	}
	return "none"
}

// Scaling is a RoPE scaling configuration. Llama 3's scaling is not a kind
// here: its GGUFs bake it into the rope_freqs tensor (per-dimension
// frequency divisors), which the weights carry; nor is LongRoPE (Phi-3.5,
// Phi-4-mini): its two sets of divisors are the rope_factors_long/short
// tensors, and the weights choose between them by the context size against
// OrigContext.
type Scaling struct {
	Kind   ScalingKind
	Factor float32 // context extension factor (> 0 unless Kind is None)
	// OrigContext is rope.scaling.original_context_length (0 when absent,
	// required for YaRN): the training context length YaRN's ramp and
	// LongRoPE's choice of factors refer to.
	OrigContext int
	// YaRN only: llama.cpp's parameters (defaults ext 1, attn 1, beta_fast
	// 32, beta_slow 1). AttnFactor only counts when ExtFactor is 0: with the
	// ramp, llama.cpp replaces it by its own magnitude correction.
	ExtFactor, AttnFactor, BetaFast, BetaSlow float32
	// Mscale is rope.scaling.attn_factor (0 when absent, meaning 1), which
	// llama.cpp multiplies into every rotated value whatever the kind:
	// LongRoPE's sqrt(1 + ln(scale)/ln(original context)).
	Mscale float32
	// YarnLogMul is DeepSeek-V2/V3's mscale_all_dim (deepseek2's
	// rope.scaling.yarn_log_multiplier / 0.1, as llama.cpp reads it; 0:
	// none). With it llama.cpp's YaRN magnitude on the rotated values
	// cancels to rope.scaling.attn_factor, and the attention scale carries
	// the correction instead (MLAScale).
	YarnLogMul float32
}

// ropeFreqScale is llama.cpp's rope_freq_scale: 1/factor, 1 without scaling.
func (s Scaling) ropeFreqScale() float32 {
	if s.Kind == ScalingNone {
		return 1
	}
	return 1 / s.Factor
}

// AttnFactorEff is llama.cpp's context attn_factor (cparams.yarn_attn_factor),
// in its float32 steps: rope.scaling.attn_factor (Mscale) times, for YaRN
// without the ramp, yarn_attn_factor, and for YaRN with it get_mscale(factor)
// = 1 + 0.1 ln(factor) (1 for factor <= 1; with YarnLogMul, deepseek2's
// ratio get_mscale(factor, m)/get_mscale(factor, m) = 1) divided by
// 1 + 0.1 ln(factor).
func (s Scaling) AttnFactorEff() float32 {
	logf := func(x float32) float32 { return float32(math.Log(float64(x))) }
	attn := float32(1)
	if s.Mscale != 0 {
		attn = s.Mscale
	}
	if s.Kind != ScalingYaRN {
		return attn
	}
	if s.ExtFactor == 0 {
		return s.AttnFactor * attn
	}
	fs := 1 / s.Factor // llama.cpp's freq_scale
	factor := 1 / fs
	a := float32(1)
	if factor > 1 && s.YarnLogMul == 0 {
		a = 0.1*logf(factor) + 1
	}
	a *= 1 / (1 + 0.1*logf(factor))
	return a * attn
}

// Magnitude is the factor on RoPE's cos and sin: AttnFactorEff, times
// 1 + 0.1 ln(1/freq_scale) where ggml's rope_yarn applies the ramp. Net:
// 1 + 0.1 ln(factor) for YaRN, times Mscale; Mscale alone otherwise
// (LongRoPE's factor) and for deepseek2's YaRN.
func (s Scaling) Magnitude() float32 {
	a := s.AttnFactorEff()
	if s.Kind != ScalingYaRN || s.ExtFactor == 0 {
		return a
	}
	fs := 1 / s.Factor
	return a * (1 + 0.1*float32(math.Log(float64(1/fs))))
}

// MLAScale is deepseek2's attention scale, as llama.cpp pre-scales it for
// YaRN: mscale^2/sqrt(keyLen) with mscale = attn_factor * (1 + 0.1
// ln(1/freq_scale)) * (1 + 0.1 YarnLogMul ln(1/freq_scale)), keyLen the
// per-head query/key width before absorption (key_length_mla).
func (s Scaling) MLAScale(keyLen int) float32 {
	l := float32(math.Log(float64(1 / s.ropeFreqScale())))
	org := s.AttnFactorEff() * (1 + 0.1*l)
	m := org * (1 + 0.1*s.YarnLogMul*l)
	return 1 * m * m / float32(math.Sqrt(float64(keyLen)))
}

// Activation is the gated FFN's nonlinearity.
type Activation uint8

const (
	// SwiGLU: silu(gate) * up.
	SwiGLU Activation = iota
	// GeGLU: gelu_tanh(gate) * up (Gemma).
	GeGLU
	// SwiGLUOAI: gpt-oss's clamped SwiGLU, g*sigmoid(alpha*g)*(u+1) with
	// g = min(gate, limit) and u = clamp(up, -limit, limit).
	SwiGLUOAI
)

// gpt-oss's SwiGLU constants (fixed in llama.cpp too; no GGUF key).
const (
	SwiGLUOAIAlpha = 1.702
	SwiGLUOAILimit = 7
)

func (a Activation) String() string {
	switch a {
	case GeGLU:
		return "geglu"
	case SwiGLUOAI:
		return "swiglu-oai"
	}
	return "swiglu"
}

// Block describes the transformer block and the model's ends. The zero
// value is the Llama 2 block: pre-norm RMSNorm attention and SwiGLU FFN,
// adjacent-pair RoPE, no biases, scores scaled by 1/sqrt(head dim).
//
// Per-layer data that is optional by file (Q/K/V/O biases, RoPE frequency
// factors) is carried by the weights: present means used.
type Block struct {
	RopeStyle RopeStyle
	Scaling   Scaling
	// QKNorm: per-head RMSNorm of Q and K (weights [head dim]) before RoPE.
	QKNorm bool
	// PostNorms: RMSNorm of the attention output and of the FFN output
	// before each residual add (Gemma 2/3: post_attention_norm,
	// post_ffw_norm).
	PostNorms bool
	// NormOffset is added to every RMSNorm weight at load time (for files
	// that store w-1; Gemma GGUFs already store w, so 0 there).
	NormOffset float32
	// EmbedScale multiplies the token embeddings (0: none; Gemma sqrt(dim)).
	EmbedScale float32
	// AttnScale multiplies attention scores (0: 1/sqrt(head dim)).
	AttnScale float32
	// AttnSoftcap and FinalSoftcap (0: none) apply c*tanh(x/c) to the
	// scaled attention scores and to the logits (Gemma 2).
	AttnSoftcap, FinalSoftcap float32
	// ALiBi > 0 adds -slope(head)·|i-j| to the scaled attention scores
	// instead of positions (jina-bert-v2), the slopes of maximum bias ALiBi
	// as ggml computes them (ALiBiSlopes).
	ALiBi float32
	// Window > 0 makes local layers attend only to the Window most recent
	// positions (the current one included). Layer l is local when
	// l % WindowPattern < WindowPattern-1; a pattern of 1 or less makes
	// every layer local.
	Window, WindowPattern int
	// WindowDenseFirst makes the first layer of each pattern the global
	// one (l % WindowPattern == 0, ModernBERT) instead of the last.
	// WindowSymmetric (a bidirectional encoder) spans Window/2 positions
	// on each side of the current one instead of the Window most recent.
	WindowDenseFirst, WindowSymmetric bool
	// LocalTheta is the RoPE base of local layers (0: the global base), and
	// LocalUnscaled makes them ignore Scaling (Gemma 3).
	LocalTheta    float32
	LocalUnscaled bool
	Activation    Activation
	// MoE describes the mixture-of-experts FFN (zero: dense). Attention
	// sinks (attn_sinks, gpt-oss) are per-layer weights: present means used.
	MoE MoE
	// MLA describes multi-head latent attention (zero: none).
	MLA MLA
}

// MLA is DeepSeek-V2/V3's multi-head latent attention, run absorbed as
// llama.cpp runs it. A token's KV is one latent vector: KVRank values
// (attn_kv_a_mqa·x, RMSNormed by attn_kv_a_norm) and the RopeDim rotated
// key values shared by all heads, which makes one KV "head" of
// HeadDim = KVRank + RopeDim. Each query head is q = [q_nope | q_pe]
// (Nope + RopeDim values, from attn_q or the q LoRA attn_q_a,
// attn_q_a_norm, attn_q_b when QRank > 0); its nope part is absorbed into
// the latent space by attn_k_b[head] (KVRank x Nope), so the scores are
// one dot product over HeadDim values. The attention-weighted latent
// (the values are the latent itself) goes through attn_v_b[head]
// (VDim x KVRank) before attn_output.
type MLA struct {
	QRank, KVRank int
	Nope, VDim    int
}

// Local reports whether layer attends over a sliding window.
func (b Block) Local(layer int) bool {
	if b.Window <= 0 {
		return false
	}
	if b.WindowPattern <= 1 {
		return true
	}
	if b.WindowDenseFirst {
		return layer%b.WindowPattern != 0
	}
	return layer%b.WindowPattern < b.WindowPattern-1
}

// LayerRope is the RoPE base and scaling of layer, given the global base.
func (b Block) LayerRope(layer int, theta float32) (float32, Scaling) {
	if b.Local(layer) {
		if b.LocalTheta > 0 {
			theta = b.LocalTheta
		}
		if b.LocalUnscaled {
			return theta, Scaling{Mscale: b.Scaling.Mscale}
		}
	}
	return theta, b.Scaling
}

// Scale is the factor applied to attention scores.
func (b Block) Scale(headDim int) float32 {
	if b.AttnScale != 0 {
		return b.AttnScale
	}
	return float32(1 / math.Sqrt(float64(headDim)))
}

// Validate checks the fields for values no forward pass can use.
func (b Block) Validate() error {
	switch {
	case b.RopeStyle > RopeNeoX:
		return fmt.Errorf("%w: rope style %d", ErrUnsupported, b.RopeStyle)
	case b.Activation > SwiGLUOAI:
		return fmt.Errorf("%w: activation %d", ErrUnsupported, b.Activation)
	case b.Scaling.Kind > ScalingYaRN:
		return fmt.Errorf("%w: rope scaling kind %d", ErrUnsupported, b.Scaling.Kind)
	case b.Scaling.Kind != ScalingNone && !(b.Scaling.Factor > 0):
		return fmt.Errorf("model: rope scaling factor %g must be positive", b.Scaling.Factor)
	case b.Scaling.Kind == ScalingYaRN && b.Scaling.OrigContext <= 0:
		return fmt.Errorf("model: yarn rope scaling needs the original context length, got %d", b.Scaling.OrigContext)
	case b.Window < 0:
		return fmt.Errorf("model: sliding window %d is negative", b.Window)
	case b.AttnSoftcap < 0 || b.FinalSoftcap < 0:
		return fmt.Errorf("model: soft-caps (%g, %g) must not be negative", b.AttnSoftcap, b.FinalSoftcap)
	case b.Scaling.Mscale < 0 || b.Scaling.OrigContext < 0:
		return fmt.Errorf("model: rope attention factor %g and original context %d must not be negative", b.Scaling.Mscale, b.Scaling.OrigContext)
	case b.EmbedScale < 0 || b.AttnScale < 0 || b.LocalTheta < 0:
		return fmt.Errorf("model: embed scale %g, attention scale %g, local rope base %g must not be negative", b.EmbedScale, b.AttnScale, b.LocalTheta)
	}
	if err := b.MoE.Validate(0); err != nil {
		return err
	}
	if m := b.MLA; m != (MLA{}) && (m.KVRank <= 0 || m.Nope <= 0 || m.VDim <= 0 || m.QRank < 0) {
		return fmt.Errorf("model: latent attention ranks and widths %+v must be positive (q rank: not negative)", m)
	}
	for _, v := range []float32{b.EmbedScale, b.AttnScale, b.AttnSoftcap, b.FinalSoftcap, b.LocalTheta, b.NormOffset, b.Scaling.Factor, b.Scaling.Mscale, b.ALiBi, b.Scaling.YarnLogMul} {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return fmt.Errorf("model: non-finite value in block description %+v", b)
		}
	}
	return nil
}

// Meta reads an architecture's metadata. Keys are given without the
// "<arch>." prefix, which the reader adds.
type Meta interface {
	// Uint reads a non-negative integer; def < 0 makes the key required.
	Uint(key string, def int) (int, error)
	// Float reads a finite number; required makes a missing key an error.
	Float(key string, def float64, required bool) (float64, error)
	// Bool reads a boolean key.
	Bool(key string, def bool) (bool, error)
	// Has reports whether the key is present.
	Has(key string) bool
	// Layers is the block count.
	Layers() int
	// Dim, Heads and HeadDim are the model width, query heads and head dim.
	Dim() int
	Heads() int
	HeadDim() int
}

// Arch is one registered architecture.
type Arch struct {
	// Name is the GGUF general.architecture value.
	Name string
	// Models names the model families known to use it (documentation).
	Models string
	// FusedQKV: Q, K and V are one tensor attn_qkv (rows Q, then K, then V).
	// FusedGateUp: ffn_up holds gate then up (2 x FFN width rows) and there
	// is no ffn_gate. The loader splits both without copying.
	FusedQKV, FusedGateUp bool
	// FFNNorm names the pre-FFN RMSNorm tensor (empty: ffn_norm; gpt-oss
	// and GLM-4.5 call it post_attention_norm).
	FFNNorm string
	// QKNormIfPresent turns Block.QKNorm on when the file has Q/K norm
	// weights (GLM-4.5 355B has them, GLM-4.5-Air not).
	QKNormIfPresent bool
	// Describe fills the Block of the architecture from metadata. b arrives
	// with Scaling read from the common rope.scaling.* keys.
	Describe func(m Meta, b *Block) error
}

var (
	mu       sync.RWMutex
	registry = map[string]Arch{}
)

// Register adds a. It panics on a duplicate or empty name (a programming
// error in an init function).
func Register(a Arch) {
	mu.Lock()
	defer mu.Unlock()
	if a.Name == "" || a.Describe == nil {
		panic("arch: Register needs a name and a Describe function")
	}
	if _, dup := registry[a.Name]; dup {
		panic("arch: " + a.Name + " registered twice")
	}
	registry[a.Name] = a
}

// Names lists the registered architectures, sorted.
func Names() []string {
	mu.RLock()
	defer mu.RUnlock()
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// All returns the registered architectures, sorted by name.
func All() []Arch {
	mu.RLock()
	defer mu.RUnlock()
	out := make([]Arch, 0, len(registry))
	for _, a := range registry {
		out = append(out, a)
	}
	slices.SortFunc(out, func(a, b Arch) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Lookup returns the architecture called name, or an error wrapping
// ErrUnsupported that names it and lists the supported ones.
func Lookup(name string) (Arch, error) {
	mu.RLock()
	a, ok := registry[name]
	mu.RUnlock()
	if ok {
		return a, nil
	}
	if name == "" {
		return Arch{}, fmt.Errorf("%w: gguf metadata general.architecture is missing (supported: %s)", ErrUnsupported, strings.Join(Names(), ", "))
	}
	return Arch{}, fmt.Errorf("%w: architecture %q (supported: %s)", ErrUnsupported, name, strings.Join(Names(), ", "))
}

// ScalingFromMeta reads the common RoPE scaling keys: rope.scaling.type
// (none, linear, yarn; anything else is refused by name), rope.scaling.factor,
// the older rope.scale_linear, rope.scaling.original_context_length
// (required for YaRN), YaRN's yarn_* parameters and rope.scaling.attn_factor.
func ScalingFromMeta(m Meta, typ string) (Scaling, error) {
	var s Scaling
	switch typ {
	case "", "none":
		f, err := m.Float("rope.scale_linear", 1, false)
		if err != nil {
			return s, err
		}
		if f != 1 {
			s = Scaling{Kind: ScalingLinear, Factor: float32(f)}
		}
	case "linear":
		f, err := m.Float("rope.scaling.factor", 0, true)
		if err != nil {
			return s, err
		}
		s = Scaling{Kind: ScalingLinear, Factor: float32(f)}
		if f == 1 {
			s = Scaling{}
		}
	case "yarn":
		f, err := m.Float("rope.scaling.factor", 0, true)
		if err != nil {
			return s, err
		}
		orig, err := m.Uint("rope.scaling.original_context_length", -1)
		if err != nil {
			return s, err
		}
		s = Scaling{Kind: ScalingYaRN, Factor: float32(f), OrigContext: orig}
		for _, p := range []struct {
			dst *float32
			key string
			def float64
		}{
			{&s.ExtFactor, "rope.scaling.yarn_ext_factor", 1},
			{&s.AttnFactor, "rope.scaling.yarn_attn_factor", 1},
			{&s.BetaFast, "rope.scaling.yarn_beta_fast", 32},
			{&s.BetaSlow, "rope.scaling.yarn_beta_slow", 1},
		} {
			v, err := m.Float(p.key, p.def, false)
			if err != nil {
				return s, err
			}
			*p.dst = float32(v)
		}
	default:
		return s, fmt.Errorf("%w: rope scaling type %q (supported: none, linear, yarn, and llama3 and longrope through the rope_freqs and rope_factors_long/short tensors)", ErrUnsupported, typ)
	}
	if s.Kind != ScalingNone && !(s.Factor > 0) {
		return s, fmt.Errorf("model: rope scaling factor %g must be positive", s.Factor)
	}
	if s.Kind != ScalingYaRN {
		orig, err := m.Uint("rope.scaling.original_context_length", 0)
		if err != nil {
			return s, err
		}
		s.OrigContext = orig
	}
	ms, err := m.Float("rope.scaling.attn_factor", 1, false)
	if err != nil {
		return s, err
	}
	if !(ms > 0) {
		return s, fmt.Errorf("model: rope.scaling.attn_factor %g must be positive", ms)
	}
	if ms != 1 {
		s.Mscale = float32(ms)
	}
	return s, nil
}

// ALiBiSlopes returns the per-head slopes of ALiBi with maximum bias
// maxBias over heads heads, as ggml's soft_max computes them: powers of
// m0 = 2^(-maxBias/n) for the first n (the largest power of two not above
// heads), then odd powers of m1 = 2^(-maxBias/2/n).
func ALiBiSlopes(heads int, maxBias float32) []float32 {
	n := 1 << uint(math.Floor(math.Log2(float64(heads))))
	m0 := float32(math.Pow(2, float64(-maxBias/float32(n))))
	m1 := float32(math.Pow(2, float64(-(maxBias/2)/float32(n))))
	out := make([]float32, heads)
	for h := range out {
		if h < n {
			out[h] = float32(math.Pow(float64(m0), float64(h+1)))
		} else {
			out[h] = float32(math.Pow(float64(m1), float64(2*(h-n)+1)))
		}
	}
	return out
}
