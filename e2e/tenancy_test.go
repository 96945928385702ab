package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/stratamesh/strata/admin"
	"github.com/stratamesh/strata/internal/testutil"
	"github.com/stratamesh/strata/tenancy"
)

// tenancyMesh is three regions with admin authorization on: the
// superuser's token is superToken (its hash in the file). The topology
// names only the demo tenant; everything else is made at run time.
const superToken = "e2e-superuser-token"

func tenancyMesh() string {
	return geoMeshWith("tenancy", geoRegions, 500, "") + fmt.Sprintf("auth: {enabled: true, superuser_token_sha256: %s}\n", tenancy.HashSecret(superToken))
}

// adminCall is one admin API request to a region's brokers (b1, else
// b2) with token; it returns the status and body.
func (c *geoCluster) adminCall(t *testing.T, region, method, path, token, body string) (int, []byte) {
	t.Helper()
	var lastErr error
	for _, id := range []string{"b1", "b2"} {
		p := c.regions[region].brokers[id]
		if p == nil || p.exited() {
			continue
		}
		req, err := http.NewRequest(method, p.report.Admin+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := c.http.Do(req)
		if err != nil {
			lastErr = err
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, b
	}
	t.Fatalf("%s %s in %s: no broker answered: %v", method, path, region, lastErr)
	return 0, nil
}

// mustAdmin is adminCall that fails unless the status is want.
func (c *geoCluster) mustAdmin(t *testing.T, region, method, path, token, body string, want int) []byte {
	t.Helper()
	code, b := c.adminCall(t, region, method, path, token, body)
	if code != want {
		t.Fatalf("%s %s in %s: %d %s, want %d", method, path, region, code, b, want)
	}
	return b
}

// policies is a namespace's policies as region's brokers see them.
func (c *geoCluster) policies(t *testing.T, region, ns string) (admin.Policies, bool) {
	t.Helper()
	code, b := c.adminCall(t, region, http.MethodGet, "/admin/v1/namespaces/"+ns+"/policies", superToken, "")
	if code != http.StatusOK {
		return admin.Policies{}, false
	}
	var p admin.Policies
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	return p, true
}

// messages is how many messages region's copy of topic holds (-1 when
// the region does not have it).
func (c *geoCluster) messages(t *testing.T, region, topic string) int64 {
	t.Helper()
	code, b := c.adminCall(t, region, http.MethodGet, "/admin/v1/topics/"+topic+"/stats", superToken, "")
	if code != http.StatusOK {
		return -1
	}
	var v struct {
		Topic *admin.TopicStats `json:"topic"`
	}
	if err := json.Unmarshal(b, &v); err != nil || v.Topic == nil {
		return -1
	}
	return int64(v.Topic.Messages)
}

// waitFor is testutil.Eventually, logging how long it took.
func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) time.Duration {
	t.Helper()
	d := testutil.Eventually(t, what, timeout, cond)
	t.Logf("%s: %v", what, d.Round(time.Millisecond))
	return d
}

// TestTenancyAcrossRegions is the control plane end to end, on three
// regions of real processes with admin authorization on:
//   - tokens: none → 401; a tenant admin's token made in r1 works in r2
//     for its tenant and gets 403 for another's; revoked, it is refused;
//   - a tenant and namespace made through REST in r1 are used at once by
//     NATS clients in r2 and r3 (publish in r2, read in r3);
//   - a PATCH of the replication list in r2 (drop r3) stops r3 getting
//     new messages; concurrent PATCHes in r1 and r2 end with one value
//     in all three regions;
//   - r3 frozen (SIGSTOP) misses a change, and has it soon after SIGCONT;
//   - a non-empty namespace is refused deletion without force, and with
//     force is deleted with its topics in every region.
func TestTenancyAcrossRegions(t *testing.T) {
	c := startGeoCluster(t, tenancyMesh(), geoRegions)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// Authorization.
	c.mustAdmin(t, "r1", http.MethodGet, "/admin/v1/tenants", "", "", http.StatusUnauthorized)
	c.mustAdmin(t, "r1", http.MethodGet, "/admin/v1/tenants", "not-a-token", "", http.StatusUnauthorized)
	c.mustAdmin(t, "r1", http.MethodPut, "/admin/v1/tenants/acme", superToken, `{"admins": ["alice"], "quotas": {"topics": 100}}`, http.StatusCreated)
	c.mustAdmin(t, "r1", http.MethodPut, "/admin/v1/tenants/rival", superToken, `{}`, http.StatusCreated)
	var tok admin.TokenCreated
	if err := json.Unmarshal(c.mustAdmin(t, "r1", http.MethodPost, "/admin/v1/tokens", superToken, `{"tenant": "acme", "description": "e2e"}`, http.StatusCreated), &tok); err != nil {
		t.Fatal(err)
	}
	created := time.Now()
	// The tenant admin's token, made in r1, reaches r2: it may make a
	// namespace of acme there, not of rival, and not a tenant.
	waitFor(t, "a tenant-admin token made in r1 accepted in r2", 30*time.Second, func() bool {
		code, _ := c.adminCall(t, "r2", http.MethodGet, "/admin/v1/namespaces/acme", tok.Secret, "")
		return code == http.StatusOK
	})
	c.mustAdmin(t, "r2", http.MethodPut, "/admin/v1/namespaces/rival/x", tok.Secret, `{}`, http.StatusForbidden)
	c.mustAdmin(t, "r2", http.MethodPut, "/admin/v1/tenants/acme2", tok.Secret, `{}`, http.StatusForbidden)

	// A namespace made through REST in r1 is used from r2 and r3 at once.
	c.mustAdmin(t, "r1", http.MethodPut, "/admin/v1/namespaces/acme/orders", tok.Secret, `{"policies": {"bundles": 2, "retention": {"time": "1h"}}}`, http.StatusCreated)
	made := time.Now()
	js2 := geoConnect(t, c.regions["r2"].urls())
	waitFor(t, "a publish in r2 on the namespace made in r1 is stored", 30*time.Second, func() bool {
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		defer pcancel()
		_, err := js2.Publish(pctx, "acme.orders.new", []byte("o-1"))
		return err == nil
	})
	t.Logf("namespace made in r1 → first PubAck in r2: %v (token made → accepted above; %v since)", time.Since(made).Round(time.Millisecond), time.Since(created).Round(time.Millisecond))
	js3 := geoConnect(t, c.regions["r3"].urls())
	waitFor(t, "r3 reads the message published in r2", 30*time.Second, func() bool {
		st, err := js3.Stream(ctx, "acme:orders:new")
		if err != nil {
			return false
		}
		cons, err := st.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "reader", AckPolicy: jetstream.AckExplicitPolicy})
		if err != nil {
			return false
		}
		b, err := cons.Fetch(1, jetstream.FetchMaxWait(time.Second))
		if err != nil {
			return false
		}
		for m := range b.Messages() {
			return string(m.Data()) == "o-1"
		}
		return false
	})

	// Drop r3 from the replication list in r2: r3 stops getting new
	// messages once r1 and r2 have the change.
	c.mustAdmin(t, "r2", http.MethodPatch, "/admin/v1/namespaces/acme/orders/policies", tok.Secret, `{"replication": ["r1", "r2"]}`, http.StatusOK)
	waitFor(t, "r1 and r2 stop replicating to r3", 30*time.Second, func() bool {
		for _, r := range []string{"r1", "r2"} {
			p, ok := c.policies(t, r, "acme/orders")
			if !ok || !slices.Equal(p.Replication, []string{"r1", "r2"}) {
				return false
			}
			code, b := c.adminCall(t, r, http.MethodGet, "/admin/v1/topics/acme/orders/new/stats", superToken, "")
			var v struct {
				Topic *admin.TopicStats `json:"topic"`
			}
			if code != http.StatusOK || json.Unmarshal(b, &v) != nil || v.Topic == nil || v.Topic.Replication == nil {
				return false
			}
			for _, cur := range v.Topic.Replication.Cursors {
				if cur.Remote == "r3" {
					return false
				}
			}
		}
		return true
	})
	js1 := geoConnect(t, c.regions["r1"].urls())
	for i := 2; i <= 4; i++ {
		if _, err := js1.Publish(ctx, "acme.orders.new", []byte(fmt.Sprintf("o-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "r2 has r1's new messages", 30*time.Second, func() bool { return c.messages(t, "r2", "acme/orders/new") == 4 })
	if n := c.messages(t, "r3", "acme/orders/new"); n != 1 {
		t.Fatalf("r3, out of the replication list, holds %d messages; want the 1 from before", n)
	}

	// Concurrent PATCHes in r1 and r2: one value everywhere.
	var wg sync.WaitGroup
	for i, r := range []string{"r1", "r2"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.mustAdmin(t, r, http.MethodPatch, "/admin/v1/namespaces/acme/orders/policies", tok.Secret, fmt.Sprintf(`{"max_consumers": %d}`, 10+i), http.StatusOK)
		}()
	}
	wg.Wait()
	var agreed int
	waitFor(t, "the three regions agree after concurrent PATCHes", 30*time.Second, func() bool {
		var vals []int
		for _, r := range geoRegions {
			p, ok := c.policies(t, r, "acme/orders")
			if !ok {
				return false
			}
			vals = append(vals, p.MaxConsumers)
		}
		agreed = vals[0]
		return (vals[0] == 10 || vals[0] == 11) && vals[1] == vals[0] && vals[2] == vals[0]
	})
	t.Logf("concurrent PATCHes: every region has max_consumers %d", agreed)

	// r3 frozen misses a change and converges once it resumes.
	r3 := c.regions["r3"]
	freeze := func(sig syscall.Signal) {
		r3.meta.signal(sig)
		for _, p := range r3.bookies {
			p.signal(sig)
		}
		r3.signalBrokers(sig)
	}
	freeze(syscall.SIGSTOP)
	c.mustAdmin(t, "r1", http.MethodPatch, "/admin/v1/namespaces/acme/orders/policies", tok.Secret, `{"retention": {"time": "2h"}}`, http.StatusOK)
	c.mustAdmin(t, "r1", http.MethodPut, "/admin/v1/namespaces/acme/audit", tok.Secret, `{}`, http.StatusCreated)
	waitFor(t, "r2 has the change made while r3 is frozen", 30*time.Second, func() bool {
		p, ok := c.policies(t, "r2", "acme/orders")
		return ok && p.Retention.Time == 2*tenancy.Hour
	})
	freeze(syscall.SIGCONT)
	waitFor(t, "r3 converges after SIGCONT", 60*time.Second, func() bool {
		p, ok := c.policies(t, "r3", "acme/orders")
		_, audit := c.policies(t, "r3", "acme/audit")
		return ok && audit && p.Retention.Time == 2*tenancy.Hour && p.MaxConsumers == agreed
	})

	// A namespace whose only topics are in another region is not empty
	// either: r1 asks the other regions before deleting it.
	c.mustAdmin(t, "r1", http.MethodPut, "/admin/v1/namespaces/acme/onlyr3", tok.Secret, `{"policies": {"replication": ["r3"]}}`, http.StatusCreated)
	waitFor(t, "a publish in r3 on the namespace replicated to r3 only is stored", 30*time.Second, func() bool {
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		defer pcancel()
		_, err := js3.Publish(pctx, "acme.onlyr3.precious", []byte("keep me"))
		return err == nil
	})
	code, body := c.adminCall(t, "r1", http.MethodDelete, "/admin/v1/namespaces/acme/onlyr3", tok.Secret, "")
	if code != http.StatusConflict || !strings.Contains(string(body), "r3: precious") {
		t.Fatalf("delete in r1 of a namespace whose topic is in r3 only, without force: %d %s", code, body)
	}
	if n := c.messages(t, "r3", "acme/onlyr3/precious"); n != 1 {
		t.Fatalf("r3's topic holds %d messages after the refused delete", n)
	}

	// A non-empty namespace: refused without force; with force, gone
	// with its topics in every region.
	code, body = c.adminCall(t, "r1", http.MethodDelete, "/admin/v1/namespaces/acme/orders", tok.Secret, "")
	var eb admin.ErrorBody
	if code != http.StatusConflict || json.Unmarshal(body, &eb) != nil || eb.Error.Code != admin.CodeNotEmpty {
		t.Fatalf("delete of a non-empty namespace without force: %d %s", code, body)
	}
	var op admin.OperationAnswer
	if err := json.Unmarshal(c.mustAdmin(t, "r1", http.MethodDelete, "/admin/v1/namespaces/acme/orders?force=true", tok.Secret, "", http.StatusAccepted), &op); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the namespace and its topics are gone from every region", 60*time.Second, func() bool {
		for _, r := range geoRegions {
			if _, ok := c.policies(t, r, "acme/orders"); ok || c.messages(t, r, "acme/orders/new") != -1 {
				return false
			}
		}
		return true
	})
	waitFor(t, "the deletion's operation is done", 30*time.Second, func() bool {
		code, b := c.adminCall(t, "r1", http.MethodGet, "/admin/v1/operations/"+op.Operation.ID, superToken, "")
		var cur admin.OperationAnswer
		return code == http.StatusOK && json.Unmarshal(b, &cur) == nil && cur.Operation.State == admin.OperationDone && cur.Operation.Done == cur.Operation.Total
	})
	pctx, pcancel := context.WithTimeout(ctx, 3*time.Second)
	defer pcancel()
	if _, err := js2.Publish(pctx, "acme.orders.new", []byte("after")); err == nil {
		t.Fatal("a publish into the deleted namespace was stored")
	}

	// Revoked in r2, the token is refused in r1.
	c.mustAdmin(t, "r2", http.MethodDelete, "/admin/v1/tokens/"+tok.ID, superToken, "", http.StatusNoContent)
	waitFor(t, "a token revoked in r2 is refused in r1", 30*time.Second, func() bool {
		code, _ := c.adminCall(t, "r1", http.MethodGet, "/admin/v1/namespaces/acme", tok.Secret, "")
		return code == http.StatusUnauthorized
	})
}
