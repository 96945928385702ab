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
	"path/filepath"
	"time"
)

// Remote is a Faults for the mesh of a running `strata up`, through its
// fault socket. Safe for concurrent use.
type Remote struct {
	socket string
	http   *http.Client
}

var _ Faults = (*Remote)(nil)

// Dial connects to <dataDir>/fault.sock of a running `strata up` and
// checks that it answers.
func Dial(dataDir string) (*Remote, error) {
	path := filepath.Join(dataDir, SocketName)
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("harness: no fault socket %s (is `strata up --data-dir %s` running?): %w", path, dataDir, err)
	}
	r := DialSocket(path)
	if _, err := r.Nodes(); err != nil {
		return nil, err
	}
	return r, nil
}

// DialSocket returns a Remote for the socket at path without contacting
// it.
func DialSocket(path string) *Remote {
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", path)
	}}
	// Restarts wait for ready reports (up to a minute per role).
	return &Remote{socket: path, http: &http.Client{Transport: tr, Timeout: 5 * time.Minute}}
}

// Close releases idle connections.
func (r *Remote) Close() { r.http.CloseIdleConnections() }

func (r *Remote) do(method, path string, body any, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, "http://strata-up"+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := r.http.Do(req)
	if err != nil {
		return fmt.Errorf("harness: fault socket %s: %w", r.socket, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<22))
	if err != nil {
		return fmt.Errorf("harness: fault socket %s: %w", r.socket, err)
	}
	if resp.StatusCode != http.StatusOK {
		var e errorBody
		if json.Unmarshal(b, &e) != nil || e.Error == "" {
			return fmt.Errorf("harness: fault socket %s: %s %s: %s", r.socket, method, path, resp.Status)
		}
		return &RemoteError{Code: e.Code, Message: e.Error}
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("harness: fault socket %s: answer: %w", r.socket, err)
		}
	}
	return nil
}

// RemoteError is an error answered by the fault socket. errors.Is matches
// the sentinel its code stands for (ErrUnknownNode, ErrNoNetwork, …).
type RemoteError struct {
	Code, Message string
}

func (e *RemoteError) Error() string { return e.Message }

// Unwrap is the sentinel of e's code (nil for "failed").
func (e *RemoteError) Unwrap() error {
	for _, c := range codes {
		if c.code == e.Code {
			return c.err
		}
	}
	return nil
}

func (r *Remote) apply(req Request) error {
	if err := req.check(); err != nil {
		return err
	}
	return r.do(http.MethodPost, "/v1/faults", req, nil)
}

// Kill, Freeze, Thaw, Restart, the region forms, Cut and Heal ask the
// fault socket to do what Faults says; errors.Is matches the harness's
// sentinels (ErrUnknownNode, ErrNotRunning, ErrNoNetwork, ErrBadRequest).
func (r *Remote) Kill(region, id string) error {
	return r.apply(Request{Op: OpKill, Region: region, ID: id})
}
func (r *Remote) Freeze(region, id string) error {
	return r.apply(Request{Op: OpFreeze, Region: region, ID: id})
}
func (r *Remote) Thaw(region, id string) error {
	return r.apply(Request{Op: OpThaw, Region: region, ID: id})
}
func (r *Remote) Restart(region, id string) error {
	return r.apply(Request{Op: OpRestart, Region: region, ID: id})
}
func (r *Remote) KillRegion(region string) error {
	return r.apply(Request{Op: OpKillRegion, Region: region})
}
func (r *Remote) FreezeRegion(region string) error {
	return r.apply(Request{Op: OpFreezeRegion, Region: region})
}
func (r *Remote) ThawRegion(region string) error {
	return r.apply(Request{Op: OpThawRegion, Region: region})
}
func (r *Remote) RestartRegion(region string) error {
	return r.apply(Request{Op: OpRestartRegion, Region: region})
}
func (r *Remote) Cut(a, b string) error  { return r.apply(Request{Op: OpCut, A: a, B: b}) }
func (r *Remote) Heal(a, b string) error { return r.apply(Request{Op: OpHeal, A: a, B: b}) }

// Nodes lists the mesh's nodes and their states.
func (r *Remote) Nodes() ([]NodeInfo, error) {
	var v struct {
		Nodes []NodeInfo `json:"nodes"`
	}
	if err := r.do(http.MethodGet, "/v1/nodes", nil, &v); err != nil {
		return nil, err
	}
	if v.Nodes == nil {
		return nil, errors.New("harness: fault socket answered no node list")
	}
	return v.Nodes, nil
}
