// Command etcd runs a single-member etcd server for the local test control
// plane.
//
// It is a thin wrapper around go.etcd.io/etcd/server/v3/embed so that etcd is
// built from the Go module proxy together with the Kubernetes binaries instead
// of being downloaded as a release binary. Only the handful of flags the local
// cluster needs are exposed; everything else keeps etcd's defaults.
package main

import (
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"go.etcd.io/etcd/api/v3/version"
	"go.etcd.io/etcd/server/v3/embed"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "etcd: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		name            = flag.String("name", "default", "member name")
		dataDir         = flag.String("data-dir", "", "directory for the member's data (required)")
		listenClient    = flag.String("listen-client-urls", "http://127.0.0.1:2379", "comma-separated URLs to serve clients on")
		advertiseClient = flag.String("advertise-client-urls", "", "comma-separated client URLs to advertise (default: --listen-client-urls)")
		listenPeer      = flag.String("listen-peer-urls", "http://127.0.0.1:2380", "comma-separated URLs to serve peers on")
		advertisePeer   = flag.String("initial-advertise-peer-urls", "", "comma-separated peer URLs to advertise (default: --listen-peer-urls)")
		unsafeNoFsync   = flag.Bool("unsafe-no-fsync", false, "disable fsync (faster; loses data on a machine crash)")
		logLevel        = flag.String("log-level", "info", "debug, info, warn or error")
		quota           = flag.Int64("quota-backend-bytes", 0, "backend size quota in bytes (0: etcd's default)")
		readyTimeout    = flag.Duration("ready-timeout", 60*time.Second, "give up if the server is not ready within this time")
		showVersion     = flag.Bool("version", false, "print the version and exit")
	)
	flag.Parse()
	if *showVersion {
		fmt.Printf("etcd Version: %s\n", version.Version)
		return nil
	}
	if *dataDir == "" {
		return errors.New("--data-dir is required")
	}
	if *advertiseClient == "" {
		*advertiseClient = *listenClient
	}
	if *advertisePeer == "" {
		*advertisePeer = *listenPeer
	}

	cfg := embed.NewConfig()
	cfg.Name = *name
	cfg.Dir = *dataDir
	cfg.LogLevel = *logLevel
	cfg.LogOutputs = []string{"stderr"}
	cfg.UnsafeNoFsync = *unsafeNoFsync
	cfg.QuotaBackendBytes = *quota
	// embed.NewConfig leaves this 0 (only etcd's own flag parsing applies the 300ms
	// default), and 0 logs every single request as a slow-request warning.
	cfg.WarningUnaryRequestDuration = embed.DefaultWarningUnaryRequestDuration
	var err error
	if cfg.ListenClientUrls, err = parseURLs(*listenClient); err != nil {
		return fmt.Errorf("--listen-client-urls: %w", err)
	}
	if cfg.AdvertiseClientUrls, err = parseURLs(*advertiseClient); err != nil {
		return fmt.Errorf("--advertise-client-urls: %w", err)
	}
	if cfg.ListenPeerUrls, err = parseURLs(*listenPeer); err != nil {
		return fmt.Errorf("--listen-peer-urls: %w", err)
	}
	if cfg.AdvertisePeerUrls, err = parseURLs(*advertisePeer); err != nil {
		return fmt.Errorf("--initial-advertise-peer-urls: %w", err)
	}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return fmt.Errorf("start: %w", err)
	}
	defer e.Close()

	select {
	case <-e.Server.ReadyNotify():
		fmt.Fprintf(os.Stderr, "etcd %s ready, serving clients on %s\n", version.Version, *listenClient)
	case <-time.After(*readyTimeout):
		e.Server.Stop()
		return fmt.Errorf("server not ready after %s", *readyTimeout)
	}

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	select {
	case sig := <-sigs:
		fmt.Fprintf(os.Stderr, "etcd: received %s, shutting down\n", sig)
		return nil
	case err := <-e.Err():
		return fmt.Errorf("server error: %w", err)
	}
}

func parseURLs(s string) ([]url.URL, error) {
	var out []url.URL
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		u, err := url.Parse(part)
		if err != nil {
			return nil, err
		}
		out = append(out, *u)
	}
	if len(out) == 0 {
		return nil, errors.New("no URLs given")
	}
	return out, nil
}
