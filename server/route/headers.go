package route

import (
	"sort"
	"strings"

	"github.com/warrenmq/warren/amqp"
)

// XMatchKey is the binding argument that selects how a headers binding matches.
const XMatchKey = "x-match"

// x-match values, as RabbitMQ 3.10 defines them.
const (
	// XMatchAll matches when every binding argument matches a header. Arguments
	// whose names start with "x-" are ignored. It is the default.
	XMatchAll = "all"
	// XMatchAny matches when at least one binding argument matches a header.
	// Arguments whose names start with "x-" are ignored.
	XMatchAny = "any"
	// XMatchAllWithX is XMatchAll with "x-" arguments included.
	XMatchAllWithX = "all-with-x"
	// XMatchAnyWithX is XMatchAny with "x-" arguments included.
	XMatchAnyWithX = "any-with-x"
)

// Headers routes a message to the destinations with a binding whose arguments
// match the message's headers; the routing key is ignored. Each binding's
// arguments are compiled once, on Add, into the list of headers to look up.
//
// A binding argument matches a header of the same name when the values are
// equal as RabbitMQ compares them: top-level values are compared by value, not
// wire type (int32 1, int64 1, double 1.0 and timestamp 1 are all equal, and a
// string equals a byte array with the same bytes), while values nested inside
// tables and arrays must also have the same type. An argument whose value is
// void (nil) matches whenever the header is present, whatever its value. The
// x-match argument itself never takes part.
//
// With x-match all, a binding with no arguments left to compare matches every
// message; with any, it matches none. The zero value is not usable; call
// NewHeaders.
type Headers[D comparable] struct {
	reg registry[D, *headersPattern]
}

// headersPattern is a binding's compiled arguments.
type headersPattern struct {
	any  bool
	keys []string
	vals []any // nil means void: presence of the header is enough
}

// NewHeaders returns an empty headers-exchange matcher.
func NewHeaders[D comparable]() *Headers[D] {
	m := &Headers[D]{}
	m.reg.init()
	return m
}

// Add adds b and reports whether it was new. Add does not validate b.Args: an
// x-match value that ValidateHeadersArgs would reject is treated as "all", as
// RabbitMQ treats bindings it accepted before it validated x-match.
func (m *Headers[D]) Add(b Binding[D]) bool {
	if m.reg.find(b) != nil {
		return false
	}
	m.reg.insert(b, compileHeaders(b.Args))
	return true
}

// Remove removes the binding identical to b and reports whether there was one.
func (m *Headers[D]) Remove(b Binding[D]) bool {
	e := m.reg.find(b)
	if e == nil {
		return false
	}
	m.reg.delete(e)
	return true
}

// Match calls visit once for each destination with at least one binding whose
// arguments match headers. The routing key is ignored.
func (m *Headers[D]) Match(_ string, headers amqp.Table, visit func(D)) {
	for _, ds := range m.reg.destList {
		for _, e := range ds.entries {
			if e.x.match(headers) {
				visit(ds.dest)
				break
			}
		}
	}
}

// Len returns the number of bindings.
func (m *Headers[D]) Len() int { return m.reg.n }

// Bindings returns all bindings in the order they were added.
func (m *Headers[D]) Bindings() []Binding[D] { return m.reg.bindings() }

// HasDest reports whether any binding points at d.
func (m *Headers[D]) HasDest(d D) bool { return m.reg.hasDest(d) }

// RemoveDest removes every binding to d and returns how many it removed.
func (m *Headers[D]) RemoveDest(d D) int {
	return m.reg.removeDest(d, func(*entry[D, *headersPattern]) {})
}

// compileHeaders turns binding arguments into the headers to look up.
func compileHeaders(args amqp.Table) *headersPattern {
	mode, _ := args[XMatchKey].(string)
	withX := mode == XMatchAllWithX || mode == XMatchAnyWithX
	p := &headersPattern{any: mode == XMatchAny || mode == XMatchAnyWithX}
	for k := range args {
		if k == XMatchKey || (!withX && strings.HasPrefix(k, "x-")) {
			continue
		}
		p.keys = append(p.keys, k)
	}
	sort.Strings(p.keys) // deterministic evaluation order
	p.vals = make([]any, len(p.keys))
	for i, k := range p.keys {
		if v := args[k]; wireTag(v) != 'V' {
			p.vals[i] = v
		}
	}
	return p
}

// match evaluates the pattern against a message's headers, with the result
// RabbitMQ's headers_match/2 gives for the same arguments and headers.
func (p *headersPattern) match(headers amqp.Table) bool {
	for i, k := range p.keys {
		hv, present := headers[k]
		ok := present && (p.vals[i] == nil || looseEqual(p.vals[i], hv))
		if ok == p.any {
			// The first match decides "any"; the first mismatch decides "all".
			return ok
		}
	}
	return !p.any
}

// ValidateHeadersArgs checks a headers binding's arguments the way RabbitMQ
// does when the binding is created: x-match may be absent, or a string equal to
// all, any, all-with-x or any-with-x. Otherwise it returns an *ArgsError
// wrapping ErrInvalidXMatch whose text is RabbitMQ's, for a 406
// PRECONDITION_FAILED channel close.
func ValidateHeadersArgs(args amqp.Table) error {
	v, ok := args[XMatchKey]
	if !ok {
		return nil
	}
	if s, ok := v.(string); ok {
		switch s {
		case XMatchAll, XMatchAny, XMatchAllWithX, XMatchAnyWithX:
			return nil
		}
		return &ArgsError{
			Text: "Invalid x-match field value " + ErlangTerm(v) +
				"; expected all, any, all-with-x, or any-with-x",
			Err: ErrInvalidXMatch,
		}
	}
	return &ArgsError{
		Text: "Invalid x-match field type " + ErlangType(v) + " (value " + ErlangTerm(v) +
			"); expected longstr",
		Err: ErrInvalidXMatch,
	}
}
