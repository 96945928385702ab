package status

import (
	"github.com/stratamesh/strata/admin"
	"testing"

	"github.com/stratamesh/strata/internal/meshfile"
)

func view(node string, lan ...admin.Member) admin.MembersView {
	return admin.MembersView{Node: node, LAN: lan}
}

func m(name, state string) admin.Member { return admin.Member{Name: name, State: state} }

func TestMergeState(t *testing.T) {
	a, b, c := "r.a", "r.b", "r.c"
	cases := []struct {
		name  string
		node  string
		views []admin.MembersView
		want  string
	}{
		{"all agree alive", b, []admin.MembersView{view(a, m(a, "alive"), m(b, "alive")), view(b, m(a, "alive"), m(b, "alive"))}, "alive"},
		{"one detector says failed", c, []admin.MembersView{view(a, m(c, "failed")), view(b, m(c, "alive"))}, "failed"},
		{"self-report ignored when others know", c, []admin.MembersView{view(a, m(c, "suspect")), view(c, m(c, "alive"))}, "suspect"},
		{"only self knows itself", c, []admin.MembersView{view(a, m(a, "alive")), view(c, m(c, "alive"))}, "suspect"},
		{"single node region", a, []admin.MembersView{view(a, m(a, "alive"))}, "alive"},
		{"nobody reports it", c, []admin.MembersView{view(a, m(a, "alive"))}, "failed"},
		{"left beats alive", b, []admin.MembersView{view(a, m(b, "left")), view(c, m(b, "alive"))}, "left"},
	}
	for _, tc := range cases {
		if got := MergeState(tc.node, tc.views); got != tc.want {
			t.Errorf("%s: MergeState = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestAllAlive(t *testing.T) {
	f := &meshfile.File{Regions: []meshfile.Region{
		{Name: "x", Nodes: []meshfile.Node{{ID: "b1", Role: "broker", State: "alive"}, {ID: "k1", Role: "bookie", State: "alive"}},
			WAN: []meshfile.Member{{Name: "x.b1", State: "alive"}, {Name: "y.b1", State: "alive"}}},
		{Name: "y", Nodes: []meshfile.Node{{ID: "b1", Role: "broker", State: "alive"}},
			WAN: []meshfile.Member{{Name: "x.b1", State: "alive"}, {Name: "y.b1", State: "alive"}}},
	}}
	if !AllAlive(f) {
		t.Fatal("AllAlive = false for an all-alive mesh")
	}
	f.Regions[1].WAN[0].State = "failed"
	if AllAlive(f) {
		t.Fatal("AllAlive = true with a failed WAN member")
	}
	f.Regions[1].WAN[0].State = "alive"
	f.Regions[0].Nodes[1].State = "suspect"
	if AllAlive(f) {
		t.Fatal("AllAlive = true with a suspect node")
	}
}

func TestDetailBookie(t *testing.T) {
	base := meshfile.BookieState{Instance: "0123456789abcdef", Ledgers: 3, UsedBytes: 2 << 20, FreeBytes: 5 << 30}
	withJournal := base
	withJournal.JournalDir, withJournal.JournalFreeBytes, withJournal.JournalTotalBytes = "/mnt/nvme/k1", 1<<30, 4<<30
	readOnly := withJournal
	readOnly.ReadOnly = true
	unknown := base
	unknown.JournalDir = "/mnt/nvme/k1"
	one := base
	one.Ledgers = 1
	for _, tc := range []struct {
		name string
		b    meshfile.BookieState
		want string
	}{
		{"journal under the data dir", base, "instance 01234567, 3 ledgers, 2.0 MiB used, 5.0 GiB free"},
		{"journal_dir elsewhere", withJournal, "instance 01234567, 3 ledgers, 2.0 MiB used, 5.0 GiB free, journal /mnt/nvme/k1 1.0 GiB free"},
		{"journal space unknown", unknown, "instance 01234567, 3 ledgers, 2.0 MiB used, 5.0 GiB free, journal /mnt/nvme/k1 (space unknown)"},
		{"one ledger", one, "instance 01234567, 1 ledger, 2.0 MiB used, 5.0 GiB free"},
		{"read-only", readOnly, "instance 01234567, 3 ledgers, 2.0 MiB used, 5.0 GiB free, journal /mnt/nvme/k1 1.0 GiB free READ-ONLY"},
	} {
		b := tc.b
		if got := detail(meshfile.Node{Role: "bookie", Bookie: &b}); got != tc.want {
			t.Errorf("%s: detail %q, want %q", tc.name, got, tc.want)
		}
	}
}
