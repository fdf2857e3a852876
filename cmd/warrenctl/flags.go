package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"strings"
)

// parseInterleaved parses args with fs, allowing flags before, between and
// after positional arguments, and returns the positionals. Everything after
// "--" is positional.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return positional, nil
		}
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" {
			return append(positional, rest...), nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}

// tableFlag collects a JSON object from --arguments '{...}' and repeated
// --arg key=value flags. A value that parses as JSON (a number, true, a
// list...) is taken as that JSON; anything else is a string.
type tableFlag struct {
	values map[string]any
}

func (t *tableFlag) String() string {
	if t == nil || len(t.values) == 0 {
		return ""
	}
	b, _ := json.Marshal(t.values) // maps of decoded JSON always marshal
	return string(b)
}

// setJSON merges a JSON object.
func (t *tableFlag) setJSON(s string) error {
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		return fmt.Errorf("not a JSON object: %v", err)
	}
	if t.values == nil {
		t.values = make(map[string]any)
	}
	for k, v := range m {
		t.values[k] = v
	}
	return nil
}

// setPair adds one key=value.
func (t *tableFlag) setPair(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("%q is not key=value", s)
	}
	if t.values == nil {
		t.values = make(map[string]any)
	}
	var parsed any
	if json.Unmarshal([]byte(v), &parsed) == nil {
		t.values[k] = parsed
	} else {
		t.values[k] = v
	}
	return nil
}

// object returns the collected table, never nil (the API wants {} rather
// than null).
func (t *tableFlag) object() map[string]any {
	if t.values == nil {
		return map[string]any{}
	}
	return t.values
}

// jsonFlag and pairFlag are the two flag.Value faces of a tableFlag.
type jsonFlag struct{ *tableFlag }

func (f jsonFlag) Set(s string) error { return f.setJSON(s) }

type pairFlag struct{ *tableFlag }

func (f pairFlag) Set(s string) error { return f.setPair(s) }

// addTableFlags registers --NAME (JSON object) and --SHORT key=value for t.
func addTableFlags(fs *flag.FlagSet, t *tableFlag, name, short, what string) {
	fs.Var(jsonFlag{t}, name, what+" as a JSON object, e.g. '{\"x-max-length\":10}'")
	fs.Var(pairFlag{t}, short, "one of the "+what+" as key=value (repeatable; JSON values such as 10 or true keep their type)")
}
