package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode"
)

// printJSON writes an API answer indented, keeping its key order and its
// numbers exactly as the API sent them.
func (e *env) printJSON(raw []byte) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, bytes.TrimSpace(raw), "", "  "); err != nil {
		return fmt.Errorf("the API's answer is not JSON: %w", err)
	}
	buf.WriteByte('\n')
	_, err := e.stdout.Write(buf.Bytes())
	return err
}

// printValue writes v as indented JSON (for answers warrenctl assembled).
func (e *env) printValue(v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding output: %w", err)
	}
	_, err = fmt.Fprintf(e.stdout, "%s\n", b)
	return err
}

// writeTable renders rows of decoded JSON objects as aligned columns.
// Columns are dotted paths into each object ("queue.name").
func writeTable(w io.Writer, rows []map[string]any, columns []string) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	header := make([]string, len(columns))
	for i, c := range columns {
		header[i] = printable(c)
	}
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, row := range rows {
		cells := make([]string, len(columns))
		for i, col := range columns {
			cells[i] = cell(lookup(row, col))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

// lookup follows a dotted path through nested objects; a missing step gives
// nil.
func lookup(obj map[string]any, path string) any {
	var cur any = obj
	for _, step := range strings.Split(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		if cur, ok = m[step]; !ok {
			return nil
		}
	}
	return cur
}

// cell renders one decoded JSON value for a table: scalars as themselves,
// lists of scalars comma-separated, anything else as compact JSON. Control
// characters are escaped so one value cannot break the table's layout.
func cell(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return printable(v)
	case json.Number:
		return v.String()
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(v)
	case []any:
		parts := make([]string, 0, len(v))
		for _, x := range v {
			switch x.(type) {
			case map[string]any, []any:
				return compactJSON(v)
			}
			parts = append(parts, cell(x))
		}
		return strings.Join(parts, ",")
	}
	return compactJSON(v)
}

func compactJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return printable(string(b))
}

// printable quotes s when it holds control characters (tabs and newlines
// would break the columns) or bytes that are not UTF-8.
func printable(s string) string {
	for _, r := range s {
		if unicode.IsControl(r) || r == unicode.ReplacementChar {
			return strconv.Quote(s)
		}
	}
	return s
}
