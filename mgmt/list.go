package mgmt

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Pagination limits, as RabbitMQ's.
const (
	defaultPageSize = 100
	maxPageSize     = 500
)

// listOpts are a list request's query parameters: name filter, sort,
// columns and pagination.
type listOpts struct {
	paginate       bool
	page, pageSize int
	name           string
	nameRe         *regexp.Regexp
	sortKey        []string // dotted path; nil = default order
	reverse        bool
	columns        [][]string
}

// parseListOpts reads the list parameters. Pagination errors use RabbitMQ's
// error keys and reasons.
func parseListOpts(rq *request, pageable bool) (listOpts, error) {
	q := rq.query
	var o listOpts
	if s := q.Get("sort"); s != "" {
		o.sortKey = strings.Split(s, ".")
	}
	o.reverse = q.Get("sort_reverse") == "true"
	if c := q.Get("columns"); c != "" {
		for _, col := range strings.Split(c, ",") {
			if col = strings.TrimSpace(col); col != "" {
				o.columns = append(o.columns, strings.Split(col, "."))
			}
		}
	}
	if !pageable || !q.Has("page") {
		return o, nil
	}
	invalid := errBadRequest("Pagination parameters are invalid")
	page, err := strconv.Atoi(q.Get("page"))
	if err != nil {
		return o, invalid
	}
	size := defaultPageSize
	sizeText := "undefined"
	if q.Has("page_size") {
		if size, err = strconv.Atoi(q.Get("page_size")); err != nil {
			return o, invalid
		}
		sizeText = strconv.Itoa(size)
	}
	if page < 1 || size < 1 || size > maxPageSize {
		return o, &httpError{http.StatusBadRequest, errorBody{"invalid_pagination_parameters",
			fmt.Sprintf("Invalid pagination parameters: page number %d, page size %s", page, sizeText)}}
	}
	o.paginate, o.page, o.pageSize = true, page, size
	o.name = q.Get("name")
	if o.name != "" && q.Get("use_regex") == "true" {
		if o.nameRe, err = regexp.Compile("(?i)" + o.name); err != nil {
			return o, invalid
		}
	}
	return o, nil
}

// matchName applies the name filter (a case-insensitive substring, or a
// regular expression with use_regex=true).
func (o *listOpts) matchName(name string) bool {
	switch {
	case o.nameRe != nil:
		return o.nameRe.MatchString(name)
	case o.name != "":
		return strings.Contains(strings.ToLower(name), strings.ToLower(o.name))
	}
	return true
}

// lister describes how to list one kind of object: cheap accessors for the
// default order and the name filter, and render for the JSON object, which
// may be expensive (rates, policies) and runs only for returned rows unless
// the sort key needs every row rendered.
type lister[T any] struct {
	vhost  func(T) string
	name   func(T) string
	render func(T) map[string]any
}

// list filters, sorts, pages and renders items and writes the response: an
// array, or RabbitMQ's page object when the request asked for a page.
func list[T any](rq *request, items []T, l lister[T], pageable bool) error {
	o, err := parseListOpts(rq, pageable)
	if err != nil {
		return err
	}
	total := len(items)
	if o.paginate && (o.name != "" || o.nameRe != nil) && l.name != nil {
		kept := items[:0:0]
		for _, it := range items {
			if o.matchName(l.name(it)) {
				kept = append(kept, it)
			}
		}
		items = kept
	}
	var rendered []map[string]any
	if o.sortKey == nil {
		sortDefault(items, l)
	} else {
		rendered = make([]map[string]any, len(items))
		for i, it := range items {
			rendered[i] = l.render(it)
		}
		sortRendered(items, rendered, l, o.sortKey)
	}
	if o.reverse {
		reverse(items)
		if rendered != nil {
			reverse(rendered)
		}
	}
	lo, hi := 0, len(items)
	if o.paginate {
		lo = (o.page - 1) * o.pageSize
		pageCount := (len(items) + o.pageSize - 1) / o.pageSize
		if lo >= len(items) && o.page > 1 {
			return &httpError{http.StatusBadRequest, errorBody{"page_out_of_range",
				fmt.Sprintf("Page out of range, page: %d page size: %d, len: %d", o.page, o.pageSize, len(items))}}
		}
		hi = min(lo+o.pageSize, len(items))
		out := renderRange(items, rendered, l, lo, hi, o.columns)
		writeJSON(rq.w, http.StatusOK, map[string]any{
			"filtered_count": len(items), "item_count": len(out), "items": out, "page": o.page,
			"page_count": pageCount, "page_size": o.pageSize, "total_count": total,
		})
		return nil
	}
	streamJSONArray(rq, len(items), func(i int) any {
		var m map[string]any
		if rendered != nil {
			m = rendered[i]
		} else {
			m = l.render(items[i])
		}
		return selectColumns(m, o.columns)
	})
	return nil
}

// streamJSONArray writes an unpaginated list item by item, so a list of
// many thousands of rows is never held encoded in memory at once. The
// status is sent first; an encoding failure (which the renderers rule out)
// truncates the body and is logged.
func streamJSONArray(rq *request, n int, item func(int) any) {
	rq.w.Header().Set("Content-Type", "application/json")
	rq.w.Header().Set("Cache-Control", "no-cache")
	rq.w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(rq.w, 32<<10)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	bw.WriteByte('[')
	for i := 0; i < n; i++ {
		if i > 0 {
			bw.WriteByte(',')
		}
		if err := enc.Encode(item(i)); err != nil {
			rq.a.log.Error("encoding a list row", "path", rq.r.URL.Path, "err", err)
			return
		}
	}
	bw.WriteString("]\n")
	// A flush error means the client went away.
	_ = bw.Flush()
}

func renderRange[T any](items []T, rendered []map[string]any, l lister[T], lo, hi int, columns [][]string) []map[string]any {
	out := make([]map[string]any, 0, hi-lo)
	for i := lo; i < hi; i++ {
		var m map[string]any
		if rendered != nil {
			m = rendered[i]
		} else {
			m = l.render(items[i])
		}
		out = append(out, selectColumns(m, columns))
	}
	return out
}

func reverse[T any](s []T) {
	for i, j := 0, len(s)-1; i < j; i, j = i+1, j-1 {
		s[i], s[j] = s[j], s[i]
	}
}

// sortDefault orders by vhost, then name: RabbitMQ's default.
func sortDefault[T any](items []T, l lister[T]) {
	if l.name == nil {
		return
	}
	sort.SliceStable(items, func(i, j int) bool {
		if l.vhost != nil {
			if a, b := l.vhost(items[i]), l.vhost(items[j]); a != b {
				return a < b
			}
		}
		return l.name(items[i]) < l.name(items[j])
	})
}

// sortRendered orders items (and their rendered objects) by a dotted key,
// then by the default order; rows without the key come first.
func sortRendered[T any](items []T, rendered []map[string]any, l lister[T], key []string) {
	idx := make([]int, len(items))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(x, y int) bool {
		i, j := idx[x], idx[y]
		if c := compareJSON(lookupPath(rendered[i], key), lookupPath(rendered[j], key)); c != 0 {
			return c < 0
		}
		if l.vhost != nil {
			if a, b := l.vhost(items[i]), l.vhost(items[j]); a != b {
				return a < b
			}
		}
		return l.name != nil && l.name(items[i]) < l.name(items[j])
	})
	itemsCopy := append([]T(nil), items...)
	renderedCopy := append([]map[string]any(nil), rendered...)
	for to, from := range idx {
		items[to], rendered[to] = itemsCopy[from], renderedCopy[from]
	}
}

func lookupPath(m map[string]any, path []string) any {
	var v any = m
	for _, p := range path {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = mm[p]
	}
	return v
}

// compareJSON orders JSON values: null, then booleans, numbers, strings,
// and anything else by its printed form.
func compareJSON(a, b any) int {
	ra, rb := jsonRank(a), jsonRank(b)
	if ra != rb {
		return ra - rb
	}
	switch ra {
	case 1:
		ba, bb := a.(bool), b.(bool)
		switch {
		case ba == bb:
			return 0
		case !ba:
			return -1
		}
		return 1
	case 2:
		fa, fb := toFloat(a), toFloat(b)
		switch {
		case fa < fb:
			return -1
		case fa > fb:
			return 1
		}
		return 0
	case 3:
		return strings.Compare(a.(string), b.(string))
	case 4:
		return strings.Compare(fmt.Sprint(a), fmt.Sprint(b))
	}
	return 0
}

func jsonRank(v any) int {
	switch v.(type) {
	case nil:
		return 0
	case bool:
		return 1
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, float32, float64:
		return 2
	case string:
		return 3
	}
	return 4
}

func toFloat(v any) float64 {
	switch n := v.(type) {
	case int:
		return float64(n)
	case int8:
		return float64(n)
	case int16:
		return float64(n)
	case int32:
		return float64(n)
	case int64:
		return float64(n)
	case uint:
		return float64(n)
	case uint8:
		return float64(n)
	case uint16:
		return float64(n)
	case uint32:
		return float64(n)
	case uint64:
		return float64(n)
	case float32:
		return float64(n)
	case float64:
		return n
	}
	return 0
}

// selectColumns trims an object to the requested columns; a dotted column
// keeps its parent object with only the named field, as RabbitMQ does.
func selectColumns(m map[string]any, columns [][]string) map[string]any {
	if len(columns) == 0 {
		return m
	}
	out := make(map[string]any, len(columns))
	for _, path := range columns {
		copyPath(out, m, path)
	}
	return out
}

func copyPath(dst, src map[string]any, path []string) {
	v, ok := src[path[0]]
	if !ok {
		return
	}
	if len(path) == 1 {
		dst[path[0]] = v
		return
	}
	sub, ok := v.(map[string]any)
	if !ok {
		return
	}
	d, ok := dst[path[0]].(map[string]any)
	if !ok {
		d = make(map[string]any)
		dst[path[0]] = d
	}
	copyPath(d, sub, path[1:])
}
