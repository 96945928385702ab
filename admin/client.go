package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/stratamesh/strata/internal/meshfile"
)

// Client is the client side of the admin API that `strata admin`, `strata
// status`, tools and tests use: requests with JSON bodies, answers
// decoded into this package's types, and error answers as *APIError.
// The zero Client uses http.DefaultClient and sends no token.
type Client struct {
	// HTTP sends the requests (nil: http.DefaultClient); its Timeout
	// bounds each.
	HTTP *http.Client
	// Token, when set, is sent as "Authorization: Bearer <Token>".
	Token string
}

// maxAnswerBytes bounds the answer a client reads (entries of a ledger
// read are at most MaxReadBytes, base64 and indented).
const maxAnswerBytes = 64 << 20

// APIError is an error answer of the admin API: its HTTP status and the
// error shape's fields (Code is empty when the answer was not in the
// error shape, e.g. from a proxy; Message then holds its text).
type APIError struct {
	Status  int
	Code    Code
	Message string
	Field   string
}

func (e *APIError) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("admin API: HTTP %d: %s", e.Status, e.Message)
	}
	return fmt.Sprintf("admin API: %d %s: %s", e.Status, e.Code, e.Message)
}

// Get GETs base+path and decodes a 2xx JSON answer into v.
func (c *Client) Get(ctx context.Context, base, path string, v any) error {
	return c.Send(ctx, http.MethodGet, base, path, nil, v)
}

// Post POSTs in (JSON; nil: no body) to base+path and decodes a 2xx JSON
// answer into v.
func (c *Client) Post(ctx context.Context, base, path string, in, v any) error {
	return c.Send(ctx, http.MethodPost, base, path, in, v)
}

// Send sends in (JSON; nil: no body) with method to base+path and
// decodes a 2xx JSON answer into v (nil: the answer is dropped). An
// error answer is an *APIError; anything else (the node did not answer,
// the answer is not JSON) another error.
func (c *Client) Send(ctx context.Context, method, base, path string, in, v any) error {
	var rd io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(base, "/")+path, rd)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c != nil && c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	hc := http.DefaultClient
	if c != nil && c.HTTP != nil {
		hc = c.HTTP
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	if err != nil {
		return err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		var eb ErrorBody
		if json.Unmarshal(body, &eb) == nil && eb.Error.Code != "" {
			return &APIError{Status: resp.StatusCode, Code: eb.Error.Code, Message: eb.Error.Message, Field: eb.Error.Field}
		}
		return &APIError{Status: resp.StatusCode, Message: strings.TrimSpace(string(body))}
	}
	if v == nil {
		return nil
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("admin: %s%s: %w", base, path, err)
	}
	return nil
}

// GetFirst GETs path from the first of urls that answers and decodes the
// answer into v. An API error answer is returned as is (an *APIError); a
// node that does not answer is skipped.
func (c *Client) GetFirst(ctx context.Context, urls []string, path string, v any) error {
	return c.SendFirst(ctx, http.MethodGet, urls, path, nil, v)
}

// SendFirst is Send to the first of urls that answers (an API error is an
// answer).
func (c *Client) SendFirst(ctx context.Context, method string, urls []string, path string, in, v any) error {
	if len(urls) == 0 {
		return fmt.Errorf("admin: no node to ask for %s", path)
	}
	var last error
	for _, u := range urls {
		err := c.Send(ctx, method, u, path, in, v)
		if err == nil {
			return nil
		}
		if _, ok := err.(*APIError); ok {
			return err
		}
		last = err
	}
	return fmt.Errorf("admin: no node answered %s: %w", path, last)
}

// Target is one admin endpoint to ask, for one region ("" when the region
// is not known, as with an explicit --url).
type Target struct {
	Region string
	URL    string // base URL, e.g. http://127.0.0.1:18001
	// Exited is why `strata up` saw the node's process end ("" while it
	// runs, or not known); the node may since have been restarted by
	// hand, at the same ports, so it is still worth asking.
	Exited string
}

// Targets returns, for each region of f (or only the named one), the admin
// URLs of its nodes in mesh.json order, so that a caller can fall back
// from a dead node to the next. It fails when region names no region of f.
func Targets(f *meshfile.File, region string) (map[string][]string, []string, error) {
	return RoleTargets(f, region, "")
}

// RoleTargets is Targets restricted to the nodes of one role ("" for
// every node): e.g. "broker" for the routes only brokers serve (topics).
func RoleTargets(f *meshfile.File, region, role string) (map[string][]string, []string, error) {
	urls := map[string][]string{}
	var order []string
	for _, r := range f.Regions {
		if region != "" && r.Name != region {
			continue
		}
		order = append(order, r.Name)
		var exited []string
		for _, n := range r.Nodes {
			switch {
			case n.Admin == "" || (role != "" && n.Role != role):
			case n.Exited == "":
				urls[r.Name] = append(urls[r.Name], n.Admin)
			default:
				exited = append(exited, n.Admin)
			}
		}
		if len(exited) > 0 { // last: an operator may have restarted them by hand
			urls[r.Name] = append(urls[r.Name], exited...)
		}
	}
	if region != "" && len(order) == 0 {
		var names []string
		for _, r := range f.Regions {
			names = append(names, r.Name)
		}
		return nil, nil, fmt.Errorf("mesh %s has no region %q (its regions: %s)", f.Mesh, region, strings.Join(names, ", "))
	}
	return urls, order, nil
}

// NotAnswering words err, a failure to reach t (not an API error), for
// the operator: with the node's exit from mesh.json when it has one.
func (t Target) NotAnswering(what string, err error) error {
	if t.Exited != "" {
		return fmt.Errorf("%s exited (%s, says mesh.json) and does not answer at %s: start it again, or give --url: %w", what, t.Exited, t.URL, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// NodeTarget finds node id of the given role in f (in region, or in any
// region when region is "") and returns its region and admin URL, also
// for a node that exited (see Target.Exited). Errors name what is wrong:
// no such node, no admin URL, or an id found in several regions (give the
// region).
func NodeTarget(f *meshfile.File, region, role, id string) (Target, error) {
	if region != "" {
		if _, _, err := RoleTargets(f, region, role); err != nil {
			return Target{}, err // no such region
		}
	}
	var found []string
	var url, exited string
	for _, r := range f.Regions {
		if region != "" && r.Name != region {
			continue
		}
		for _, n := range r.Nodes {
			if n.ID == id && n.Role == role {
				found = append(found, r.Name)
				url, exited = n.Admin, n.Exited
			}
		}
	}
	switch {
	case len(found) == 0 && region != "":
		return Target{}, fmt.Errorf("region %s of mesh %s has no %s %q", region, f.Mesh, role, id)
	case len(found) == 0:
		return Target{}, fmt.Errorf("mesh %s has no %s %q", f.Mesh, role, id)
	case len(found) > 1:
		return Target{}, fmt.Errorf("%s %q is in regions %s: say which with --region", role, id, strings.Join(found, ", "))
	case url == "":
		return Target{}, fmt.Errorf("%s %s/%s has no admin URL in mesh.json", role, found[0], id)
	}
	return Target{Region: found[0], URL: url, Exited: exited}, nil
}
