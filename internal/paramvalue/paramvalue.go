// Package paramvalue reads the values of RabbitMQ runtime parameters
// (shovel and federation-upstream definitions) as they reach the plugin
// runners: JSON decoded into maps, with numbers as json.Number from the
// management API and meta.db, and URIs as one string or a list.
package paramvalue

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
)

// URIs reads a uri key: one string or a list of strings (other elements
// are skipped; the validators refuse them before a runner sees them).
func URIs(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		out := make([]string, 0, len(v))
		for _, u := range v {
			if s, ok := u.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// Number reads a JSON number (json.Number from the management API and
// meta.db, float64 or an integer otherwise).
func Number(v any) (float64, bool) {
	switch n := v.(type) {
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	case float64:
		return n, true
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	}
	return 0, false
}

// PickURI chooses one of list at random, as RabbitMQ's shovel and
// federation plugins do, so a list spreads links over a cluster's nodes and
// survives one going down.
func PickURI(list []string) (string, error) {
	if len(list) == 0 {
		return "", fmt.Errorf("no URI")
	}
	return list[rand.IntN(len(list))], nil
}
