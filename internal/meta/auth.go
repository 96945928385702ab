package meta

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3client"
)

// enableAuth turns authentication on in a freshly started embedded etcd:
// role root, user root with password, root granted root, auth enabled. It
// talks to the server in-process (no network, no credentials needed while
// auth is off). With auth already on it does nothing.
func enableAuth(ctx context.Context, e *embed.Etcd, password string) error {
	if e.Server.AuthStore().IsAuthEnabled() {
		return nil
	}
	c := v3client.New(e.Server)
	defer c.Close()
	if _, err := c.RoleAdd(ctx, RootUser); err != nil && !errors.Is(err, rpctypes.ErrRoleAlreadyExist) {
		return fmt.Errorf("add role root: %w", err)
	}
	if _, err := c.UserAdd(ctx, RootUser, password); err != nil {
		if !errors.Is(err, rpctypes.ErrUserAlreadyExist) {
			return fmt.Errorf("add user root: %w", err)
		}
		// Left by a start that stopped before enabling auth.
		if _, err := c.UserChangePassword(ctx, RootUser, password); err != nil {
			return fmt.Errorf("set root's password: %w", err)
		}
	}
	if _, err := c.UserGrantRole(ctx, RootUser, RootUser); err != nil {
		return fmt.Errorf("grant root the root role: %w", err)
	}
	if _, err := c.AuthEnable(ctx); err != nil {
		return fmt.Errorf("enable: %w", err)
	}
	return nil
}
