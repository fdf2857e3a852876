package ui

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"
)

// static holds the UI: index.html, css/, js/ and the icon. The files are
// written by hand and served as they are; there is no build step.
//
//go:embed static
var static embed.FS

// contentTypes maps every file extension the UI ships to the Content-Type it
// is served with. Module scripts are refused by browsers unless they arrive
// with a JavaScript MIME type, so the types are fixed here rather than taken
// from the host's mime tables, which vary between machines.
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".svg":  "image/svg+xml",
}

// contentSecurityPolicy allows only the UI's own scripts, styles and API. The
// UI builds its DOM with textContent, never innerHTML, and this policy is the
// second line of defence against a queue name or payload carrying markup.
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; " +
	"img-src 'self' data: blob:; connect-src 'self'; object-src 'none'; base-uri 'none'; " +
	"form-action 'self'; frame-ancestors 'none'"

// asset is one embedded file, prepared once for serving.
type asset struct {
	data        []byte
	contentType string
	etag        string
}

var (
	assetsOnce sync.Once
	assets     map[string]asset // URL path ("/js/app.js") → file; "/" is index.html
	assetsErr  error
)

// loadAssets reads every embedded file once. The set is fixed at build time,
// so the map never grows after this.
func loadAssets() (map[string]asset, error) {
	assetsOnce.Do(func() {
		root, err := fs.Sub(static, "static")
		if err != nil {
			assetsErr = err
			return
		}
		m := make(map[string]asset)
		assetsErr = fs.WalkDir(root, ".", func(name string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			data, err := fs.ReadFile(root, name)
			if err != nil {
				return err
			}
			ct, ok := contentTypes[path.Ext(name)]
			if !ok {
				ct = "application/octet-stream"
			}
			sum := sha256.Sum256(data)
			m["/"+name] = asset{data: data, contentType: ct, etag: `"` + hex.EncodeToString(sum[:12]) + `"`}
			return nil
		})
		if idx, ok := m["/index.html"]; ok {
			m["/"] = idx
		}
		assets = m
	})
	return assets, assetsErr
}

// Handler returns the handler that serves the web UI. Mount it at the root of
// the management listener ("/"); the UI fetches the API at the relative path
// "api/", so it also works behind a reverse proxy that adds a path prefix.
//
// Only GET and HEAD are answered (405 otherwise). "/" and "/index.html" serve
// the single page; every other path names one embedded file exactly, and
// anything else, directories included, is 404. Responses carry an ETag and
// "Cache-Control: no-cache", so browsers revalidate and pick up a new build at
// once, plus a Content-Security-Policy that forbids inline and foreign scripts.
func Handler() http.Handler {
	return http.HandlerFunc(serve)
}

func serve(w http.ResponseWriter, r *http.Request) {
	m, err := loadAssets()
	if err != nil {
		// The embedded tree is part of the binary; failing to read it is a
		// build defect, reported to the client rather than hidden.
		http.Error(w, "ui: embedded files unreadable: "+err.Error(), http.StatusInternalServerError)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	a, ok := m[r.URL.Path]
	if !ok || strings.Contains(r.URL.Path, "..") {
		http.NotFound(w, r)
		return
	}
	h := w.Header()
	h.Set("Content-Type", a.contentType)
	h.Set("ETag", a.etag)
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	if a.contentType == contentTypes[".html"] {
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Frame-Options", "DENY")
	}
	// ServeContent answers If-None-Match with 304, HEAD without a body, and
	// Range requests; the zero modtime leaves Last-Modified out.
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(a.data))
}
