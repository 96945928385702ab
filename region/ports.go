package region

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// portsFile remembers, in the node's data directory, the ports the node
// bound last time, so that a restarted node comes back at the same
// addresses: peers then see the same Serf member rejoin (rather than a
// second member with its name at a new address, which Serf's name-conflict
// resolution evicts), and --etcd/--join flags given to other nodes stay
// valid across a meta node's restart.
const portsFile = "ports.json"

// rememberedPorts are the ports a node bound, by service.
type rememberedPorts struct {
	Admin   int `json:"admin,omitempty"`
	SerfLAN int `json:"serf_lan,omitempty"`
	SerfWAN int `json:"serf_wan,omitempty"`
	GRPC    int `json:"grpc,omitempty"`
	NATS    int `json:"nats,omitempty"`
	Client  int `json:"etcd_client,omitempty"`
	Peer    int `json:"etcd_peer,omitempty"`
	// Failover are a broker's failover listeners' ports, by home region.
	Failover map[string]int `json:"failover,omitempty"`
}

// loadPorts reads dir/ports.json; a missing or unreadable file gives zero
// ports (bind fresh ones).
func loadPorts(dir string) rememberedPorts {
	var p rememberedPorts
	b, err := os.ReadFile(filepath.Join(dir, portsFile))
	if err == nil {
		_ = json.Unmarshal(b, &p)
	}
	return p
}

// save writes dir/ports.json (creating dir).
func (p rememberedPorts) save(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, portsFile+".tmp")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, portsFile))
}

// withPort runs start on the topology's fixed port when it has one;
// otherwise on the remembered port, falling back to a fresh one (0) when
// the remembered port cannot be bound any more (another error, say a
// bookie's cookie mismatch, is returned as it is: starting again on
// another port would only repeat it).
func withPort[T any](fixed, remembered int, start func(port int) (T, error)) (T, error) {
	if fixed != 0 || remembered == 0 {
		return start(fixed)
	}
	v, err := start(remembered)
	if err == nil || !isBindError(err) {
		return v, err
	}
	v, err2 := start(0)
	if err2 != nil {
		return v, errors.Join(fmt.Errorf("remembered port %d: %w", remembered, err), err2)
	}
	return v, nil
}

// isBindError reports whether err is a failure to bind a listening
// address: in use, not available here, or not permitted. Libraries that
// keep only the text of the listener's error (Serf's memberlist, say) are
// recognised by it.
func isBindError(err error) bool {
	if errors.Is(err, syscall.EADDRINUSE) || errors.Is(err, syscall.EADDRNOTAVAIL) || errors.Is(err, syscall.EACCES) {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, "address already in use") || strings.Contains(msg, "cannot assign requested address") ||
		strings.Contains(msg, "bind: permission denied")
}
