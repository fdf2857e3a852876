package ui

import (
	"bytes"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// startUI serves Handler on a real 127.0.0.1 listener.
func startUI(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(Handler())
	t.Cleanup(srv.Close)
	return srv
}

func fetch(t *testing.T, srv *httptest.Server, method, p string, hdr map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+p, nil)
	if err != nil {
		t.Fatalf("request %s %s: %v", method, p, err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := srv.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, p, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, p, err)
	}
	return res, body
}

// embeddedFiles lists every file under static/ by its URL path.
func embeddedFiles(t *testing.T) map[string][]byte {
	t.Helper()
	root, err := fs.Sub(static, "static")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	err = fs.WalkDir(root, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(root, name)
		files["/"+name] = data
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 5 {
		t.Fatalf("only %d embedded files", len(files))
	}
	return files
}

func TestUIServesEveryEmbeddedFileWithItsContentType(t *testing.T) {
	srv := startUI(t)
	for p, data := range embeddedFiles(t) {
		want, ok := contentTypes[path.Ext(p)]
		if !ok {
			t.Errorf("%s: extension %q has no content type; add it to contentTypes", p, path.Ext(p))
			continue
		}
		res, body := fetch(t, srv, http.MethodGet, p, nil)
		if res.StatusCode != http.StatusOK {
			t.Errorf("GET %s: status %d", p, res.StatusCode)
			continue
		}
		if got := res.Header.Get("Content-Type"); got != want {
			t.Errorf("GET %s: Content-Type %q, want %q", p, got, want)
		}
		if !bytes.Equal(body, data) {
			t.Errorf("GET %s: body differs from the embedded file (%d vs %d bytes)", p, len(body), len(data))
		}
		if res.Header.Get("ETag") == "" || res.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: missing ETag or nosniff: %v", p, res.Header)
		}
	}
}

func TestUIIndexAtRootWithSecurityHeaders(t *testing.T) {
	srv := startUI(t)
	files := embeddedFiles(t)
	for _, p := range []string{"/", "/index.html"} {
		res, body := fetch(t, srv, http.MethodGet, p, nil)
		if res.StatusCode != http.StatusOK || !bytes.Equal(body, files["/index.html"]) {
			t.Fatalf("GET %s: status %d, %d bytes; want index.html", p, res.StatusCode, len(body))
		}
		if ct := res.Header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
			t.Errorf("GET %s: Content-Type %q", p, ct)
		}
		csp := res.Header.Get("Content-Security-Policy")
		if !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") {
			t.Errorf("GET %s: Content-Security-Policy %q", p, csp)
		}
		if res.Header.Get("X-Frame-Options") != "DENY" {
			t.Errorf("GET %s: X-Frame-Options %q", p, res.Header.Get("X-Frame-Options"))
		}
	}
}

// The CSP forbids inline script and style, so the HTML must carry none.
func TestUIHTMLHasNoInlineScriptOrStyle(t *testing.T) {
	html := string(embeddedFiles(t)["/index.html"])
	tags := regexp.MustCompile(`<script[^>]*>`).FindAllString(html, -1)
	if len(tags) == 0 {
		t.Fatal("index.html has no script tag")
	}
	for _, tag := range tags {
		if !strings.Contains(tag, " src=") {
			t.Errorf("index.html has an inline script the CSP would block: %q", tag)
		}
	}
	for _, re := range []*regexp.Regexp{regexp.MustCompile(`\son[a-z]+\s*=`), regexp.MustCompile(`\sstyle\s*=`), regexp.MustCompile(`<style`)} {
		if m := re.FindString(html); m != "" {
			t.Errorf("index.html has inline code or style the CSP would block: %q", m)
		}
	}
}

func TestUIRejectsOtherMethodsAndPaths(t *testing.T) {
	srv := startUI(t)
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete} {
		res, _ := fetch(t, srv, m, "/", nil)
		if res.StatusCode != http.StatusMethodNotAllowed || res.Header.Get("Allow") != "GET, HEAD" {
			t.Errorf("%s /: status %d, Allow %q", m, res.StatusCode, res.Header.Get("Allow"))
		}
	}
	for _, p := range []string{"/nope", "/js/", "/js", "/static/index.html", "/js/../index.html", "/api/overview", "/index.html/"} {
		res, _ := fetch(t, srv, http.MethodGet, p, nil)
		if res.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: status %d, want 404", p, res.StatusCode)
		}
	}
}

func TestUIConditionalGetAndHead(t *testing.T) {
	srv := startUI(t)
	res, body := fetch(t, srv, http.MethodGet, "/js/app.js", nil)
	etag := res.Header.Get("ETag")
	if res.StatusCode != http.StatusOK || etag == "" || res.Header.Get("Cache-Control") != "no-cache" {
		t.Fatalf("GET: status %d, ETag %q, Cache-Control %q", res.StatusCode, etag, res.Header.Get("Cache-Control"))
	}
	res, again := fetch(t, srv, http.MethodGet, "/js/app.js", map[string]string{"If-None-Match": etag})
	if res.StatusCode != http.StatusNotModified || len(again) != 0 {
		t.Errorf("If-None-Match: status %d, %d bytes; want 304 and no body", res.StatusCode, len(again))
	}
	res, head := fetch(t, srv, http.MethodHead, "/js/app.js", nil)
	if res.StatusCode != http.StatusOK || len(head) != 0 || res.ContentLength != int64(len(body)) {
		t.Errorf("HEAD: status %d, %d body bytes, Content-Length %d; want 200, 0, %d", res.StatusCode, len(head), res.ContentLength, len(body))
	}
}

var htmlRefRe = regexp.MustCompile(`\s(?:src|href)="([^"#][^"]*)"`)

// TestUIReferencedAssetsExist follows index.html's references and every
// module import from js/app.js over HTTP, checks each arrives with the right
// type, and that no embedded script is unreachable.
func TestUIReferencedAssetsExist(t *testing.T) {
	srv := startUI(t)
	_, index := fetch(t, srv, http.MethodGet, "/", nil)
	refs := htmlRefRe.FindAllStringSubmatch(string(index), -1)
	if len(refs) < 3 {
		t.Fatalf("index.html references only %d assets", len(refs))
	}
	var modules []string
	for _, m := range refs {
		u, err := url.Parse(m[1])
		if err != nil || u.IsAbs() {
			t.Errorf("index.html: reference %q must be a relative URL (err %v)", m[1], err)
			continue
		}
		p := path.Join("/", u.Path)
		res, _ := fetch(t, srv, http.MethodGet, p, nil)
		if res.StatusCode != http.StatusOK {
			t.Errorf("index.html references %s: status %d", p, res.StatusCode)
		}
		if path.Ext(p) == ".js" {
			modules = append(modules, p)
		}
	}
	if len(modules) != 1 || modules[0] != "/js/app.js" {
		t.Fatalf("index.html loads scripts %v, want [/js/app.js]", modules)
	}
	seen := map[string]bool{}
	for len(modules) > 0 {
		p := modules[0]
		modules = modules[1:]
		if seen[p] {
			continue
		}
		seen[p] = true
		res, body := fetch(t, srv, http.MethodGet, p, nil)
		if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "text/javascript; charset=utf-8" {
			t.Errorf("module %s: status %d, Content-Type %q", p, res.StatusCode, res.Header.Get("Content-Type"))
			continue
		}
		src, err := stripComments(string(body))
		if err != nil {
			t.Errorf("module %s: %v", p, err)
			continue
		}
		imports, err := parseImports(src)
		if err != nil {
			t.Errorf("module %s: %v", p, err)
			continue
		}
		for _, imp := range imports {
			if !strings.HasPrefix(imp.spec, "./") && !strings.HasPrefix(imp.spec, "../") {
				t.Errorf("module %s imports %q: only relative imports of our own files are allowed", p, imp.spec)
				continue
			}
			modules = append(modules, path.Join(path.Dir(p), imp.spec))
		}
	}
	var orphans []string
	for p := range embeddedFiles(t) {
		if path.Ext(p) == ".js" && !seen[p] {
			orphans = append(orphans, p)
		}
	}
	sort.Strings(orphans)
	if len(orphans) > 0 {
		t.Errorf("scripts never imported from js/app.js: %v", orphans)
	}
}

// TestUIScriptsParse scans every script for syntax a browser would reject
// (unbalanced brackets, unterminated literals) and checks that every import
// names an export of its module and is used.
func TestUIScriptsParse(t *testing.T) {
	files := embeddedFiles(t)
	codes := map[string]string{}
	for p, data := range files {
		if path.Ext(p) != ".js" {
			continue
		}
		code, err := scanJS(string(data))
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		if strings.Contains(code, "innerHTML") || strings.Contains(code, "outerHTML") || strings.Contains(code, "insertAdjacentHTML") {
			t.Errorf("%s sets HTML from strings; build DOM with h() so broker data stays text", p)
		}
		if strings.Contains(code, "eval(") || strings.Contains(code, "new Function") {
			t.Errorf("%s evaluates strings as code", p)
		}
		codes[p] = code
	}
	if len(codes) < 8 {
		t.Fatalf("only %d scripts scanned", len(codes))
	}
	for p, data := range files {
		code, ok := codes[p]
		if !ok {
			continue
		}
		src, err := stripComments(string(data))
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		imports, err := parseImports(src)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		err = checkModuleLinks(code, imports, func(spec string) (map[string]bool, error) {
			target := path.Join(path.Dir(p), spec)
			c, ok := codes[target]
			if !ok {
				return nil, &fs.PathError{Op: "import", Path: target, Err: fs.ErrNotExist}
			}
			return exportsOf(c), nil
		})
		if err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
}

func TestJSCheckFindsBrokenScripts(t *testing.T) {
	good := []string{
		"const a = (b) => b / 2;",
		"if (x) { y = /a\\/b[/]c/g.test(s); }",
		"const t = `a ${b + `c ${d}`} e`; const o = {k: [1, 2]};",
		"// a comment with ' and ( \n/* block ) */ f('x', \"y\")",
		"return /x/.test(a) ? a[0] / 3 : 0;",
		"const r = `${a}${{k: 1}.k}`;",
	}
	for _, src := range good {
		if _, err := scanJS(src); err != nil {
			t.Errorf("scanJS(%q) = %v, want no error", src, err)
		}
	}
	bad := []string{
		"function f() { return 1;",
		"f(a, b]",
		"const s = 'abc;",
		"const s = \"abc\n\";",
		"const t = `abc ${x}",
		"const t = `abc ${x`",
		"/* never closed",
		"x = (/abc)",
		"}",
	}
	for _, src := range bad {
		if _, err := scanJS(src); err == nil {
			t.Errorf("scanJS(%q) = nil, want an error", src)
		}
	}
}

func TestJSCheckFindsBrokenImports(t *testing.T) {
	lib, err := scanJS("export function used() {}\nexport const other = 1;\nfunction hidden() {}\nexport {hidden as shown};")
	if err != nil {
		t.Fatal(err)
	}
	exports := func(string) (map[string]bool, error) { return exportsOf(lib), nil }
	check := func(src string) error {
		stripped, err := stripComments(src)
		if err != nil {
			return err
		}
		imports, err := parseImports(stripped)
		if err != nil {
			return err
		}
		code, err := scanJS(src)
		if err != nil {
			return err
		}
		return checkModuleLinks(code, imports, exports)
	}
	if err := check("// import x from 'nowhere' in a comment\nimport {used, shown as s} from './lib.js';\nused(s);"); err != nil {
		t.Errorf("valid imports: %v", err)
	}
	if err := check("import * as lib from './lib.js';\nlib.used(lib.other);"); err != nil {
		t.Errorf("valid namespace import: %v", err)
	}
	for _, src := range []string{
		"import {missing} from './lib.js';\nmissing();",
		"import {used, other} from './lib.js';\nused();",
		"import * as lib from './lib.js';\nlib.hidden();",
		"import lib from './lib.js';\nlib();",
	} {
		if err := check(src); err == nil {
			t.Errorf("check(%q) = nil, want an error", src)
		}
	}
}

func BenchmarkUIServeAsset(b *testing.B) {
	h := Handler()
	req := httptest.NewRequest(http.MethodGet, "/js/app.js", nil)
	b.ReportAllocs()
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatalf("status %d", rec.Code)
		}
	}
}

// FuzzUIPath serves arbitrary paths: the handler must answer 200 with exactly
// the embedded file of that path, or 404, and never anything else.
func FuzzUIPath(f *testing.F) {
	for _, p := range []string{"/", "/index.html", "/js/app.js", "/../ui.go", "/js/..%2fapp.js", "//js/app.js", "/css/app.css\x00"} {
		f.Add(p)
	}
	m, err := loadAssets()
	if err != nil {
		f.Fatal(err)
	}
	h := Handler()
	f.Fuzz(func(t *testing.T, p string) {
		req := &http.Request{Method: http.MethodGet, URL: &url.URL{Path: p}, Header: http.Header{}}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		switch rec.Code {
		case http.StatusOK:
			a, ok := m[p]
			if !ok || !bytes.Equal(rec.Body.Bytes(), a.data) {
				t.Fatalf("path %q: 200 with %d bytes that are not its embedded file", p, rec.Body.Len())
			}
		case http.StatusNotFound:
			if _, ok := m[p]; ok && !strings.Contains(p, "..") {
				t.Fatalf("path %q: 404 for an embedded file", p)
			}
		default:
			t.Fatalf("path %q: status %d", p, rec.Code)
		}
	})
}
