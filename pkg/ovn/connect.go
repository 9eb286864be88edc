package ovn

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"

	"github.com/kovn/kovn/pkg/ovn/model/clusterset"
	"github.com/kovn/kovn/pkg/ovn/model/icnb"
	"github.com/kovn/kovn/pkg/ovn/model/icsb"
	"github.com/kovn/kovn/pkg/ovn/model/nb"
	"github.com/kovn/kovn/pkg/ovn/model/sb"
	"github.com/kovn/kovn/pkg/ovn/model/vswitch"
)

// Connect returns a connected client for dbModel whose cache is filled by a monitor on
// tables (every table of the model when none are given).
//
// A database that is not up yet is not an error: kovn starts alongside OVN, so the first
// connection is retried with backoff until ctx is done. After that the client reconnects by
// itself (and re-establishes its monitor) whenever the connection drops.
func Connect(ctx context.Context, dbModel model.ClientDBModel, cfg Config, tables ...model.Model) (client.Client, error) {
	opts := make([]client.MonitorOption, 0, len(tables))
	for _, t := range tables {
		opts = append(opts, client.WithTable(t))
	}
	return ConnectMonitor(ctx, dbModel, cfg, opts...)
}

// ConnectMonitor is Connect with libovsdb monitor options, e.g. client.WithConditionalTable
// to cache only some rows of a large table (no options: every table).
func ConnectMonitor(ctx context.Context, dbModel model.ClientDBModel, cfg Config, opts ...client.MonitorOption) (client.Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	clientOpts, err := clientOptions(cfg)
	if err != nil {
		return nil, err
	}
	c, err := client.NewOVSDBClient(dbModel, clientOpts...)
	if err != nil {
		return nil, fmt.Errorf("creating %s client: %w", dbModel.Name(), err)
	}
	if err := connectWithRetry(ctx, c, dbModel.Name(), cfg); err != nil {
		return nil, err
	}
	if err := monitor(ctx, c, opts); err != nil {
		c.Close()
		return nil, fmt.Errorf("monitoring %s at %s: %w", dbModel.Name(), c.CurrentEndpoint(), err)
	}
	return c, nil
}

// clientOptions translates cfg into libovsdb options.
func clientOptions(cfg Config) ([]client.Option, error) {
	opts := make([]client.Option, 0, len(cfg.Endpoints)+4)
	for _, ep := range cfg.Endpoints {
		opts = append(opts, client.WithEndpoint(ep))
	}
	tlsCfg, err := cfg.tlsConfig()
	if err != nil {
		return nil, err
	}
	if tlsCfg != nil {
		opts = append(opts, client.WithTLSConfig(tlsCfg))
	}
	logger := cfg.Logger
	opts = append(opts,
		client.WithLeaderOnly(cfg.LeaderOnly),
		// Reconnect keeps the cache and monitors alive across DB restarts and raft leader
		// changes; transactions issued meanwhile block until reconnected or ctx is done.
		client.WithReconnect(cfg.ConnectTimeout, newBackoff(cfg.RetryInterval, cfg.MaxRetryInterval)),
		client.WithLogger(&logger),
	)
	return opts, nil
}

// connectWithRetry calls Connect until it succeeds or ctx is done. libovsdb's own reconnect
// only covers connections lost after a first success, hence this loop.
func connectWithRetry(ctx context.Context, c client.Client, db string, cfg Config) error {
	log := cfg.Logger.WithValues("database", db, "endpoints", cfg.Endpoints)
	b := newBackoff(cfg.RetryInterval, cfg.MaxRetryInterval)
	var lastErr error
	for attempt := 1; ; attempt++ {
		attemptCtx, cancel := context.WithTimeout(ctx, cfg.ConnectTimeout)
		err := c.Connect(attemptCtx)
		cancel()
		if err == nil {
			log.V(1).Info("connected to OVSDB", "endpoint", c.CurrentEndpoint(), "attempts", attempt)
			return nil
		}
		// Keep a real cause ("connection refused", "not leader") over the timeout that cut
		// short the attempt made as ctx ran out: the cause is what the operator needs.
		if lastErr == nil || !isTimeout(err) {
			lastErr = err
		}
		wait := b.NextBackOff()
		log.V(1).Info("OVSDB not reachable yet, retrying", "attempt", attempt, "retryIn", wait, "error", err.Error())
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return fmt.Errorf("connecting to %s at %s: gave up after %d attempts: %w; last error: %w",
				db, strings.Join(cfg.Endpoints, ","), attempt, ctx.Err(), lastErr)
		case <-timer.C:
		}
	}
}

// isTimeout reports whether err comes from a deadline or cancellation rather than from
// the server (net's dial timeout error matches context.DeadlineExceeded).
func isTimeout(err error) bool {
	// libovsdb wraps some causes with %v ("listdbs failure - context deadline exceeded"),
	// which errors.Is cannot see through.
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
		strings.HasSuffix(err.Error(), context.DeadlineExceeded.Error()) || strings.HasSuffix(err.Error(), context.Canceled.Error())
}

// monitor starts one monitor over tables (all tables when empty) and returns once the
// initial dump is in the cache, so callers can read right away.
func monitor(ctx context.Context, c client.Client, opts []client.MonitorOption) error {
	if len(opts) == 0 {
		_, err := c.MonitorAll(ctx)
		return err
	}
	_, err := c.Monitor(ctx, c.NewMonitor(opts...))
	return err
}

// ConnectNB connects to OVN_Northbound, monitoring every table, with kovn's client indexes
// (see NBIndexes).
func ConnectNB(ctx context.Context, cfg Config) (client.Client, error) {
	return connectFull(ctx, cfg, func() (model.ClientDBModel, error) {
		m, err := nb.FullDatabaseModel()
		if err == nil {
			m.SetIndexes(NBIndexes())
		}
		return m, err
	})
}

// ConnectSB connects to OVN_Southbound, monitoring every table. SB is large (logical flows);
// readers that need a few tables should call Connect with those tables instead.
func ConnectSB(ctx context.Context, cfg Config) (client.Client, error) {
	return connectFull(ctx, cfg, sb.FullDatabaseModel)
}

// ConnectICNB connects to OVN_IC_Northbound, monitoring every table.
func ConnectICNB(ctx context.Context, cfg Config) (client.Client, error) {
	return connectFull(ctx, cfg, icnb.FullDatabaseModel)
}

// ConnectICSB connects to OVN_IC_Southbound, monitoring every table.
func ConnectICSB(ctx context.Context, cfg Config) (client.Client, error) {
	return connectFull(ctx, cfg, icsb.FullDatabaseModel)
}

// ConnectClusterSet connects to kovn's OVN_ClusterSet database (the MCS clusterset store),
// monitoring every table.
func ConnectClusterSet(ctx context.Context, cfg Config) (client.Client, error) {
	return connectFull(ctx, cfg, clusterset.FullDatabaseModel)
}

// ConnectOVS connects to the local Open_vSwitch database, monitoring every table.
func ConnectOVS(ctx context.Context, cfg Config) (client.Client, error) {
	return connectFull(ctx, cfg, vswitch.FullDatabaseModel)
}

func connectFull(ctx context.Context, cfg Config, full func() (model.ClientDBModel, error)) (client.Client, error) {
	dbModel, err := full()
	if err != nil {
		return nil, err
	}
	return Connect(ctx, dbModel, cfg)
}
