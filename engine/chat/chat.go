// Package chat renders a model's chat template: the Jinja program stored in
// a GGUF file's tokenizer.chat_template that turns a conversation into the
// prompt text the model was trained on. It renders the way Hugging Face's
// apply_chat_template does (trim_blocks, lstrip_blocks, loop controls,
// raise_exception, tojson, strftime_now, bos_token, eos_token,
// add_generation_prompt, tools) and treats every template as untrusted: a
// render is bounded in steps, time, recursion and memory growth, and a
// template that misbehaves yields an error, never a panic.
package chat

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/kvwarden/kvwarden/engine/chat/internal/jinja"
)

// Errors callers tell apart with errors.Is. Every error Parse and Render
// return wraps ErrTemplate, so a server can answer all of them with 400.
var (
	// ErrTemplate is the root of every template error.
	ErrTemplate = errors.New("chat template")
	// ErrSyntax: the template does not parse.
	ErrSyntax = fmt.Errorf("%w: syntax error", ErrTemplate)
	// ErrRaised: the template called raise_exception (see *RaiseError).
	ErrRaised = fmt.Errorf("%w: raised", ErrTemplate)
	// ErrLimit: the template exceeded a bound of Limits, or uses a construct
	// that could exceed one in a single operation.
	ErrLimit = fmt.Errorf("%w: limit exceeded", ErrTemplate)
	// ErrRender: any other failure while rendering (a type error, a missing
	// method, a recovered panic of the Jinja engine).
	ErrRender = fmt.Errorf("%w: render failed", ErrTemplate)
	// ErrNoTemplate: the named template does not exist.
	ErrNoTemplate = fmt.Errorf("%w: not found", ErrTemplate)
)

// RaiseError is what a template's raise_exception(msg) produces. Message is
// the template's own text (e.g. "System role not supported").
type RaiseError struct {
	Message string
}

func (e *RaiseError) Error() string { return "chat template raised: " + e.Message }

// Unwrap makes errors.Is(err, ErrRaised) and errors.Is(err, ErrTemplate) hold.
func (e *RaiseError) Unwrap() error { return ErrRaised }

// Message is one turn of a conversation. Role and Content become the
// message's "role" and "content" (an Extra "content" replaces it, e.g. nil
// for a JSON null); Extra carries any other fields a template
// may read (tool_calls, tool_call_id, name, reasoning_content): decoded JSON
// (map[string]any, []any, string, float64, bool, nil) or, to keep the order
// of object keys as Python does, json.RawMessage.
type Message struct {
	Role    string
	Content string
	Extra   map[string]any
}

// Input is what a render sees.
type Input struct {
	Messages            []Message
	AddGenerationPrompt bool
	// Tools, when not empty, is passed as "tools": OpenAI tool definitions,
	// each decoded JSON or json.RawMessage (keeps key order, which tojson
	// shows).
	Tools []any
	// BOSToken and EOSToken are the vocabulary's BOS and EOS pieces ("" when
	// the vocabulary has none).
	BOSToken, EOSToken string
	// Vars are extra template variables (llama-server's
	// chat_template_kwargs, e.g. enable_thinking). They cannot replace the
	// variables above or the guard's functions.
	Vars map[string]any
	// Now is the clock behind strftime_now; nil means time.Now. Tests pin it.
	Now func() time.Time
}

// Limits bound one render. Zero fields take the defaults.
type Limits struct {
	// MaxSteps bounds loop iterations, macro calls, assignments and outputs.
	MaxSteps int
	// MaxDepth bounds macro recursion.
	MaxDepth int
	// MaxBytes bounds what one render allocates for its values and its
	// output, in bytes. Every operation that builds a value (a string, a
	// list, a JSON encoding, a join, a repetition...) is charged before it
	// allocates, so a single expression cannot take the process down.
	MaxBytes int64
	// MaxHeapGrowth bounds how far the process heap may grow during a
	// render, in bytes. The check runs at every step; it is a second line
	// behind MaxBytes (it also sees other goroutines' allocations).
	MaxHeapGrowth uint64
	// Timeout bounds the render's wall time, checked at every step.
	Timeout time.Duration
	// MaxOutput bounds the rendered text in bytes.
	MaxOutput int
}

// Defaults for Limits. Real templates take a few hundred steps and a depth
// of two or three; a conversation's size is bounded by the caller.
const (
	DefaultMaxSteps      = 1_000_000
	DefaultMaxDepth      = 64
	DefaultMaxBytes      = 256 << 20
	DefaultMaxHeapGrowth = 512 << 20
	DefaultTimeout       = 2 * time.Second
	DefaultMaxOutput     = 64 << 20
	// MaxSource is the largest template accepted (the biggest real ones are
	// about 20 KiB).
	MaxSource = 256 << 10
)

func (l Limits) withDefaults() Limits {
	if l.MaxSteps <= 0 {
		l.MaxSteps = DefaultMaxSteps
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = DefaultMaxDepth
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	if l.MaxHeapGrowth == 0 {
		l.MaxHeapGrowth = DefaultMaxHeapGrowth
	}
	if l.Timeout <= 0 {
		l.Timeout = DefaultTimeout
	}
	if l.MaxOutput <= 0 {
		l.MaxOutput = DefaultMaxOutput
	}
	return l
}

// ChatML is the template used when a model file carries none, as llama.cpp
// does: <|im_start|>role\ncontent<|im_end|>\n per message.
const ChatML = `{%- for message in messages -%}
{{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
{{- '<|im_start|>assistant\n' -}}
{%- endif -%}`

// Template is a parsed chat template. It is immutable and safe for
// concurrent use.
type Template struct {
	source string
	tmpl   *jinja.Template
	Limits Limits
}

// Parse checks and compiles a template. Besides syntax errors it refuses
// (with ErrLimit) sources over MaxSource, nesting deeper than the parser
// may safely recurse, and constructs that could blow up memory in a single
// operation (see guard.go).
func Parse(source string) (*Template, error) {
	if len(source) > MaxSource {
		return nil, fmt.Errorf("%w: template is %d bytes, at most %d", ErrLimit, len(source), MaxSource)
	}
	instrumented, err := instrument(source)
	if err != nil {
		return nil, err
	}
	t, err := compile(instrumented)
	if err != nil {
		return nil, err
	}
	if err := checkAmplifiers(t); err != nil {
		return nil, err
	}
	return &Template{source: source, tmpl: t}, nil
}

// compile runs the Jinja compiler, turning a panic into an error.
func compile(src string) (t *jinja.Template, err error) {
	defer func() {
		if r := recover(); r != nil {
			t, err = nil, fmt.Errorf("%w: %v", ErrSyntax, r)
		}
	}()
	t, err = jinja.Compile(src)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSyntax, err)
	}
	return t, nil
}

// Source is the template text as given to Parse.
func (t *Template) Source() string { return t.source }

// Render renders the conversation. Errors wrap ErrTemplate; a template's
// raise_exception yields a *RaiseError.
func (t *Template) Render(in Input) (out string, err error) {
	g := newGuard(t.Limits.withDefaults())
	vals := make(map[string]jinja.Value, 8+len(in.Vars))
	keys := make([]string, 0, len(in.Vars))
	for k := range in.Vars {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v, err := value(in.Vars[k])
		if err != nil {
			return "", err
		}
		vals[k] = v
	}
	msgs := make([]jinja.Value, len(in.Messages))
	for i, m := range in.Messages {
		d := jinja.NewDict()
		dict := d.AsDict()
		dict.Set("role", jinja.NewString(m.Role))
		dict.Set("content", jinja.NewString(m.Content))
		extra := make([]string, 0, len(m.Extra))
		for k := range m.Extra {
			extra = append(extra, k)
		}
		sort.Strings(extra)
		for _, k := range extra {
			v, err := value(m.Extra[k])
			if err != nil {
				return "", err
			}
			dict.Set(k, v)
		}
		msgs[i] = d
	}
	vals["messages"] = jinja.NewList(msgs)
	vals["add_generation_prompt"] = jinja.NewBool(in.AddGenerationPrompt)
	vals["bos_token"] = jinja.NewString(in.BOSToken)
	vals["eos_token"] = jinja.NewString(in.EOSToken)
	// transformers passes tools and documents as None when there are none
	// (so "tools is defined" holds and "tools is none" tells).
	vals["tools"], vals["documents"] = jinja.None(), jinja.None()
	if len(in.Tools) > 0 {
		v, err := value(in.Tools)
		if err != nil {
			return "", err
		}
		vals["tools"] = v
	}
	now := in.Now
	if now == nil {
		now = time.Now
	}
	g.install(vals, now)

	defer func() {
		if r := recover(); r != nil {
			out, err = "", fmt.Errorf("%w: the Jinja engine panicked: %v", ErrRender, r)
		}
	}()
	out, _, err = t.tmpl.RenderLimited(vals, jinja.Limits{MaxBytes: g.lim.MaxBytes, MaxDepth: maxValueDepth})
	if g.err != nil {
		// The guard's own error (a raise, a limit) is the cause, whatever
		// the engine wrapped it in.
		return "", g.err
	}
	if errors.Is(err, jinja.ErrBudget) || errors.Is(err, jinja.ErrDepth) || errors.Is(err, jinja.ErrWork) {
		return "", fmt.Errorf("%w: %w", ErrLimit, err)
	}
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrRender, err)
	}
	if len(out) > g.lim.MaxOutput {
		return "", fmt.Errorf("%w: output is %d bytes, at most %d", ErrLimit, len(out), g.lim.MaxOutput)
	}
	return out, nil
}

// Set holds the templates of one model: the default one and named ones
// (GGUF tokenizer.chat_template.<name>, e.g. tool_use).
type Set struct {
	Default *Template
	Named   map[string]*Template
	// Fallback reports that the model had no template and Default is ChatML.
	Fallback bool
	// Broken holds the parse errors of named templates that were left out.
	Broken map[string]error
}

// NewSet parses a model's templates: def is tokenizer.chat_template ("" for
// none), named maps each <name> of tokenizer.chat_template.<name> to its
// source. An empty def falls back to ChatML (Fallback is set; callers log it).
// A default that does not parse is an error; a named one is left out and
// recorded in Broken.
func NewSet(def string, named map[string]string) (*Set, error) {
	s := &Set{Named: map[string]*Template{}}
	if strings.TrimSpace(def) == "" {
		def, s.Fallback = ChatML, true
	}
	t, err := Parse(def)
	if err != nil {
		return nil, fmt.Errorf("tokenizer.chat_template: %w", err)
	}
	s.Default = t
	for name, src := range named {
		t, err := Parse(src)
		if err != nil {
			// One broken named template must not take the default down;
			// selecting it reports the error.
			if s.Broken == nil {
				s.Broken = map[string]error{}
			}
			s.Broken[name] = fmt.Errorf("tokenizer.chat_template.%s: %w", name, err)
			continue
		}
		s.Named[name] = t
	}
	return s, nil
}

// Select picks a template the way apply_chat_template does: name "" means
// the default, except that a conversation with tools uses a "tool_use"
// template where one exists.
func (s *Set) Select(name string, withTools bool) (*Template, error) {
	if name == "" || name == "default" {
		if withTools {
			if t, ok := s.Named["tool_use"]; ok {
				return t, nil
			}
		}
		return s.Default, nil
	}
	if t, ok := s.Named[name]; ok {
		return t, nil
	}
	if err, ok := s.Broken[name]; ok {
		return nil, err
	}
	names := make([]string, 0, len(s.Named))
	for n := range s.Named {
		names = append(names, n)
	}
	sort.Strings(names)
	return nil, fmt.Errorf("%w: no chat template named %q (the model has: default %s)", ErrNoTemplate, name, strings.Join(names, " "))
}
