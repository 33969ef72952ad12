package chat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/kvwarden/kvwarden/engine/chat/internal/jinja"
)

// maxJSONDepth bounds the nesting of JSON handed to a template.
const maxJSONDepth = 256

// value converts a Go value for the template. json.RawMessage is decoded
// keeping the order of object keys, as Python's json does: templates print
// tools and tool calls with tojson, and transformers' output lists keys in
// the order the request gave them. (A map[string]any has no order; its keys
// come out sorted.)
func value(v any) (jinja.Value, error) {
	switch x := v.(type) {
	case json.RawMessage:
		dec := json.NewDecoder(bytes.NewReader(x))
		dec.UseNumber()
		val, err := decodeOrdered(dec, 0)
		if err != nil {
			return jinja.Undefined(), fmt.Errorf("%w: %w", ErrRender, err)
		}
		if dec.More() {
			return jinja.Undefined(), fmt.Errorf("%w: data after a JSON value", ErrRender)
		}
		return val, nil
	case []any:
		items := make([]jinja.Value, len(x))
		for i, e := range x {
			val, err := value(e)
			if err != nil {
				return jinja.Undefined(), err
			}
			items[i] = val
		}
		return jinja.NewList(items), nil
	case map[string]any:
		// Recurse so that raw JSON inside keeps its order; the map's own
		// keys are sorted, as FromGoValue would sort them.
		d := jinja.NewDict()
		dict := d.AsDict()
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sortStrings(keys)
		for _, k := range keys {
			val, err := value(x[k])
			if err != nil {
				return jinja.Undefined(), err
			}
			dict.Set(k, val)
		}
		return d, nil
	}
	return jinja.FromGoValue(v), nil
}

func decodeOrdered(dec *json.Decoder, depth int) (jinja.Value, error) {
	if depth > maxJSONDepth {
		return jinja.Undefined(), fmt.Errorf("JSON nested deeper than %d", maxJSONDepth)
	}
	tok, err := dec.Token()
	if err != nil {
		return jinja.Undefined(), err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			d := jinja.NewDict()
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return jinja.Undefined(), err
				}
				k, ok := kt.(string)
				if !ok {
					return jinja.Undefined(), errors.New("object key is not a string")
				}
				v, err := decodeOrdered(dec, depth+1)
				if err != nil {
					return jinja.Undefined(), err
				}
				d.AsDict().Set(k, v)
			}
			_, err := dec.Token() // '}'
			return d, err
		case '[':
			var items []jinja.Value
			for dec.More() {
				v, err := decodeOrdered(dec, depth+1)
				if err != nil {
					return jinja.Undefined(), err
				}
				items = append(items, v)
			}
			_, err := dec.Token() // ']'
			return jinja.NewList(items), err
		}
		return jinja.Undefined(), fmt.Errorf("unexpected %v", t)
	case json.Number:
		if !strings.ContainsAny(string(t), ".eE") {
			if i, err := t.Int64(); err == nil {
				return jinja.NewInt(i), nil
			}
		}
		f, err := t.Float64()
		if err != nil {
			return jinja.NewString(string(t)), nil
		}
		return jinja.NewFloat(f), nil
	case string:
		return jinja.NewString(t), nil
	case bool:
		return jinja.NewBool(t), nil
	case nil:
		return jinja.None(), nil
	}
	return jinja.Undefined(), fmt.Errorf("unexpected JSON token %v", tok)
}

func sortStrings(s []string) { sort.Strings(s) }
