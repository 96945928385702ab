package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/stratamesh/strata/internal/testutil"
)

// adminTopicsRegion is one region of one broker and two bookies, with a
// namespace that does not auto-create topics: its topics come from the
// admin API.
const adminTopicsRegion = `mesh: e2e-admin-topics
defaults:
  ledger: {ensemble: 2, write_quorum: 2, ack_quorum: 2}
regions:
  - name: solo
    brokers: 1
    bookies: 2
tenants:
  - name: acme
    namespaces:
      - name: orders
        auto_create_topics: false
`

// TestAdminTopicLifecycle: a topic created with `strata admin topics
// create` (PUT /admin/v1/topics/…), five messages published into it with
// nats.go, a DELETE without force refused (409 not_empty), the durable
// subscription reset to seq 3 with `strata admin topics
// reset-subscription` delivering 3, 4, 5 again, and `strata admin topics
// delete --force` removing it (stream not found).
func TestAdminTopicLifecycle(t *testing.T) {
	dir := t.TempDir()
	dataDir := filepath.Join(dir, "data")
	up := startUp(t, dataDir, "-f", writeTopology(t, dir, "mesh.yaml", adminTopicsRegion))
	live, _ := waitAlive(t, up, "the mesh alive")
	admin := live.Node("solo", "b1").Admin
	natsURLs, err := live.NATSURLs("solo")
	if err != nil {
		t.Fatal(err)
	}
	cli := func(args ...string) (string, string, int) {
		return strata(t, append(append([]string{"admin", "topics"}, args...), "--data-dir", dataDir, "--timeout", "10s")...)
	}
	call := func(method, path, body string) (int, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest(method, admin+path, strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var v map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&v)
		return resp.StatusCode, v
	}
	errOf := func(v map[string]any) (code, field string) {
		e, _ := v["error"].(map[string]any)
		code, _ = e["code"].(string)
		field, _ = e["field"].(string)
		return code, field
	}
	const topic = "acme/orders/created"
	const stream = "acme:orders:created"

	// Refused before anything is created.
	if st, v := call(http.MethodPut, "/admin/v1/topics/"+topic, `{"partitions": 3}`); st != 400 {
		t.Fatalf("PUT with partitions 3: %d %v; want 400", st, v)
	} else if code, field := errOf(v); code != "invalid_body" || field != "partitions" {
		t.Fatalf("PUT with partitions 3: %v; want invalid_body naming partitions", v)
	}
	if st, v := call(http.MethodPut, "/admin/v1/topics/acme/nosuch/created", ""); st != 404 {
		t.Fatalf("PUT in a namespace that does not exist: %d %v; want 404", st, v)
	} else if code, _ := errOf(v); code != "namespace_not_found" {
		t.Fatalf("PUT in a namespace that does not exist: %v; want namespace_not_found", v)
	}

	// Create, twice: 201 then 200 (the CLI's --json is the API's answer).
	var created struct {
		Created bool `json:"created"`
		Topic   struct {
			Stream   string   `json:"stream"`
			Subjects []string `json:"subjects"`
		} `json:"topic"`
	}
	out, errOut, code := cli("create", topic, "--json")
	if code != 0 || json.Unmarshal([]byte(out), &created) != nil || !created.Created || created.Topic.Stream != "orders:created" {
		t.Fatalf("topics create: exit %d\n%s%s", code, out, errOut)
	}
	if out, errOut, code := cli("create", topic, "--json"); code != 0 || !strings.Contains(out, `"created": false`) {
		t.Fatalf("topics create again: exit %d\n%s%s", code, out, errOut)
	}
	if out, errOut, code := cli("create-subscription", topic, "proc"); code != 0 || !strings.Contains(out, "proc") {
		t.Fatalf("create-subscription: exit %d\n%s%s", code, out, errOut)
	}

	_, js := jsConnect(t, natsURLs...)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i := 1; i <= 5; i++ {
		testutil.Eventually(t, fmt.Sprintf("a PubAck for message %d", i), 20*time.Second, func() bool {
			pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
			defer pcancel()
			ack, err := js.Publish(pctx, "acme.orders.created", []byte(fmt.Sprint(i)), jetstream.WithMsgID(fmt.Sprint("m", i)))
			if err == nil && ack.Sequence != uint64(i) {
				t.Fatalf("message %d stored at seq %d", i, ack.Sequence)
			}
			return err == nil
		})
	}
	read := func(want string) {
		t.Helper()
		cons, err := js.Consumer(ctx, stream, "proc")
		if err != nil {
			t.Fatal(err)
		}
		batch, err := cons.Fetch(6, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for m := range batch.Messages() {
			md, err := m.Metadata()
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, fmt.Sprint(md.Sequence.Stream))
			if err := m.DoubleAck(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if g := strings.Join(got, ","); g != want {
			t.Fatalf("subscription proc read seqs %s; want %s", g, want)
		}
	}
	read("1,2,3,4,5")

	// Not empty: refused without force, through the API and the CLI.
	if st, v := call(http.MethodDelete, "/admin/v1/topics/"+topic, ""); st != 409 {
		t.Fatalf("DELETE without force: %d %v; want 409", st, v)
	} else if code, _ := errOf(v); code != "not_empty" || !strings.Contains(fmt.Sprint(v), "5 stored messages") || !strings.Contains(fmt.Sprint(v), "proc") {
		t.Fatalf("DELETE without force: %v; want not_empty naming 5 messages and subscription proc", v)
	}
	if st, v := call(http.MethodDelete, "/admin/v1/topics/"+topic+"?force=maybe", ""); st != 400 {
		t.Fatalf("DELETE with force=maybe: %d %v; want 400", st, v)
	}
	if out, errOut, code := cli("delete", topic); code == 0 || !strings.Contains(out+errOut, "not_empty") {
		t.Fatalf("topics delete without --force: exit %d\n%s%s", code, out, errOut)
	}

	// Reset to seq 3: delivery restarts there.
	if st, v := call(http.MethodPut, "/admin/v1/topics/"+topic+"/subscriptions/proc", `{"reset_to": {"seq": 3, "time": "2025-01-01T00:00:00Z"}}`); st != 400 {
		t.Fatalf("reset with seq and time: %d %v; want 400", st, v)
	} else if _, field := errOf(v); field != "reset_to" {
		t.Fatalf("reset with seq and time: %v; want it to name reset_to", v)
	}
	if out, errOut, code := cli("reset-subscription", topic, "proc", "--seq", "3"); code != 0 || !strings.Contains(out, "proc") {
		t.Fatalf("reset-subscription --seq 3: exit %d\n%s%s", code, out, errOut)
	}
	read("3,4,5")

	// Forced: gone, here and for the JetStream API.
	if out, errOut, code := cli("delete", topic, "--force", "--json"); code != 0 || !strings.Contains(out, `"deleted": true`) {
		t.Fatalf("topics delete --force: exit %d\n%s%s", code, out, errOut)
	}
	if _, err := js.Stream(ctx, stream); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("stream %s after the deletion: %v; want stream not found", stream, err)
	}
	if st, v := call(http.MethodGet, "/admin/v1/topics/"+topic, ""); st != 404 {
		t.Fatalf("GET the deleted topic: %d %v; want 404", st, v)
	}
	if st, v := call(http.MethodDelete, "/admin/v1/topics/"+topic, ""); st != 404 {
		t.Fatalf("DELETE the deleted topic: %d %v; want 404", st, v)
	}
}
