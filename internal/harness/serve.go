package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"
)

// SocketName is the fault-control socket's name in a `strata up` data
// directory.
const SocketName = "fault.sock"

// Fault operations, as Request.Op names them.
const (
	OpKill          = "kill"
	OpFreeze        = "freeze"
	OpThaw          = "thaw"
	OpRestart       = "restart"
	OpKillRegion    = "kill-region"
	OpFreezeRegion  = "freeze-region"
	OpThawRegion    = "thaw-region"
	OpRestartRegion = "restart-region"
	OpCut           = "cut"
	OpHeal          = "heal"
)

// Request is the body of POST /v1/faults: one fault operation. Node ops
// (kill, freeze, thaw, restart) need Region and ID; region ops need
// Region; cut and heal need two different regions A and B. Other fields
// must be empty.
type Request struct {
	Op     string `json:"op"`
	Region string `json:"region,omitempty"`
	ID     string `json:"id,omitempty"`
	A      string `json:"a,omitempty"`
	B      string `json:"b,omitempty"`
}

// maxRequest bounds a request body in bytes.
const maxRequest = 4096

// ErrBadRequest: a fault request that cannot be carried out as written.
var ErrBadRequest = errors.New("harness: bad fault request")

// DecodeRequest parses and checks one request body: a single JSON object
// of at most 4 KiB with only Request's fields, a known op and the fields
// that op needs (names are 1–128 bytes). Errors wrap ErrBadRequest and
// say what was wrong.
func DecodeRequest(body []byte) (Request, error) {
	var r Request
	if len(body) > maxRequest {
		return r, fmt.Errorf("%w: body is %d bytes (at most %d)", ErrBadRequest, len(body), maxRequest)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return Request{}, fmt.Errorf("%w: body is not a JSON object of op, region, id, a, b: %v", ErrBadRequest, err)
	}
	if dec.More() {
		return Request{}, fmt.Errorf("%w: more than one JSON value in the body", ErrBadRequest)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Request{}, fmt.Errorf("%w: trailing data after the JSON object", ErrBadRequest)
	}
	return r, r.check()
}

func (r Request) check() error {
	name := func(field, v string) error {
		if v == "" {
			return fmt.Errorf("%w: op %q needs %s", ErrBadRequest, r.Op, field)
		}
		if len(v) > 128 {
			return fmt.Errorf("%w: %s is %d bytes (at most 128)", ErrBadRequest, field, len(v))
		}
		return nil
	}
	empty := func(fields map[string]string) error {
		for f, v := range fields {
			if v != "" {
				return fmt.Errorf("%w: op %q takes no %s (got %q)", ErrBadRequest, r.Op, f, v)
			}
		}
		return nil
	}
	switch r.Op {
	case OpKill, OpFreeze, OpThaw, OpRestart:
		return errors.Join(name("region", r.Region), name("id", r.ID), empty(map[string]string{"a": r.A, "b": r.B}))
	case OpKillRegion, OpFreezeRegion, OpThawRegion, OpRestartRegion:
		return errors.Join(name("region", r.Region), empty(map[string]string{"id": r.ID, "a": r.A, "b": r.B}))
	case OpCut, OpHeal:
		if err := errors.Join(name("a", r.A), name("b", r.B), empty(map[string]string{"region": r.Region, "id": r.ID})); err != nil {
			return err
		}
		if r.A == r.B {
			return fmt.Errorf("%w: a and b are both %q: a link joins two different regions", ErrBadRequest, r.A)
		}
		return nil
	case "":
		return fmt.Errorf("%w: no op (one of kill, freeze, thaw, restart, kill-region, freeze-region, thaw-region, restart-region, cut, heal)", ErrBadRequest)
	default:
		return fmt.Errorf("%w: unknown op %q (one of kill, freeze, thaw, restart, kill-region, freeze-region, thaw-region, restart-region, cut, heal)", ErrBadRequest, r.Op)
	}
}

// Apply carries out r on f.
func Apply(f Faults, r Request) error {
	if err := r.check(); err != nil {
		return err
	}
	switch r.Op {
	case OpKill:
		return f.Kill(r.Region, r.ID)
	case OpFreeze:
		return f.Freeze(r.Region, r.ID)
	case OpThaw:
		return f.Thaw(r.Region, r.ID)
	case OpRestart:
		return f.Restart(r.Region, r.ID)
	case OpKillRegion:
		return f.KillRegion(r.Region)
	case OpFreezeRegion:
		return f.FreezeRegion(r.Region)
	case OpThawRegion:
		return f.ThawRegion(r.Region)
	case OpRestartRegion:
		return f.RestartRegion(r.Region)
	case OpCut:
		return f.Cut(r.A, r.B)
	default: // OpHeal; check accepted nothing else
		return f.Heal(r.A, r.B)
	}
}

// Error codes in the endpoint's error answers ({"error": "...", "code":
// "..."}), and the sentinel each stands for.
var codes = []struct {
	code   string
	status int
	err    error
}{
	{"bad_request", http.StatusBadRequest, ErrBadRequest},
	{"unknown_node", http.StatusNotFound, ErrUnknownNode},
	{"not_running", http.StatusConflict, ErrNotRunning},
	{"no_network", http.StatusConflict, ErrNoNetwork},
	{"closed", http.StatusServiceUnavailable, ErrClosed},
}

type errorBody struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

// Handler serves the fault-control API for h:
//
//	GET  /v1/nodes   → {"nodes": [NodeInfo...]}
//	POST /v1/faults  Request → {"ok": true}
//
// Errors are {"error": message, "code": bad_request | unknown_node |
// not_running | no_network | closed | failed} with status 400, 404, 409,
// 409, 503 or 500.
func Handler(h *Harness) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/nodes", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			writeError(w, http.StatusMethodNotAllowed, fmt.Errorf("%w: %s /v1/nodes (use GET)", ErrBadRequest, r.Method))
			return
		}
		infos := h.NodeInfos()
		if infos == nil {
			infos = []NodeInfo{}
		}
		writeJSON(w, http.StatusOK, map[string]any{"nodes": infos})
	})
	mux.HandleFunc("/v1/faults", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			writeError(w, http.StatusMethodNotAllowed, fmt.Errorf("%w: %s /v1/faults (use POST)", ErrBadRequest, r.Method))
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, maxRequest+1))
		if err != nil {
			writeError(w, 0, fmt.Errorf("%w: reading the body: %v", ErrBadRequest, err))
			return
		}
		req, err := DecodeRequest(body)
		if err == nil {
			err = Apply(h.Faults(), req)
		}
		if err != nil {
			writeError(w, 0, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Errorf("%w: no route %s %s (GET /v1/nodes, POST /v1/faults)", ErrBadRequest, r.Method, r.URL.Path))
	})
	return mux
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeError answers err with its code; status 0 takes the code's.
func writeError(w http.ResponseWriter, status int, err error) {
	code, st := "failed", http.StatusInternalServerError
	for _, c := range codes {
		if errors.Is(err, c.err) {
			code, st = c.code, c.status
			break
		}
	}
	if status != 0 {
		st = status
	}
	writeJSON(w, st, errorBody{Error: err.Error(), Code: code})
}

// ListenSocket listens on a unix socket at path with mode 0600, first
// removing a socket file left there by an earlier run (the caller owns
// the directory: `strata up` holds the data directory's lock). A path
// that exists and is not a socket is an error.
func ListenSocket(path string) (net.Listener, error) {
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("harness: %s exists and is not a socket", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("harness: removing the old socket: %w", err)
		}
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("harness: fault socket: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("harness: fault socket: %w", err)
	}
	return ln, nil
}

// ServeListener serves Handler(h) on ln until ctx ends, then closes ln,
// removes a unix socket's file and returns nil (or the error that stopped
// serving). Requests in flight get up to 5 s to finish.
func ServeListener(ctx context.Context, h *Harness, ln net.Listener) error {
	srv := &http.Server{Handler: Handler(h), ReadHeaderTimeout: 5 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	var err error
	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = srv.Shutdown(sctx)
		cancel()
		<-errc
	case err = <-errc:
	}
	if a, ok := ln.Addr().(*net.UnixAddr); ok {
		_ = os.Remove(a.Name)
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// Serve serves the fault-control endpoint (Handler) over HTTP on a unix
// socket at socketPath (mode 0600) until ctx ends; the socket file is
// removed on return.
func Serve(ctx context.Context, h *Harness, socketPath string) error {
	ln, err := ListenSocket(socketPath)
	if err != nil {
		return err
	}
	return ServeListener(ctx, h, ln)
}
