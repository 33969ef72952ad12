package arch

import (
	"fmt"
	"math"
)

// Gating is how a mixture-of-experts router turns its logits (one per
// expert, plus the router bias where the file has one) into the top-k
// selection and the weights of the selected experts.
type Gating uint8

const (
	// GatingSoftmax: softmax over all experts, the k most probable are
	// selected and weighted by their probability (Qwen MoE, Mixtral).
	GatingSoftmax Gating = iota
	// GatingSigmoid: a sigmoid per expert; the selection adds the
	// per-expert bias exp_probs_b where the file has one, the weights do
	// not (GLM-4.5, DeepSeek V3).
	GatingSigmoid
	// GatingSoftmaxSelected: the k largest logits are selected and their
	// weights are the softmax over those k alone (gpt-oss).
	GatingSoftmaxSelected
)

func (g Gating) String() string {
	switch g {
	case GatingSigmoid:
		return "sigmoid"
	case GatingSoftmaxSelected:
		return "softmax-selected"
	}
	return "softmax"
}

// MoE describes a mixture-of-experts FFN. The zero value (Experts 0) is a
// dense FFN in every layer.
//
// An MoE layer computes, per token, the router logits ffn_gate_inp·x,
// selects Used of the Experts by Gating, and sums the selected experts'
// gated FFNs (3-D tensors ffn_gate_exps / ffn_up_exps / ffn_down_exps,
// Hidden wide, with per-expert biases where the file has them) weighted
// by their router weights: normalised to sum 1 when NormTopK, then
// multiplied by WeightScale when it is neither 0 nor 1. A shared expert
// (ffn_*_shexp), where the file has one, is added unweighted, or
// weighted by sigmoid(ffn_gate_inp_shexp·x) where that gate exists. The
// first LeadingDense layers have a dense FFN instead (feed_forward_length
// wide).
//
// Groups > 1 limits the selection DeepSeek-V3's way: the experts form
// Groups equal groups of consecutive indices, a group scores the sum of
// its two best selection scores, and only the experts of the GroupsUsed
// best groups can be selected.
type MoE struct {
	Experts, Used      int
	Hidden             int
	Gating             Gating
	NormTopK           bool
	WeightScale        float32
	LeadingDense       int
	Groups, GroupsUsed int
}

// MoELayer reports whether layer has a mixture-of-experts FFN.
func (b Block) MoELayer(layer int) bool {
	return b.MoE.Experts > 0 && layer >= b.MoE.LeadingDense
}

// Validate checks an MoE description (the zero value is valid).
func (m MoE) Validate(layers int) error {
	if m.Experts == 0 {
		if m.Used != 0 || m.LeadingDense != 0 {
			return fmt.Errorf("model: %d experts used or %d leading dense layers without experts", m.Used, m.LeadingDense)
		}
		return nil
	}
	switch {
	case m.Experts < 0 || m.Used <= 0 || m.Used > m.Experts:
		return fmt.Errorf("model: %d experts used of %d (want 1 <= used <= experts)", m.Used, m.Experts)
	case m.Hidden <= 0:
		return fmt.Errorf("model: expert FFN width %d must be positive", m.Hidden)
	case m.Gating > GatingSoftmaxSelected:
		return fmt.Errorf("%w: expert gating %d", ErrUnsupported, m.Gating)
	case m.LeadingDense < 0 || (layers > 0 && m.LeadingDense > layers):
		return fmt.Errorf("model: %d leading dense layers of %d", m.LeadingDense, layers)
	case m.WeightScale < 0 || math.IsNaN(float64(m.WeightScale)) || math.IsInf(float64(m.WeightScale), 0):
		return fmt.Errorf("model: expert weight scale %g must be finite and not negative", m.WeightScale)
	case m.Groups > 1 && (m.Experts%m.Groups != 0 || m.Experts/m.Groups < 2):
		return fmt.Errorf("model: %d experts do not split into %d groups of two or more", m.Experts, m.Groups)
	case m.Groups > 1 && (m.GroupsUsed <= 0 || m.GroupsUsed >= m.Groups):
		return fmt.Errorf("model: expert_group_used_count %d of %d groups (want 1 <= used < groups)", m.GroupsUsed, m.Groups)
	case m.Groups > 1 && m.GroupsUsed*m.Experts/m.Groups < m.Used:
		return fmt.Errorf("model: %d expert groups of %d experts cannot hold the %d experts used", m.GroupsUsed, m.Experts/m.Groups, m.Used)
	}
	return nil
}

// MoEFromMeta reads the common expert keys into b.MoE: expert_count,
// expert_used_count, expert_feed_forward_length (default: hiddenDefault,
// the architecture's fallback width), expert_weights_norm (default
// normTopK, the architecture's fixed choice where its graph ignores the
// key), expert_weights_scale and leading_dense_block_count. A file
// without expert_count leaves b.MoE zero (a dense model).
func MoEFromMeta(m Meta, b *Block, g Gating, normTopK bool, hiddenDefault int) error {
	n, err := m.Uint("expert_count", 0)
	if err != nil || n == 0 {
		return err
	}
	e := MoE{Experts: n, Gating: g, NormTopK: normTopK}
	if e.Groups, err = m.Uint("expert_group_count", 0); err != nil {
		return err
	}
	if e.Groups > 1 {
		if e.GroupsUsed, err = m.Uint("expert_group_used_count", -1); err != nil {
			return err
		}
	}
	if e.Used, err = m.Uint("expert_used_count", -1); err != nil {
		return err
	}
	if e.Hidden, err = m.Uint("expert_feed_forward_length", hiddenDefault); err != nil {
		return err
	}
	if e.LeadingDense, err = m.Uint("leading_dense_block_count", 0); err != nil {
		return err
	}
	s, err := m.Float("expert_weights_scale", 0, false)
	if err != nil {
		return err
	}
	e.WeightScale = float32(s)
	b.MoE = e
	return e.Validate(m.Layers())
}

// moeOnly is MoEFromMeta's error, or one for a file without experts of an
// architecture that has no dense form.
func moeOnly(err error, b *Block) error {
	if err == nil && b.MoE.Experts == 0 {
		return fmt.Errorf("model: gguf metadata expert_count is missing (the architecture is mixture-of-experts only)")
	}
	return err
}
