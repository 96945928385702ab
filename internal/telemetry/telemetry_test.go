package telemetry

import (
	"context"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestMetricsExported(t *testing.T) {
	tel, err := New(Identity{Mesh: "m", Region: "us-east", Node: "b1", Role: "broker"})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	c, err := tel.Meter("test").Int64Counter("strata.test.events")
	if err != nil {
		t.Fatal(err)
	}
	c.Add(context.Background(), 3)

	rec := httptest.NewRecorder()
	tel.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	text := string(body)
	for _, want := range []string{"strata_test_events_total", `strata_region="us-east"`, `strata_node="b1"`, "go_goroutines"} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics output lacks %q", want)
		}
	}
	if !strings.Contains(text, "} 3") {
		t.Errorf("counter value 3 not exported:\n%s", grep(text, "strata_test_events"))
	}
	if err := tel.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func grep(text, sub string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
