package region

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/stratamesh/strata/internal/adminhttp"
)

// readOnlyFile in a bookie node's directory records that an operator set
// the bookie read-only, so that it stays so across restarts until lifted.
const readOnlyFile = "READ_ONLY"

// readOnlyRequest is PUT /admin/v1/bookie/read-only's body. Bookie and
// Region, when set, are the bookie the caller means: another bookie (or
// the same id in another region) answers 409, so that a wrong URL does
// not drain the wrong bookie.
type readOnlyRequest struct {
	ReadOnly *bool  `json:"read_only"`
	Bookie   string `json:"bookie,omitempty"`
	Region   string `json:"region,omitempty"`
}

// maxReadOnlyBody is the largest body PUT …/read-only reads, in bytes.
const maxReadOnlyBody = 1 << 10

// parseReadOnlyRequest parses {"read_only": true|false[, "bookie": ID][,
// "region": R]}: one JSON object, read_only required, no other field,
// nothing after it. Errors name what was wrong.
func parseReadOnlyRequest(body []byte) (readOnlyRequest, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	var req readOnlyRequest
	if err := dec.Decode(&req); err != nil {
		field := ""
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			field = te.Field
		} else if f, ok := strings.CutPrefix(err.Error(), `json: unknown field "`); ok {
			field = strings.TrimSuffix(f, `"`)
		}
		return req, &bodyError{field: field, err: fmt.Errorf("read-only body: %w", err)}
	}
	if dec.More() {
		return req, &bodyError{err: errors.New("read-only body: more than one JSON value")}
	}
	if req.ReadOnly == nil {
		return req, &bodyError{field: "read_only", err: errors.New(`read-only body: "read_only" is required`)}
	}
	return req, nil
}

// bodyError is a malformed request body and the field it is about ("" if
// none: not JSON, say).
type bodyError struct {
	field string
	err   error
}

func (e *bodyError) Error() string { return e.err.Error() }
func (e *bodyError) Unwrap() error { return e.err }

// putReadOnly answers PUT /admin/v1/bookie/read-only (BookKeeper's manual
// read-only mode, e.g. to drain a bookie before taking it away): with
// {"read_only": true} the bookie refuses new adds (CODE_READ_ONLY; ledger
// writers place other bookies), keeps serving reads and fences, and its
// registration says read-only; false lifts it (the disk threshold still
// applies). The setting survives restarts (readOnlyFile). 200 with the
// bookie's view; 400 for a bad body; 500 if the setting could not be
// recorded on disk (then nothing changed).
func (n *Node) putReadOnly(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxReadOnlyBody+1))
	if err == nil && len(body) > maxReadOnlyBody {
		err = fmt.Errorf("read-only body: more than %d bytes", maxReadOnlyBody)
	}
	var req readOnlyRequest
	if err == nil {
		req, err = parseReadOnlyRequest(body)
	}
	if err != nil {
		field := ""
		var be *bodyError
		if errors.As(err, &be) {
			field = be.field
		}
		adminhttp.WriteError(w, http.StatusBadRequest, "invalid_body", err.Error()+` (want {"read_only": true} or {"read_only": false})`, field)
		return
	}
	ro := *req.ReadOnly
	if (req.Bookie != "" && req.Bookie != n.cfg.ID) || (req.Region != "" && req.Region != n.cfg.Region) {
		meant := req.Bookie
		if req.Region != "" {
			meant = req.Region + "/" + req.Bookie
		}
		adminhttp.WriteError(w, http.StatusConflict, "wrong_bookie",
			"this is bookie "+n.cfg.Region+"/"+n.cfg.ID+", not "+meant+": nothing changed (check the URL)", "bookie")
		return
	}
	// One setting at a time: the file and the engine agree after each.
	n.readOnlyMu.Lock()
	defer n.readOnlyMu.Unlock()
	if err := setReadOnlyFile(n.dir(), ro); err != nil {
		// The file may or may not have changed: the engine follows what
		// is on disk, so that a restart changes nothing.
		now, serr := readOnlySet(n.dir())
		if serr == nil {
			n.engine.SetReadOnly(now)
			n.bookie.Registrar().Refresh()
		}
		adminhttp.WriteError(w, http.StatusInternalServerError, "internal",
			fmt.Sprintf("recording the read-only setting: %v (the bookie is read-only by an operator: %v, as on disk)", err, n.engine.ReadOnlyBySet()), "")
		return
	}
	n.engine.SetReadOnly(ro)
	n.bookie.Registrar().Refresh() // publish the new state now
	n.logger.Info("bookie read-only set by an operator", "read_only", ro)
	adminhttp.WriteJSON(w, http.StatusOK, n.localBookie())
}

// setReadOnlyFile records (ro) or removes the operator's read-only
// setting in dir, durably.
func setReadOnlyFile(dir string, ro bool) error {
	name := filepath.Join(dir, readOnlyFile)
	if ro {
		f, err := os.Create(name)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(f, "read-only set by an operator at %s\n", time.Now().UTC().Format(time.RFC3339))
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	} else if err := os.Remove(name); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// readOnlySet reports whether an operator left the bookie in dir
// read-only. Errors: the file could not be checked (not its absence).
func readOnlySet(dir string) (bool, error) {
	_, err := os.Stat(filepath.Join(dir, readOnlyFile))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("checking the operator's read-only setting: %w", err)
	}
	return true, nil
}
