package main

import (
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

// runEtcd runs a single-member embedded etcd until SIGTERM/SIGINT.
func runEtcd(args []string) error {
	fs := flag.NewFlagSet("etcd", flag.ContinueOnError)
	dataDir := fs.String("data-dir", "", "etcd data directory (required)")
	clientURL := fs.String("listen-client-url", "http://127.0.0.1:2379", "URL to serve clients on")
	peerURL := fs.String("listen-peer-url", "http://127.0.0.1:2380", "URL to serve peers on (unused by a single member, but etcd needs one)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dataDir == "" {
		return errors.New("--data-dir is required")
	}
	client, err := url.Parse(*clientURL)
	if err != nil {
		return fmt.Errorf("parse --listen-client-url: %w", err)
	}
	peer, err := url.Parse(*peerURL)
	if err != nil {
		return fmt.Errorf("parse --listen-peer-url: %w", err)
	}

	cfg := embed.NewConfig()
	cfg.Name = "localcluster"
	cfg.Dir = *dataDir
	cfg.ListenClientUrls = []url.URL{*client}
	cfg.AdvertiseClientUrls = []url.URL{*client}
	cfg.ListenPeerUrls = []url.URL{*peer}
	cfg.AdvertisePeerUrls = []url.URL{*peer}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	// Throw-away clusters: durability is worth nothing, fsync latency is.
	cfg.UnsafeNoFsync = true
	cfg.LogLevel = "warn"

	// Register before starting so a signal during startup is not lost.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return fmt.Errorf("start etcd: %w", err)
	}
	defer e.Close()

	select {
	case <-e.Server.ReadyNotify():
		fmt.Fprintf(os.Stderr, "etcd ready, serving clients on %s\n", client)
	case <-time.After(time.Minute):
		return errors.New("etcd did not become ready within a minute")
	case s := <-sig:
		return fmt.Errorf("got %s before etcd was ready", s)
	}

	select {
	case err := <-e.Err():
		return fmt.Errorf("etcd: %w", err)
	case s := <-sig:
		fmt.Fprintf(os.Stderr, "got %s, stopping etcd\n", s)
		return nil
	}
}
