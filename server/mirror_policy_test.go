package server

import (
	"encoding/json"
	"testing"
)

// TestMirrorPolicyOf: the ha-* keys are read whichever number type the
// definition holds (int64 as validated, json.Number as a replicated
// SetPolicy decodes a key of any type), and a definition without a usable
// ha-mode asks for no mirrors.
func TestMirrorPolicyOf(t *testing.T) {
	for _, c := range []struct {
		def  map[string]any
		ok   bool
		want mirrorPolicy
	}{
		{map[string]any{"ha-mode": "exactly", "ha-params": json.Number("2"), "ha-min-isr": json.Number("2")}, true, mirrorPolicy{mode: "exactly", count: 2, minISR: 2}},
		{map[string]any{"ha-mode": "exactly", "ha-params": int64(3)}, true, mirrorPolicy{mode: "exactly", count: 3, minISR: 1}},
		{map[string]any{"ha-mode": "all", "ha-min-isr": int64(2)}, true, mirrorPolicy{mode: "all", minISR: 2}},
		{map[string]any{"ha-mode": "nodes", "ha-params": []any{"warren@a", "warren@b"}}, true, mirrorPolicy{mode: "nodes", nodes: []string{"warren@a", "warren@b"}, minISR: 1}},
		{map[string]any{"ha-mode": "exactly"}, false, mirrorPolicy{}},
		{map[string]any{"max-length": int64(3)}, false, mirrorPolicy{}},
		{nil, false, mirrorPolicy{}},
	} {
		got, ok := mirrorPolicyOf(c.def)
		if ok != c.ok || (ok && (got.mode != c.want.mode || got.count != c.want.count || got.minISR != c.want.minISR ||
			len(got.nodes) != len(c.want.nodes))) {
			t.Errorf("%v: %+v %v, want %+v %v", c.def, got, ok, c.want, c.ok)
		}
	}
}
