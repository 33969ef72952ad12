// Package toolcall turns a model's output into OpenAI tool calls and
// reasoning content, for each tool-call format the supported model
// families were trained on, and builds the grammar that forces a call
// (tool_choice "required" or a named function).
//
// The format is detected from the chat template's source, as llama.cpp's
// chat code does: every family's template prints its own call markup when
// it renders an assistant turn with tool_calls, so the markup in the
// source names the family. Parse reads a whole output; a Stream reads it
// as it is generated and emits OpenAI-shaped deltas that never hold a
// partial marker, and whose concatenation equals what Parse returns.
package toolcall

import "strings"

// Family is a tool-call output format.
type Family string

// The families. The comment gives the output the family's models write.
const (
	// Generic: the whole output is a JSON object {"name": ..., "arguments":
	// {...}} (or {"tool_call": {...}}, {"tool_calls": [...]}), optionally
	// in a ```json fence. Templates without tool markup.
	Generic Family = "generic"
	// Hermes: <tool_call>{"name": ..., "arguments": {...}}</tool_call>,
	// one block per call. Hermes 2/3, Qwen 2.5, Qwen 3.
	Hermes Family = "hermes"
	// Llama3: {"name": ..., "parameters": {...}} as the whole output, or
	// <|python_tag|> followed by such an object or a built-in tool call
	// name.call(arg=value, ...). Llama 3.1, 3.2, 3.3.
	Llama3 Family = "llama3"
	// MistralNemo: [TOOL_CALLS][{"name": ..., "arguments": {...}, "id":
	// ...}, ...]. Mistral 7B v0.3, Nemo, Small 3.0/3.1.
	MistralNemo Family = "mistral-nemo"
	// Mistral: [TOOL_CALLS]name[ARGS]{...} per call, optionally with
	// [CALL_ID]id before [ARGS]. Mistral Small 3.2, Magistral, Devstral.
	Mistral Family = "mistral"
	// Phi4: <|tool_call|>{...} or [{...}, ...]<|/tool_call|>. Phi-4-mini.
	Phi4 Family = "phi4"
	// Granite: <|tool_call|>[{"name": ..., "arguments": {...}}, ...].
	// IBM Granite 3.x.
	Granite Family = "granite"
	// DeepSeekR1: <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function
	// <｜tool▁sep｜>name\n```json\n{...}\n```<｜tool▁call▁end｜>...
	// <｜tool▁calls▁end｜>. DeepSeek R1 and its distills.
	DeepSeekR1 Family = "deepseek-r1"
	// Harmony: gpt-oss's channels (<|channel|>analysis for reasoning,
	// final for the answer, commentary to=functions.NAME for a call);
	// see harmony.go.
	Harmony Family = "harmony"
	// Gemma: no tool markup in the template; the generic JSON object, or a
	// Python call in a ```tool_code fence (name(arg=value, ...)), the form
	// Google documents for Gemma function calling.
	Gemma Family = "gemma"
)

// Families lists every family, for documentation and tests.
var Families = []Family{Generic, Hermes, Llama3, MistralNemo, Mistral, Phi4, Granite, DeepSeekR1, Gemma, Harmony}

// Format is what a chat template tells about a model's output.
type Format struct {
	Family Family
	// PythonTag: Llama 3.1's template knows <|python_tag|> (built-in tools).
	PythonTag bool
	// Tools: the template prints the tools variable itself; when false the
	// tools must be described to the model some other way (see Polyfill).
	Tools bool
	// Thinking: the template knows <think> blocks.
	Thinking bool
}

// Detect reads a chat template's source. The order matters where markers
// overlap, and follows llama.cpp's: DeepSeek R1 and Granite before
// Hermes, Hermes before Llama 3.
func Detect(src string) Format {
	has := func(s string) bool { return strings.Contains(src, s) }
	f := Format{Family: Generic, Tools: has("tools"), Thinking: has("<think>")}
	switch {
	case has("<|channel|>"):
		f.Family, f.Thinking = Harmony, true
	case has("<｜tool▁calls▁begin｜>"):
		f.Family = DeepSeekR1
	case has("elif thinking") && has("<|tool_call|>"):
		f.Family = Granite
	case has("<tool_call>"):
		f.Family = Hermes
	case has("<|start_header_id|>ipython<|end_header_id|>"):
		f.Family, f.PythonTag = Llama3, has("<|python_tag|>")
	case has("[TOOL_CALLS]") && has("[ARGS]"):
		f.Family = Mistral
	case has("[TOOL_CALLS]"):
		f.Family = MistralNemo
	case has("<|tool|>") || has("<|tool_call|>"):
		f.Family = Phi4
	case has("<start_of_turn>"):
		f.Family = Gemma
	}
	if f.Family == Phi4 {
		// Phi-4-mini reads the tools from the system message's "tools"
		// field, not from the tools variable.
		f.Tools = false
	}
	return f
}

// KeepTokens are the markup texts of the family that may be control
// tokens of its vocabulary, which an output must spell out to be parsed
// (engine.Request.KeepTokens).
func (f Format) KeepTokens() []string {
	keep := []string{thinkOpen, thinkClose}
	switch f.Family {
	case Hermes:
		keep = append(keep, "<tool_call>", "</tool_call>")
	case Llama3:
		keep = append(keep, "<|python_tag|>")
	case MistralNemo, Mistral:
		keep = append(keep, "[TOOL_CALLS]", "[ARGS]", "[CALL_ID]")
	case Phi4, Granite:
		keep = append(keep, "<|tool_call|>", "<|/tool_call|>")
	case DeepSeekR1:
		keep = append(keep, dsCallsBegin, dsCallBegin, dsSep, dsCallEnd, dsCallsEnd)
	case Harmony:
		keep = append(keep, hStart, hChannel, hMessage, hEnd, hConstrain)
	}
	return keep
}
