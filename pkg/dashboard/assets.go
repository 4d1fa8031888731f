package dashboard

import (
	"bytes"
	"embed"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"strings"
)

// web holds the page: index.html and what it loads from /static/.
//
//go:embed web
var web embed.FS

func embeddedAssets() (fs.FS, error) {
	assets, err := fs.Sub(web, "web")
	if err != nil {
		return nil, fmt.Errorf("open the embedded web files: %w", err)
	}
	return assets, nil
}

// forbiddenPage is what GET / answers without the token.
const forbiddenPage = `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Stepwise dashboard</title></head>
<body><h1>Stepwise dashboard</h1>
<p>This address needs the token that <code>kubectl stepwise dashboard</code> printed with it.
Open the URL the command printed (or run it again).</p></body></html>
`

// serveIndex is GET /?token=...: the page, to whoever has the token. Without it the page
// would be harmless (it holds no data) but useless; refusing it also tells the user at
// once that the URL is wrong.
func (s *Server) serveIndex(w http.ResponseWriter, r *http.Request) {
	fromURL := s.token.matches(r.URL.Query().Get("token"))
	if fromURL {
		// A reload comes without the token (the page removes it from the address bar):
		// the cookie lets it in. It holds a value of its own, not the API token: browsers
		// send it to every port of 127.0.0.1, and all it opens is this page, which holds
		// no data (the API takes the token from a header only). Never read by scripts.
		http.SetCookie(w, &http.Cookie{Name: indexCookie, Value: s.page, Path: "/",
			HttpOnly: true, SameSite: http.SameSiteStrictMode})
	}
	if !fromURL && !s.hasIndexCookie(r) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(http.StatusForbidden)
		_, _ = io.WriteString(w, forbiddenPage)
		return
	}
	page, err := fs.ReadFile(s.cfg.Assets, "index.html")
	if err != nil {
		http.Error(w, "the dashboard's page is missing from this build", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(page)
}

// indexCookie lets a reload of the page in without the token in its URL.
const indexCookie = "stepwise-dashboard"

// hasIndexCookie tells whether r carries the cookie of a page opened with the token.
func (s *Server) hasIndexCookie(r *http.Request) bool {
	c, err := r.Cookie(indexCookie)
	return err == nil && s.pageTok.matches(c.Value)
}

// serveStatic is GET /static/PATH: a file of the assets, no token needed (nothing in them
// is secret), no directory listings.
func (s *Server) serveStatic(w http.ResponseWriter, r *http.Request) {
	name := r.URL.Path // /static/ stripped
	if name == "" || strings.HasSuffix(name, "/") || !fs.ValidPath(name) {
		http.NotFound(w, r)
		return
	}
	f, err := s.cfg.Assets.Open(name)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	defer func() { _ = f.Close() }()
	info, err := f.Stat()
	if err != nil || info.IsDir() {
		http.NotFound(w, r)
		return
	}
	content, ok := f.(io.ReadSeeker)
	if !ok { // embed.FS files seek; another fs.FS may not
		data, err := io.ReadAll(f)
		if err != nil {
			http.Error(w, "read "+name, http.StatusInternalServerError)
			return
		}
		content = bytes.NewReader(data)
	}
	// Revalidate every time: the files change with the binary, and loopback is cheap.
	w.Header().Set("Cache-Control", "no-cache")
	http.ServeContent(w, r, info.Name(), info.ModTime(), content)
}
