package adminhttp

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/stratamesh/strata/admin"
)

// ReadyCheck reports why the node is not ready, or nil when it is.
type ReadyCheck func(ctx context.Context) error

// Server is a node's admin HTTP server.
type Server struct {
	mux     *http.ServeMux
	routes  []string
	checks  map[string]ReadyCheck
	logger  *slog.Logger
	srv     *http.Server
	ln      net.Listener
	tls     bool // serving HTTPS
	served  chan struct{}
	started bool

	closeOnce sync.Once
	closeErr  error
}

// New returns a server with no routes: mount them with Handle (region
// mounts admin.Routes, /healthz and /readyz among them, with the server
// as their admin.Health).
func New(logger *slog.Logger) *Server {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{mux: http.NewServeMux(), checks: map[string]ReadyCheck{}, logger: logger}
	// Unknown paths get the admin API's JSON error shape (not listed in
	// Routes: it is the fallback, not a route).
	s.mux.Handle("/", http.HandlerFunc(s.fallback))
	return s
}

// fallback answers a request no route took: 405 with Allow when the path
// has routes for other methods, else 404; both in the JSON error shape.
func (s *Server) fallback(w http.ResponseWriter, r *http.Request) {
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		if m == r.Method {
			continue
		}
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := s.mux.Handler(probe); pattern != "" && pattern != "/" {
			allow = append(allow, m)
		}
	}
	if len(allow) == 0 {
		admin.WriteError(w, admin.Errorf(admin.CodeNotFound, "", "no such path: %s", r.URL.Path))
		return
	}
	w.Header().Set("Allow", strings.Join(allow, ", "))
	admin.WriteError(w, admin.Errorf(admin.CodeMethodNotAllowed, "", "%s %s: this path takes %s", r.Method, r.URL.Path, strings.Join(allow, ", ")))
}

// Handle mounts h on pattern (net/http's "METHOD /path" form). It panics
// if called after Start, like http.ServeMux on a conflicting pattern.
func (s *Server) Handle(pattern string, h http.Handler) {
	if s.started {
		panic("adminhttp: Handle after Start")
	}
	s.mux.Handle(pattern, h)
	s.routes = append(s.routes, pattern)
}

// Routes lists the mounted patterns, sorted (for the OpenAPI check).
func (s *Server) Routes() []string {
	out := append([]string(nil), s.routes...)
	sort.Strings(out)
	return out
}

// AddReadyCheck registers a named readiness check run by /readyz.
func (s *Server) AddReadyCheck(name string, c ReadyCheck) {
	if s.started {
		panic("adminhttp: AddReadyCheck after Start")
	}
	s.checks[name] = c
}

// Ready runs the readiness checks and returns the failing ones with
// their errors (empty: ready). It is the admin.Health of /readyz.
func (s *Server) Ready(ctx context.Context) map[string]string {
	failing := map[string]string{}
	for name, c := range s.checks {
		if err := c(ctx); err != nil {
			failing[name] = err.Error()
		}
	}
	return failing
}

// Start listens on addr (host:port; port 0 picks a free one) and serves in
// the background until Close.
func (s *Server) Start(addr string) error { return s.StartTLS(addr, nil) }

// StartTLS is Start serving HTTPS with cfg (nil: plain HTTP, as Start).
func (s *Server) StartTLS(addr string, cfg *tls.Config) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("adminhttp: listen %s: %w", addr, err)
	}
	s.started = true
	s.ln = ln
	if cfg != nil {
		s.tls = true
		ln = tls.NewListener(ln, cfg)
	}
	s.srv = &http.Server{Handler: s.mux, ReadHeaderTimeout: 10 * time.Second}
	s.served = make(chan struct{})
	go func() {
		defer close(s.served)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.logger.Error("admin http server stopped", "err", err)
		}
	}()
	return nil
}

// Addr is the bound address (host:port) after Start.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// URL is "http://" + Addr, or "https://" + Addr when serving TLS.
func (s *Server) URL() string {
	if s.tls {
		return "https://" + s.Addr()
	}
	return "http://" + s.Addr()
}

// Close stops accepting, waits for in-flight requests until ctx ends, then
// closes what is left. Idempotent; a no-op if Start was never called.
func (s *Server) Close(ctx context.Context) error {
	s.closeOnce.Do(func() {
		if s.srv == nil {
			return
		}
		if err := s.srv.Shutdown(ctx); err != nil {
			s.closeErr = s.srv.Close()
		}
		<-s.served
	})
	return s.closeErr
}
