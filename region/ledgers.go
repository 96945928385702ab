package region

import (
	"errors"
	"sync"

	"github.com/stratamesh/strata/bookie/ledger"
)

// ledgerClient opens the node's ledger client on first use (it dials
// bookies only when entries are read).
type ledgerClient struct {
	once sync.Once
	c    *ledger.Client
	err  error
}

func (n *Node) ledgers() (*ledger.Client, error) {
	n.ledgerCl.once.Do(func() {
		n.ledgerCl.c, n.ledgerCl.err = ledger.NewClient(ledger.Config{Store: n.store, Logger: n.logger,
			Transport: ledger.GRPCTransport{TLS: n.clientTLS()}})
	})
	return n.ledgerCl.c, n.ledgerCl.err
}

// closeLedgers closes the ledger client if it was opened, and keeps it
// from opening later.
func (n *Node) closeLedgers() error {
	n.ledgerCl.once.Do(func() { n.ledgerCl.err = errors.New("node stopping") })
	if n.ledgerCl.c != nil {
		return n.ledgerCl.c.Close()
	}
	return nil
}
