package engine

import (
	"context"
	"errors"
)

// EmbedTokenCounts returns how many tokens each input of req runs as in
// Embed (after the vocabulary's BOS/EOS and, with Truncate, the cut),
// computing nothing: the size of per-token results (PoolingNone) before
// asking for them, as the C API's size query needs. Its errors are
// Embed's for the same request (a *FieldError naming the input).
func (e *Engine) EmbedTokenCounts(ctx context.Context, req EmbedRequest) ([]int, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	jobs, _, err := e.embedJobs(req)
	if err != nil {
		return nil, err
	}
	counts := make([]int, len(jobs))
	for i, j := range jobs {
		prompt, _, err := e.embedPrompt(ctx, j)
		if err != nil {
			if fe := (*FieldError)(nil); !errors.As(err, &fe) {
				err = &FieldError{Field: "input", Index: i, Err: err}
			}
			return nil, err
		}
		counts[i] = len(prompt)
	}
	return counts, nil
}
