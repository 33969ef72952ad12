package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine"
	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/engine/tokenizer"
)

// mistralCtl is the byte vocabulary with the token of byte 0x01 turned
// into Mistral's [TOOL_CALLS] control token (it decodes to nothing, as in
// a real Mistral vocabulary).
type mistralCtl struct{ tokenizer.Bytes }

const mistralToolCalls = 4 // byte 0x01's id in Bytes

func (m mistralCtl) Decode(prev, id int) []byte {
	if id == mistralToolCalls {
		return nil
	}
	return m.Bytes.Decode(prev, id)
}

func (m mistralCtl) Piece(id int) string {
	if id == mistralToolCalls {
		return "[TOOL_CALLS]"
	}
	return m.Bytes.Piece(id)
}

func (m mistralCtl) Lookup(p string) (int, bool) {
	if p == "[TOOL_CALLS]" {
		return mistralToolCalls, true
	}
	return m.Bytes.Lookup(p)
}

// TestToolChoiceControlToken: under Mistral Nemo's template, with
// [TOOL_CALLS] a control token of the vocabulary, a forced call is
// generated with that one token (its logprobs record is that token's, not
// "["), and parses into a valid call, streamed and not.
func TestToolChoiceControlToken(t *testing.T) {
	src, err := os.ReadFile(sharedFile(t, "templates", "mistralai-Mistral-Nemo-Instruct-2407.jinja"))
	require.NoError(t, err)
	w, err := model.Synthetic(model.DefaultConfig(), model.BuiltinSeed, 0)
	require.NoError(t, err)
	ts := start(t, setup{cfg: engine.Config{Weights: w, Tokenizer: mistralCtl{tokenizer.NewBytes()}, MaxContext: 4096,
		KVPages: 512, ChatTemplate: string(src)}})
	validator := schemaValidator(t, weatherSchemas["get_time"])
	for _, stream := range []bool{false, true} {
		for seed := range 2 {
			t.Run(fmt.Sprintf("stream=%v/seed=%d", stream, seed), func(t *testing.T) {
				body := fmt.Sprintf(`{"messages":[{"role":"user","content":"Time in Paris?"}],"tools":%s,`+
					`"tool_choice":{"type":"function","function":{"name":"get_time"}},"temperature":0.8,"seed":%d,"max_tokens":200,`+
					`"stream":%v,"logprobs":true}`, weatherTools, seed, stream)
				resp, raw := ts.post(t, "/v1/chat/completions", "", body)
				require.Equal(t, http.StatusOK, resp.StatusCode, "%s", raw)
				var msg chatMessageJSON
				var finish string
				if stream {
					msg, finish = streamResult(t, raw)
				} else {
					msg, finish = chatResult(t, raw)
					var lp chatLPResponse
					require.NoError(t, json.Unmarshal(raw, &lp))
					require.NotNil(t, lp.Choices[0].Logprobs, "%s", raw)
					require.NotEmpty(t, lp.Choices[0].Logprobs.Content)
					// The first token is the control token, whose record has no
					// text (it decodes to nothing outside the parser), where
					// the marker spelled by pieces would start with "[".
					first := lp.Choices[0].Logprobs.Content[0]
					require.Empty(t, first.Token, "the marker is one control token")
					require.Empty(t, first.Bytes)
				}
				require.Equal(t, "tool_calls", finish, "%s", raw)
				require.Len(t, msg.ToolCalls, 1, "%s", raw)
				require.Equal(t, "get_time", msg.ToolCalls[0].Function.Name)
				requireValid(t, validator, msg.ToolCalls[0].Function.Arguments)
			})
		}
	}
}
