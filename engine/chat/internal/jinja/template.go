package jinja

import (
	"fmt"
)

// Template is a compiled Jinja template ready for rendering.
type Template struct {
	nodes []node
	src   string
}

// Compile parses a Jinja template source string and returns a compiled
// template that can be rendered multiple times with different data.
func Compile(source string) (*Template, error) {
	segs, err := scan(source)
	if err != nil {
		return nil, fmt.Errorf("jinja scan: %w", err)
	}

	nodes, err := parseTemplate(segs)
	if err != nil {
		return nil, fmt.Errorf("jinja parse: %w", err)
	}

	return &Template{nodes: nodes, src: source}, nil
}

// Render executes the template with the provided data and returns the
// rendered string. Each call creates an isolated scope so templates are
// safe to render concurrently after compilation.
func (t *Template) Render(data map[string]any) (string, error) {
	// Convert Go data to Value types.
	vals := make(map[string]Value, len(data))
	for k, v := range data {
		vals[k] = FromGoValue(v)
	}

	return t.RenderValues(vals)
}

// RenderValues is like Render but accepts pre-converted Value data. It
// renders under the default Limits.
func (t *Template) RenderValues(data map[string]Value) (string, error) {
	out, _, err := t.RenderLimited(data, Limits{})
	return out, err
}

// RenderLimited renders under lim and also reports the bytes the render
// was charged. A render over a limit fails with an error wrapping
// ErrBudget, ErrDepth or ErrWork, before the allocation that would have
// crossed it.
func (t *Template) RenderLimited(data map[string]Value, lim Limits) (string, int64, error) {
	m := newMeter(lim)
	out, err := render(t.nodes, data, m)
	if m.err != nil {
		// A refused allocation is the cause, whatever error the
		// evaluation wrapped or swallowed on the way out.
		return "", m.used, m.err
	}
	return out, m.used, err
}

// =============================================================================

// render executes the AST with the given data and returns the result.
func render(nodes []node, data map[string]Value, m *meter) (string, error) {
	e := evaluator{m: m, output: buf{m: m}}

	// The globals that allocate need the render's meter, so they are
	// bound per render on top of the shared read-only scope.
	e.builtins = globalScope(m)

	// Create user data scope on top of builtins.
	e.scope = newScope(e.builtins)
	for k, v := range data {
		e.scope.set(k, v)
	}

	if err := e.execNodes(nodes); err != nil {
		return "", err
	}

	return e.output.String(), nil
}
