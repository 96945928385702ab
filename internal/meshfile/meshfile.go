package meshfile

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Name is the runtime file's name inside the data directory.
const Name = "mesh.json"

// File is the content of mesh.json.
type File struct {
	Mesh      string    `json:"mesh"`
	StartedAt time.Time `json:"started_at"`
	Regions   []Region  `json:"regions"`
	// TLS is set when the mesh's listeners serve TLS: the files tools
	// connect with. Absent: every endpoint is plaintext.
	TLS *TLS `json:"tls,omitempty"`
	// FaultSocket is the unix socket of `strata up`'s fault-control
	// endpoint (package harness: kill, freeze, thaw, restart nodes and
	// regions), <data-dir>/fault.sock; absent when nothing serves one.
	FaultSocket string `json:"fault_socket,omitempty"`
}

// TLS names what a tool needs to reach a TLS mesh: the CA to trust and,
// when `strata up --secure` made one, a client certificate and key (for
// brokers that ask NATS clients for certificates).
type TLS struct {
	CAFile   string `json:"ca_file"`
	CertFile string `json:"cert_file,omitempty"`
	KeyFile  string `json:"key_file,omitempty"`
}

// Region is one region's entry.
type Region struct {
	Name string `json:"name"`
	Tier Tier   `json:"tier"`
	// NATS lists the NATS URLs of the region's brokers (what clients give
	// nats.Connect or `nats -s`, comma-joined).
	NATS []string `json:"nats,omitempty"`
	// ClientURLs is the URL list a client of this region gives its NATS
	// library for client failover, in this order and without
	// randomization: the region's brokers, then every other region's
	// brokers' failover listeners for this region (see ClientURLs).
	ClientURLs []string `json:"client_urls,omitempty"`
	// MetaPrefix is the etcd key prefix of the region's metadata (the meta
	// node's etcd is in its node entry), for tools such as ledger.Dial.
	MetaPrefix string `json:"meta_prefix,omitempty"`
	Nodes      []Node `json:"nodes"`
	// WAN is the WAN pool as seen from this region (status only).
	WAN []Member `json:"wan,omitempty"`
}

// Tier is the region's resolved offload target.
type Tier struct {
	Kind   string `json:"kind"`
	Dir    string `json:"dir,omitempty"`
	Bucket string `json:"bucket,omitempty"`
	Prefix string `json:"prefix,omitempty"`
	// Usage is what the tier holds (status only: a broker's GET
	// /admin/v1/tier; nil when none answered).
	Usage *TierUsage `json:"usage,omitempty"`
}

// TierUsage is what a region's tier holds for the region: objects (data
// and index objects of offloaded ledgers) and their bytes.
type TierUsage struct {
	Kind string `json:"kind"`
	// Ledgers is how many ledger copies (data objects) it holds; Objects
	// counts their data and index objects, Bytes the objects' sizes.
	Ledgers int    `json:"ledgers"`
	Objects int    `json:"objects"`
	Bytes   int64  `json:"bytes"`
	Error   string `json:"error,omitempty"`
}

// Node is one node's endpoints. Addresses are host:port; URLs carry their
// scheme. Empty fields are services the node does not run.
type Node struct {
	ID      string `json:"id"`
	Role    string `json:"role"`
	PID     int    `json:"pid,omitempty"`
	Etcd    string `json:"etcd,omitempty"`
	NATS    string `json:"nats,omitempty"`
	GRPC    string `json:"grpc,omitempty"`
	Admin   string `json:"admin,omitempty"`
	SerfLAN string `json:"serf_lan,omitempty"`
	SerfWAN string `json:"serf_wan,omitempty"`
	// Failover is a broker's failover listeners: by home region, the
	// nats:// URL where that region's clients connect when they lost
	// their own region (guests).
	Failover map[string]string `json:"failover,omitempty"`
	// State is the node's Serf state (alive | suspect | failed | left);
	// only in `strata status` output.
	State string `json:"state,omitempty"`
	// Ready is the node's /readyz answer (status only; absent when it did
	// not answer).
	Ready *bool `json:"ready,omitempty"`
	// Bookie is a bookie node's own state (status only).
	Bookie *BookieState `json:"bookie,omitempty"`
	// Broker is a broker node's bundles (status only).
	Broker *BrokerState `json:"broker,omitempty"`
	// Exited is set by `strata up` when the node's process ended.
	Exited string `json:"exited,omitempty"`
}

// BookieState is what `strata status` shows of a bookie: its instance
// (from its cookie), ledgers held, and disk use in bytes. Its JSON is a
// subset of a bookie node's GET /admin/v1/bookie.
type BookieState struct {
	Instance   string `json:"instance"`
	Ledgers    int    `json:"ledgers"`
	UsedBytes  int64  `json:"used_bytes"`
	FreeBytes  int64  `json:"free_bytes"`
	TotalBytes int64  `json:"total_bytes"`
	ReadOnly   bool   `json:"read_only"`
	// The journal's directory and its file system's free and total
	// bytes, when the topology names one (journal_dir); the sizes are 0
	// when the bookie could not read them.
	JournalDir        string `json:"journal_dir,omitempty"`
	JournalFreeBytes  int64  `json:"journal_free_bytes,omitempty"`
	JournalTotalBytes int64  `json:"journal_total_bytes,omitempty"`
}

// BrokerState is what `strata status` shows of a broker: the namespace
// bundles it owns (tenant/namespace/range) and their topics, from the
// region's GET /admin/v1/bundles.
type BrokerState struct {
	Bundles []string `json:"bundles"`
	Topics  int      `json:"topics"`
	// Replication sums the replicator cursors of the broker's topics per
	// remote region (from its GET /admin/v1/replication).
	Replication []ReplicationState `json:"replication,omitempty"`
	// Lost is how many messages of other origins gap records skipped in
	// the broker's topics (trimmed at their origin before replication).
	Lost uint64 `json:"lost,omitempty"`
}

// ReplicationState is a broker's replication to one remote region: how
// many topic cursors, their summed lag in messages, the oldest lag in
// seconds, the worst cursor state (stalled > backing-off > replicating)
// and whether its link to that region is up.
type ReplicationState struct {
	Remote     string  `json:"remote"`
	Cursors    int     `json:"cursors"`
	LagMsgs    uint64  `json:"lag_msgs"`
	LagSeconds float64 `json:"lag_seconds"`
	State      string  `json:"state"`
	Connected  bool    `json:"connected"`
}

// Member is a pool member as reported by a node (status only).
type Member struct {
	Name  string `json:"name"`
	Addr  string `json:"addr"`
	State string `json:"state"`
}

// ErrNotRunning is returned by Read when no mesh.json exists: no `strata up`
// has written one in that data directory.
var ErrNotRunning = errors.New("meshfile: no mesh.json (is `strata up` running with this --data-dir?)")

// Path is the mesh.json path inside dataDir.
func Path(dataDir string) string { return filepath.Join(dataDir, Name) }

// Read loads dataDir/mesh.json. It returns ErrNotRunning (wrapped) when the
// file does not exist, and a decode error naming the file otherwise.
func Read(dataDir string) (*File, error) {
	p := Path(dataDir)
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrNotRunning, p)
	}
	if err != nil {
		return nil, err
	}
	var f File
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("meshfile: %s: %w", p, err)
	}
	return &f, nil
}

// Write replaces dataDir/mesh.json atomically: readers see the old file or
// the new one, never a partial one.
func Write(dataDir string, f *File) error {
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dataDir, ".mesh-*.json")
	if err != nil {
		return fmt.Errorf("meshfile: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("meshfile: write %s: %w", tmp.Name(), err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("meshfile: sync %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), Path(dataDir)); err != nil {
		return fmt.Errorf("meshfile: %w", err)
	}
	return nil
}

// Remove deletes dataDir/mesh.json; a missing file is not an error.
func Remove(dataDir string) error {
	err := os.Remove(Path(dataDir))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// Node returns a pointer to the named region's node, or nil.
func (f *File) Node(region, id string) *Node {
	for i := range f.Regions {
		if f.Regions[i].Name != region {
			continue
		}
		for j := range f.Regions[i].Nodes {
			if f.Regions[i].Nodes[j].ID == id {
				return &f.Regions[i].Nodes[j]
			}
		}
	}
	return nil
}

// NATSURLs returns the NATS URLs of a region's brokers, for clients
// (nats.Connect, `nats -s`): those of running brokers or, when every one
// has exited, theirs all the same (an operator may have restarted them by
// hand, at the same ports). An empty region picks the first region. It
// returns an error naming the region when it is unknown or has no broker
// with a NATS endpoint.
func (f *File) NATSURLs(region string) ([]string, error) {
	if len(f.Regions) == 0 {
		return nil, errors.New("meshfile: mesh.json lists no regions")
	}
	r := &f.Regions[0]
	if region != "" {
		r = nil
		var names []string
		for i := range f.Regions {
			names = append(names, f.Regions[i].Name)
			if f.Regions[i].Name == region {
				r = &f.Regions[i]
			}
		}
		if r == nil {
			return nil, fmt.Errorf("meshfile: no region %q in mesh %s (regions: %v)", region, f.Mesh, names)
		}
	}
	var urls, exited []string
	for _, n := range r.Nodes {
		switch {
		case n.NATS == "":
		case n.Exited == "":
			urls = append(urls, n.NATS)
		default:
			exited = append(exited, n.NATS)
		}
	}
	if len(urls) == 0 {
		urls = exited
	}
	if len(urls) == 0 {
		return nil, fmt.Errorf("meshfile: region %s has no broker with a NATS endpoint", r.Name)
	}
	return urls, nil
}

// ClientURLs returns the failover URL list for clients of region: its
// brokers' NATS URLs, then, region by region in f's order, the other
// regions' brokers' failover URLs for it. Nil when f has no such region.
func ClientURLs(f *File, region string) []string {
	var own, others []string
	found := false
	for _, r := range f.Regions {
		if r.Name == region {
			found = true
			own = append(own, r.NATS...)
			continue
		}
		for _, n := range r.Nodes {
			if u := n.Failover[region]; u != "" {
				others = append(others, u)
			}
		}
	}
	if !found {
		return nil
	}
	return append(own, others...)
}
