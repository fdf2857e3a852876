package ui

import (
	"fmt"
	"regexp"
	"strings"
)

// This file holds a small JavaScript scanner used by the tests to catch
// broken scripts without a browser: unbalanced brackets, unterminated
// strings, template literals, comments and regular expressions, and module
// imports that name something the target module does not export. The
// browser test runs the real engine; this check runs everywhere.

// regexKeywords are the keywords after which "/" starts a regular expression
// rather than a division.
var regexKeywords = map[string]bool{
	"return": true, "typeof": true, "case": true, "do": true, "else": true, "in": true, "of": true,
	"new": true, "delete": true, "void": true, "throw": true, "instanceof": true, "yield": true, "await": true,
}

// jsScanner turns source into "code only" text: comments dropped, string,
// template and regex contents blanked, template ${…} expressions kept.
type jsScanner struct {
	src   string
	i     int
	out   strings.Builder
	stack []byte // '(', '[', '{', or 't' for an open template ${
	prevK byte   // kind of the last token: 0 none, 'i' word, 'n' number, 's' literal, 'p' punctuation
	prevW string // the word or punctuation of the last token
	// keepStrings copies string literals through unchanged, for reading
	// import specifiers from source without comments.
	keepStrings bool
}

func (s *jsScanner) line(pos int) int { return strings.Count(s.src[:min(pos, len(s.src))], "\n") + 1 }

func (s *jsScanner) errorf(pos int, format string, args ...any) error {
	return fmt.Errorf("line %d: %s", s.line(pos), fmt.Sprintf(format, args...))
}

func isIdentStart(c byte) bool {
	return c == '_' || c == '$' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80
}

func isIdentPart(c byte) bool { return isIdentStart(c) || (c >= '0' && c <= '9') }

func (s *jsScanner) regexAllowed() bool {
	switch s.prevK {
	case 0:
		return true
	case 'i':
		return regexKeywords[s.prevW]
	case 'n', 's':
		return false
	}
	return s.prevW != ")" && s.prevW != "]" && s.prevW != "}"
}

// scanJS checks src and returns its code-only text.
func scanJS(src string) (string, error) {
	s := &jsScanner{src: src}
	if err := s.run(); err != nil {
		return "", err
	}
	return s.out.String(), nil
}

// stripComments returns src without comments, string literals intact.
func stripComments(src string) (string, error) {
	s := &jsScanner{src: src, keepStrings: true}
	if err := s.run(); err != nil {
		return "", err
	}
	return s.out.String(), nil
}

func (s *jsScanner) run() error {
	src := s.src
	for s.i < len(src) {
		c := src[s.i]
		var next byte
		if s.i+1 < len(src) {
			next = src[s.i+1]
		}
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			s.out.WriteByte(c)
			s.i++
		case c == '/' && next == '/':
			for s.i < len(src) && src[s.i] != '\n' {
				s.i++
			}
		case c == '/' && next == '*':
			end := strings.Index(src[s.i+2:], "*/")
			if end < 0 {
				return s.errorf(s.i, "unterminated block comment")
			}
			s.out.WriteByte(' ')
			s.i += end + 4
		case c == '\'' || c == '"':
			if err := s.scanString(c); err != nil {
				return err
			}
		case c == '`':
			s.out.WriteByte('`')
			if err := s.scanTemplate(s.i + 1); err != nil {
				return err
			}
		case c == '/' && s.regexAllowed():
			if err := s.scanRegex(); err != nil {
				return err
			}
		case c == '(' || c == '[' || c == '{':
			s.stack = append(s.stack, c)
			s.punct(c)
		case c == ')' || c == ']' || c == '}':
			if err := s.close(c); err != nil {
				return err
			}
		case isIdentStart(c):
			j := s.i
			for j < len(src) && isIdentPart(src[j]) {
				j++
			}
			s.prevK, s.prevW = 'i', src[s.i:j]
			s.out.WriteString(s.prevW)
			s.i = j
		case c >= '0' && c <= '9' || (c == '.' && next >= '0' && next <= '9'):
			j := s.i
			for j < len(src) && (isIdentPart(src[j]) || src[j] == '.') {
				j++
			}
			s.prevK, s.prevW = 'n', src[s.i:j]
			s.out.WriteString(s.prevW)
			s.i = j
		default:
			s.punct(c)
		}
	}
	if len(s.stack) > 0 {
		return fmt.Errorf("end of file: %d unclosed bracket(s), innermost %q", len(s.stack), s.stack[len(s.stack)-1])
	}
	return nil
}

func (s *jsScanner) punct(c byte) {
	s.out.WriteByte(c)
	s.prevK, s.prevW = 'p', string(c)
	s.i++
}

func (s *jsScanner) close(c byte) error {
	want := map[byte]byte{')': '(', ']': '[', '}': '{'}[c]
	if len(s.stack) == 0 {
		return s.errorf(s.i, "%q closes nothing", c)
	}
	top := s.stack[len(s.stack)-1]
	s.stack = s.stack[:len(s.stack)-1]
	if c == '}' && top == 't' {
		s.out.WriteString(")")
		return s.scanTemplate(s.i + 1)
	}
	if top != want {
		return s.errorf(s.i, "%q closes %q", c, top)
	}
	s.punct(c)
	return nil
}

func (s *jsScanner) scanString(q byte) error {
	src := s.src
	j := s.i + 1
	for j < len(src) && src[j] != q {
		switch src[j] {
		case '\\':
			j += 2
			continue
		case '\n':
			return s.errorf(s.i, "unterminated string")
		}
		j++
	}
	if j >= len(src) {
		return s.errorf(s.i, "unterminated string")
	}
	if s.keepStrings {
		s.out.WriteString(src[s.i : j+1])
	} else {
		s.out.WriteString(`""`)
	}
	s.prevK, s.prevW = 's', ""
	s.i = j + 1
	return nil
}

// scanTemplate continues a template literal's text at j, up to its closing
// backquote or the next ${, which opens an expression on the stack.
func (s *jsScanner) scanTemplate(j int) error {
	src := s.src
	start := j
	for j < len(src) {
		switch {
		case src[j] == '\\':
			j += 2
			continue
		case src[j] == '`':
			s.out.WriteByte('`')
			s.prevK, s.prevW = 's', ""
			s.i = j + 1
			return nil
		case src[j] == '$' && j+1 < len(src) && src[j+1] == '{':
			s.stack = append(s.stack, 't')
			s.out.WriteString("(")
			s.prevK, s.prevW = 'p', "("
			s.i = j + 2
			return nil
		}
		j++
	}
	return s.errorf(start, "unterminated template literal")
}

func (s *jsScanner) scanRegex() error {
	src := s.src
	j := s.i + 1
	inClass := false
	for {
		if j >= len(src) || src[j] == '\n' {
			return s.errorf(s.i, "unterminated regular expression")
		}
		switch src[j] {
		case '\\':
			j += 2
			continue
		case '[':
			inClass = true
		case ']':
			inClass = false
		case '/':
			if !inClass {
				j++
				for j < len(src) && isIdentPart(src[j]) {
					j++
				}
				s.out.WriteString("/r/")
				s.prevK, s.prevW = 's', ""
				s.i = j
				return nil
			}
		}
		j++
	}
}

// ---- modules ---------------------------------------------------------------

var (
	importRe      = regexp.MustCompile(`(?s)\bimport\s+([^;'"]*?)\s*from\s*['"]([^'"]+)['"]`)
	importStmtRe  = regexp.MustCompile(`(?s)\bimport\s+[^;'"]*?\s*from\s*""\s*;?`)
	exportDeclRe  = regexp.MustCompile(`\bexport\s+(?:async\s+)?(?:function\*?|const|let|var|class)\s+([A-Za-z_$][\w$]*)`)
	exportListRe  = regexp.MustCompile(`\bexport\s*\{([^}]*)\}`)
	identifierRe  = regexp.MustCompile(`^[A-Za-z_$][\w$]*$`)
	namespaceRe   = regexp.MustCompile(`^\*\s+as\s+([A-Za-z_$][\w$]*)$`)
	namedImportRe = regexp.MustCompile(`^\{([^}]*)\}$`)
)

// jsImport is one import statement: the module specifier and the bindings.
type jsImport struct {
	spec      string
	namespace string            // "api" for import * as api
	named     map[string]string // local name → exported name
}

func parseImports(src string) ([]jsImport, error) {
	var out []jsImport
	for _, m := range importRe.FindAllStringSubmatch(src, -1) {
		imp := jsImport{spec: m[2], named: map[string]string{}}
		clause := strings.TrimSpace(m[1])
		if ns := namespaceRe.FindStringSubmatch(clause); ns != nil {
			imp.namespace = ns[1]
		} else if nm := namedImportRe.FindStringSubmatch(clause); nm != nil {
			for _, part := range strings.Split(nm[1], ",") {
				part = strings.TrimSpace(part)
				if part == "" {
					continue
				}
				exported, local, found := strings.Cut(part, " as ")
				exported, local = strings.TrimSpace(exported), strings.TrimSpace(local)
				if !found {
					local = exported
				}
				if !identifierRe.MatchString(exported) || !identifierRe.MatchString(local) {
					return nil, fmt.Errorf("import %q: cannot read binding %q", m[2], part)
				}
				imp.named[local] = exported
			}
		} else {
			return nil, fmt.Errorf("import %q: unsupported clause %q (use named or namespace imports)", m[2], clause)
		}
		out = append(out, imp)
	}
	return out, nil
}

// exportsOf lists the names a module's code-only text exports.
func exportsOf(code string) map[string]bool {
	names := map[string]bool{}
	for _, m := range exportDeclRe.FindAllStringSubmatch(code, -1) {
		names[m[1]] = true
	}
	for _, m := range exportListRe.FindAllStringSubmatch(code, -1) {
		for _, part := range strings.Split(m[1], ",") {
			part = strings.TrimSpace(part)
			if part == "" {
				continue
			}
			if _, as, found := strings.Cut(part, " as "); found {
				part = strings.TrimSpace(as)
			}
			names[part] = true
		}
	}
	return names
}

// checkModuleLinks verifies one module's imports against the modules they
// name: every named import is exported, every ns.member used is exported,
// and every imported binding is used.
func checkModuleLinks(code string, imports []jsImport, exportsBySpec func(spec string) (map[string]bool, error)) error {
	body := importStmtRe.ReplaceAllString(code, "")
	var errs []string
	for _, imp := range imports {
		exports, err := exportsBySpec(imp.spec)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		for local, exported := range imp.named {
			if !exports[exported] {
				errs = append(errs, fmt.Sprintf("imports %q from %s, which does not export it", exported, imp.spec))
			}
			if !regexp.MustCompile(`(^|[^\w$.])` + regexp.QuoteMeta(local) + `([^\w$]|$)`).MatchString(body) {
				errs = append(errs, fmt.Sprintf("imports %q from %s but never uses it", local, imp.spec))
			}
		}
		if imp.namespace != "" {
			memberRe := regexp.MustCompile(`(?:^|[^\w$.])` + regexp.QuoteMeta(imp.namespace) + `\.([A-Za-z_$][\w$]*)`)
			uses := memberRe.FindAllStringSubmatch(body, -1)
			if len(uses) == 0 {
				errs = append(errs, fmt.Sprintf("imports * as %s from %s but never uses it", imp.namespace, imp.spec))
			}
			for _, u := range uses {
				if !exports[u[1]] {
					errs = append(errs, fmt.Sprintf("uses %s.%s, which %s does not export", imp.namespace, u[1], imp.spec))
				}
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}
