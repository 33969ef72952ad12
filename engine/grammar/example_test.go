package grammar_test

import (
	"fmt"

	"github.com/kvwarden/kvwarden/engine/grammar"
)

func Example() {
	g, err := grammar.FromJSONSchema([]byte(`{"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"]}`))
	if err != nil {
		panic(err)
	}
	// Token 0 ends the generation; the rest are text.
	pieces := [][]byte{nil, []byte(`{"`), []byte(`ok`), []byte(`":`), []byte(`true`), []byte(`}`), []byte(`no`)}
	v, err := grammar.NewVocab(pieces, nil, 0)
	if err != nil {
		panic(err)
	}
	m := grammar.NewMatcher(g, v)
	mask := make([]uint64, v.MaskWords())
	for _, id := range []int{1, 2, 3, 4, 5} {
		if err := m.Allowed(mask); err != nil {
			panic(err)
		}
		fmt.Printf("allowed %07b, take %q\n", mask[0], pieces[id])
		if err := m.Accept(id); err != nil {
			panic(err)
		}
	}
	fmt.Println("can end:", m.CanEnd())
	// Output:
	// allowed 0000010, take "{\""
	// allowed 0000100, take "ok"
	// allowed 0001000, take "\":"
	// allowed 0010000, take "true"
	// allowed 0100000, take "}"
	// can end: true
}
