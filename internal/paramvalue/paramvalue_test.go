package paramvalue

import (
	"encoding/json"
	"testing"
)

func TestURIsNumberPickURI(t *testing.T) {
	if got := URIs("amqp://a"); len(got) != 1 || got[0] != "amqp://a" {
		t.Errorf("one URI: %v", got)
	}
	if got := URIs([]any{"amqp://a", 3, "amqp://b"}); len(got) != 2 || got[1] != "amqp://b" {
		t.Errorf("list: %v", got)
	}
	if got := URIs(7); got != nil {
		t.Errorf("not a URI: %v", got)
	}
	for _, v := range []any{json.Number("5"), 5.0, 5, int64(5)} {
		if n, ok := Number(v); !ok || n != 5 {
			t.Errorf("Number(%T) = %v, %v", v, n, ok)
		}
	}
	if _, ok := Number("5"); ok {
		t.Error("a string is not a number")
	}
	if _, err := PickURI(nil); err == nil {
		t.Error("PickURI of no URI")
	}
	seen := map[string]bool{}
	for range 200 {
		u, err := PickURI([]string{"a", "b"})
		if err != nil {
			t.Fatal(err)
		}
		seen[u] = true
	}
	if len(seen) != 2 {
		t.Errorf("PickURI always chose %v", seen)
	}
}
