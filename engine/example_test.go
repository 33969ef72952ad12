package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"strings"

	"github.com/kvwarden/kvwarden/engine"
	"github.com/kvwarden/kvwarden/engine/sample"
)

// The engine as an embedding program uses it: the built-in model, one
// request streamed event by event, then its result.
func Example() {
	e, err := engine.New(engine.Config{ModelPath: "builtin:stories260K", MaxContext: 256})
	if err != nil {
		log.Fatal(err)
	}
	defer e.Close()
	st, err := e.Submit(context.Background(), engine.Request{
		Prompt: "Once upon a time", Tenant: "alice", MaxTokens: 16,
		Sampling: sample.Params{Temperature: 0}, // greedy
	})
	if err != nil {
		log.Fatal(err)
	}
	var text strings.Builder
	for ev, err := range st.All() {
		if err != nil {
			log.Fatal(err)
		}
		text.WriteString(ev.Text)
	}
	r := st.Wait()
	fmt.Println(len(r.Tokens), r.FinishReason, text.String() == r.Text)
	// Output: 16 length true
}

// The startup check: a context window the KV pool cannot hold is refused,
// naming both numbers, instead of being clamped.
func ExampleNew_maxContextAbovePool() {
	_, err := engine.New(engine.Config{KVPages: 10, PageSize: 16, MaxContext: 161})
	fmt.Println(errors.Is(err, engine.ErrInvalidParams))
	// Output: true
}

// A request that cannot be served is rejected by Submit, before any KV page
// is allocated, with a typed error carrying the numbers.
func ExampleEngine_Submit_promptTooLong() {
	e, err := engine.New(engine.Config{ModelPath: "builtin:stories260K", MaxContext: 64})
	if err != nil {
		log.Fatal(err)
	}
	defer e.Close()
	_, err = e.Submit(context.Background(), engine.Request{
		Prompt: strings.Repeat("Once upon a time ", 40), MaxTokens: 8,
	})
	var tooLong *engine.PromptTooLongError
	fmt.Println(errors.Is(err, engine.ErrPromptTooLong), errors.As(err, &tooLong) && tooLong.Limit == 64)
	fmt.Println(e.Stats().Pool.Allocs)
	// Output:
	// true true
	// 0
}

// Structured output: a JSON Schema compiled into a grammar constrains every
// sampled token, so even the 260K-parameter story model answers in the
// schema.
func ExampleEngine_CompileJSONSchema() {
	e, err := engine.New(engine.Config{ModelPath: "builtin:stories260K", MaxContext: 256})
	if err != nil {
		log.Fatal(err)
	}
	defer e.Close()
	g, err := e.CompileJSONSchema([]byte(`{"type": "boolean"}`))
	if err != nil {
		log.Fatal(err)
	}
	r, err := e.Generate(context.Background(), engine.Request{Prompt: "Is the cat happy?", MaxTokens: 32, Grammar: g})
	if err != nil {
		log.Fatal(err)
	}
	var answer bool
	fmt.Println(json.Unmarshal([]byte(r.Text), &answer) == nil, r.FinishReason)
	// Output: true stop
}

// Front ends check a Config before loading anything: a bad field is a
// *ConfigError naming it, so a CLI can name its own flag.
func ExampleConfig_Validate() {
	err := engine.Config{Device: "tpu"}.Validate()
	var ce *engine.ConfigError
	fmt.Println(errors.As(err, &ce), ce.Field, errors.Is(err, engine.ErrInvalidParams))
	err = engine.Config{KVPages: 4, KVMemory: 1 << 20}.Validate()
	fmt.Println(errors.As(err, &ce), ce.Field)
	// Output:
	// true Device true
	// true KVMemory
}

// With ZeroOnRelease every page a finished request held is scrubbed before
// it can be handed to anyone else, in one batch per release; Stats shows it.
func ExampleEngine_Stats() {
	e, err := engine.New(engine.Config{ModelPath: "builtin:stories260K", MaxContext: 256, ZeroOnRelease: true, Device: "cpu"})
	if err != nil {
		log.Fatal(err)
	}
	defer e.Close()
	if _, err := e.Generate(context.Background(), engine.Request{Prompt: "Once upon a time", MaxTokens: 40}); err != nil {
		log.Fatal(err)
	}
	p := e.Stats().Pool
	// A released page is scrubbed at once, or kept (releasing) while the
	// prefix cache holds it for the next request of the same tenant.
	fmt.Println(p.Releases > 0, p.Scrubs+uint64(p.Releasing) == p.Releases, p.Owned, p.Scrubbing, e.Device())
	// Output: true true 0 0 cpu
}
