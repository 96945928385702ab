package e2e

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/fsouza/fake-gcs-server/fakestorage"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/stratamesh/strata/admin"
	"github.com/stratamesh/strata/internal/testutil"
)

// TestTieredRegions: three regions, each offloading to a different tier
// kind — r1 a directory (fs), r2 S3 (an in-process gofakes3 over HTTP),
// r3 GCS (an in-process fake-gcs-server over HTTP) — with 20-entry
// ledgers, offload threshold 0 and deletion lag 0. Messages published in
// r1 replicate to r2 and r3; every region offloads its closed ledgers
// and deletes their bookie copies; a new consumer in each region then
// reads everything from the earliest position, in order, from the tiers.
func TestTieredRegions(t *testing.T) {
	s3srv := httptest.NewServer(gofakes3.New(s3mem.New()).Server())
	t.Cleanup(s3srv.Close)
	if err := createS3Bucket(s3srv.URL, "strata-r2"); err != nil {
		t.Fatal(err)
	}
	gcs, err := fakestorage.NewServerWithOptions(fakestorage.Options{Scheme: "http", Host: "127.0.0.1", PublicHost: "127.0.0.1", StorageRoot: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gcs.Stop)
	gcs.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: "strata-r3"})
	gcsURL, _ := url.Parse(gcs.URL())
	// The nodes find credentials the standard way: the environment.
	t.Setenv("AWS_ACCESS_KEY_ID", "e2e")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "e2e-secret")
	t.Setenv("STORAGE_EMULATOR_HOST", gcsURL.Host)
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")

	var b strings.Builder
	b.WriteString("mesh: e2e-tiers\ndefaults:\n  ledger: {ensemble: 2, write_quorum: 2, ack_quorum: 2}\n")
	b.WriteString("  rollover: {max_entries: 20}\n  jetstream: {tenant: demo, namespace: streams}\nregions:\n")
	b.WriteString("  - {name: r1, brokers: 2, bookies: 3, tier: {kind: fs}}\n")
	fmt.Fprintf(&b, "  - {name: r2, brokers: 2, bookies: 3, tier: {kind: s3, bucket: strata-r2, prefix: mesh/, region: us-east-1, endpoint: %q, path_style: true}}\n", s3srv.URL)
	fmt.Fprintf(&b, "  - {name: r3, brokers: 2, bookies: 3, tier: {kind: gcs, bucket: strata-r3, prefix: mesh/, endpoint: %q}}\n", gcs.URL())
	b.WriteString("tenants:\n  - name: demo\n    namespaces:\n      - name: streams\n      - name: geo\n        bundles: 2\n")
	b.WriteString("        offload: {threshold: 0, deletion_lag: 0s}\n")
	c := startGeoCluster(t, b.String(), geoRegions)

	const n = 300
	js1 := geoConnect(t, c.regions["r1"].urls())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for i := 1; i <= n; i++ {
		if _, err := js1.Publish(ctx, "demo.geo.tiers", []byte(fmt.Sprintf("t-%04d", i))); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	c.waitConverged(t, geoRegions, "demo/geo/tiers", n, 90*time.Second)

	// Every region offloads its closed ledgers (about 15 of 20 entries
	// each; an entry may batch several messages) and drops their bookie
	// copies.
	for _, r := range geoRegions {
		var st *admin.OffloadStatus
		testutil.Eventually(t, r+": closed ledgers on the tier only", 90*time.Second, func() bool {
			st = c.offloadStatus(r, "demo/geo/tiers")
			if st == nil || st.OffloadedLedgers == 0 {
				return false
			}
			for _, l := range st.Ledgers {
				if l.Where != "tier" && l.Where != "open" {
					return false
				}
			}
			return true
		})
		if !st.Tier || st.LastError != "" {
			t.Fatalf("%s: offload status %+v", r, st)
		}
		t.Logf("%s: %d ledgers offloaded, %d bytes in the tier", r, st.OffloadedLedgers, st.OffloadedBytes)
	}

	// The objects are where each region's tier says.
	if objs, err := listS3(s3srv.URL, "strata-r2", "mesh/r2/demo/geo/tiers/"); err != nil || len(objs) < 2 {
		t.Fatalf("S3 bucket holds %v (%v)", objs, err)
	}
	gobjs, _, err := gcs.ListObjectsWithOptions("strata-r3", fakestorage.ListOptions{Prefix: "mesh/r3/demo/geo/tiers/"})
	if err != nil || len(gobjs) < 2 {
		t.Fatalf("GCS bucket holds %d objects (%v)", len(gobjs), err)
	}
	for _, r := range geoRegions {
		u := c.tierUsage(r)
		if u == nil || u.Objects < 2 || u.Bytes == 0 || u.Error != "" {
			t.Fatalf("%s: /admin/v1/tier %+v", r, u)
		}
	}

	// The CLI shows it, and a requested offload with nothing left to
	// copy ends at once.
	admin := c.regions["r2"].brokers["b1"].report.Admin
	out, errOut, code := strata(t, "admin", "topics", "offload-status", "demo/geo/tiers", "--url", admin)
	if code != 0 || !strings.Contains(out, "offloaded") || !strings.Contains(out, "\ttier") && !strings.Contains(out, " tier ") {
		t.Fatalf("offload-status: exit %d\n%s\n%s", code, out, errOut)
	}
	out, errOut, code = strata(t, "admin", "topics", "offload", "demo/geo/tiers", "--wait", "--url", admin)
	if code != 0 || !strings.Contains(out, "offloaded") {
		t.Fatalf("offload --wait: exit %d\n%s\n%s", code, out, errOut)
	}
	if _, errOut, code = strata(t, "admin", "topics", "offload", "demo/geo/tiers", "--keep", "lots", "--url", admin); code == 0 || !strings.Contains(errOut, "--keep") {
		t.Fatalf("offload --keep lots: exit %d, %s", code, errOut)
	}

	// A new consumer in each region reads everything in order, the
	// offloaded ledgers from the tier.
	for _, r := range geoRegions {
		ids, _ := geoRead(t, geoConnect(t, c.regions[r].urls()), "geo:tiers", n)
		for i, id := range ids {
			if want := fmt.Sprintf("t-%04d", i+1); id != want {
				t.Fatalf("%s: message %d is %q, want %q", r, i+1, id, want)
			}
		}
	}
}

// offloadStatus asks a region's brokers for a topic's offload status.
func (c *geoCluster) offloadStatus(region, topic string) *admin.OffloadStatus {
	for _, id := range []string{"b1", "b2"} {
		p := c.regions[region].brokers[id]
		if p == nil || p.exited() {
			continue
		}
		var v struct {
			Offload *admin.OffloadStatus `json:"offload"`
		}
		if getJSON(c.http, p.report.Admin+"/admin/v1/topics/"+topic+"/offload", &v) == nil && v.Offload != nil {
			return v.Offload
		}
	}
	return nil
}

// tierUsage asks a region's brokers what its tier holds.
func (c *geoCluster) tierUsage(region string) *struct {
	Objects int    `json:"objects"`
	Bytes   int64  `json:"bytes"`
	Error   string `json:"error"`
} {
	for _, id := range []string{"b1", "b2"} {
		p := c.regions[region].brokers[id]
		if p == nil || p.exited() {
			continue
		}
		var v struct {
			Objects int    `json:"objects"`
			Bytes   int64  `json:"bytes"`
			Error   string `json:"error"`
		}
		if getJSON(c.http, p.report.Admin+"/admin/v1/tier", &v) == nil {
			return &v
		}
	}
	return nil
}

func getJSON(client *http.Client, u string, v any) error {
	resp, err := client.Get(u)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// createS3Bucket creates a bucket on the S3-compatible server at base
// (path-style PUT /bucket; gofakes3 does not check signatures).
func createS3Bucket(base, bucket string) error {
	req, err := http.NewRequest(http.MethodPut, base+"/"+bucket, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("create bucket %s: %s", bucket, resp.Status)
	}
	return nil
}

// listS3 lists the keys under prefix (ListObjectsV2, path-style).
func listS3(base, bucket, prefix string) ([]string, error) {
	resp, err := http.Get(base + "/" + bucket + "?list-type=2&prefix=" + url.QueryEscape(prefix))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var v struct {
		Contents []struct {
			Key string `xml:"Key"`
		} `xml:"Contents"`
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("list %s: %s", bucket, resp.Status)
	}
	if err := xml.NewDecoder(resp.Body).Decode(&v); err != nil {
		return nil, err
	}
	var out []string
	for _, c := range v.Contents {
		out = append(out, c.Key)
	}
	return out, nil
}
