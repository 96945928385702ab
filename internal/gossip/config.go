package gossip

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/hashicorp/memberlist"
)

// Profile selects failure-detection and gossip timing.
type Profile string

const (
	// ProfileLAN is memberlist's LAN tuning (probe every 1 s, 500 ms probe
	// timeout): for nodes of one region in one data centre.
	ProfileLAN Profile = "lan"
	// ProfileWAN is memberlist's WAN tuning (probe every 5 s, 3 s timeout):
	// for the cross-region pool in production.
	ProfileWAN Profile = "wan"
	// ProfileLoopback is for every node on one machine (`strata up`, tests):
	// probe every 200 ms with a 100 ms timeout, so a killed node is marked
	// failed within about a second or two. Too aggressive for real networks.
	ProfileLoopback Profile = "loopback"
)

// Config configures one Pool. The zero value is not usable: set NodeName.
type Config struct {
	// NodeName is unique across the pool; Strata uses "<region>.<id>". It
	// must not contain "/": Serf rejoins failed members by joining
	// "<name>/<addr>", and memberlist splits that at the first "/".
	NodeName string
	// BindAddr is the address memberlist listens on (TCP and UDP).
	// Default "127.0.0.1".
	BindAddr string
	// BindPort is the port to listen on; 0 picks a free one, which Addr
	// reports after Start.
	BindPort int
	// AdvertiseAddr is the address other members use; default BindAddr
	// (when BindAddr is 0.0.0.0 memberlist picks a private interface).
	AdvertiseAddr string
	// Tags are published to every member (region, role, id, addresses).
	// Each pool's tags must fit memberlist's 512-byte meta limit.
	Tags map[string]string
	// Profile picks timing; default ProfileLAN.
	Profile Profile
	// SnapshotPath, when set, is a file where Serf records the members it
	// knows (Serf's snapshot). A node restarted on the same file rejoins
	// them by itself, also after a graceful leave, so a restarted member
	// finds its pool even when its seeds are gone or were never given.
	SnapshotPath string
	// SecretKey, when set, is the keyring's primary key (16, 24 or 32
	// bytes: AES-128/192/256-GCM): every gossip message is encrypted and
	// authenticated with it, and messages without it are dropped, so only
	// nodes holding the key can join or read the pool. Nil: plaintext.
	SecretKey []byte
	// Logger receives Serf and memberlist logs (their INFO at Debug level).
	// Nil discards them.
	Logger *slog.Logger
}

// Validate returns every problem with c, joined.
func (c Config) Validate() error {
	var errs []error
	if c.NodeName == "" {
		errs = append(errs, errors.New("gossip: NodeName is required"))
	}
	if strings.Contains(c.NodeName, "/") {
		errs = append(errs, fmt.Errorf("gossip: NodeName %q contains \"/\", which breaks Serf's reconnection of failed members", c.NodeName))
	}
	if c.BindPort < 0 || c.BindPort > 65535 {
		errs = append(errs, fmt.Errorf("gossip: BindPort %d is outside 0..65535", c.BindPort))
	}
	switch len(c.SecretKey) {
	case 0, 16, 24, 32:
	default:
		errs = append(errs, fmt.Errorf("gossip: SecretKey is %d bytes; want 16, 24 or 32", len(c.SecretKey)))
	}
	switch c.Profile {
	case "", ProfileLAN, ProfileWAN, ProfileLoopback:
	default:
		errs = append(errs, fmt.Errorf("gossip: unknown Profile %q (want lan, wan or loopback)", c.Profile))
	}
	return errors.Join(errs...)
}

// memberlistConfig builds memberlist's configuration for a profile.
// reclaimTime is how long a dead member's name stays bound to its old
// address before a node with another address may take it.
func reclaimTime(p Profile) time.Duration {
	switch p {
	case ProfileLoopback:
		return time.Second
	case ProfileWAN:
		return 30 * time.Second
	default:
		return 10 * time.Second
	}
}

func memberlistConfig(p Profile) *memberlist.Config {
	switch p {
	case ProfileWAN:
		return memberlist.DefaultWANConfig()
	case ProfileLoopback:
		mc := memberlist.DefaultLocalConfig()
		mc.ProbeInterval = 200 * time.Millisecond
		mc.ProbeTimeout = 100 * time.Millisecond
		mc.GossipInterval = 50 * time.Millisecond
		// Joins must reach every member within a second or so: brokers
		// route only to peers the pool lists, and bundles are placed on a
		// broker as soon as it registers. With memberlist's default
		// (RetransmitMult 2) a join's broadcast often missed some of a
		// region's 8 members, who learnt of it only at the next push/pull,
		// 6–9 s later; more retransmits and a 1 s push/pull fix that.
		mc.RetransmitMult = 4
		mc.PushPullInterval = time.Second
		mc.SuspicionMult = 2
		mc.TCPTimeout = time.Second
		return mc
	default:
		return memberlist.DefaultLANConfig()
	}
}
