// Command vcsim runs govmomi's vCenter simulator for `make demo`: one of its VMs is renamed
// and given the BIOS UUID that the demo's kwok Node names in its providerID, so the vSphere
// plugin has a real (simulated) VM to shut down and destroy.
//
//	vcsim serve --dir .local/vcsim --vm demo-worker-1=<uuid>   # serves until SIGTERM
//	vcsim vms --dir .local/vcsim                                # lists the VMs left
package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/vmware/govmomi"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/stepwise-dev/stepwise/test/vcsim"
)

const usage = `usage: vcsim serve|vms [flags]

  serve  run the simulator on loopback until SIGTERM, writing url, username, password and
         ca.crt (the vSphere plugin's Secret keys) into --dir
  vms    list the simulator's VMs, logging in with what serve wrote into --dir
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(ctx, os.Args[2:])
	case "vms":
		err = listVMs(ctx, os.Stdout, os.Args[2:])
	case "-h", "--help", "help":
		fmt.Print(usage)
		return
	default:
		fmt.Fprintf(os.Stderr, "unknown command %q\n\n%s", os.Args[1], usage)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "vcsim %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

// Files that serve writes into --dir, named like the keys of the plugin's credentials Secret.
const (
	fileURL      = "url"
	fileUsername = "username"
	filePassword = "password"
	fileCA       = "ca.crt"
	// fileReady appears last, once the others are complete.
	fileReady = "ready"
)

// serve runs the simulator until ctx ends.
func serve(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	dir := fs.String("dir", ".local/vcsim", "directory for url, username, password, ca.crt and ready")
	listen := fs.String("listen", "127.0.0.1:0", "address to serve on (loopback)")
	username := fs.String("username", "node-retirer@vsphere.local", "the one login the simulator accepts")
	var vms []string
	fs.Func("vm", "NAME=BIOS-UUID: rename one of the model's powered-on VMs and set its UUID (repeatable)", func(s string) error {
		if name, uuid, ok := strings.Cut(s, "="); !ok || name == "" || uuid == "" {
			return fmt.Errorf("want NAME=UUID, got %q", s)
		}
		vms = append(vms, s)
		return nil
	})
	if err := fs.Parse(args); err != nil {
		return err
	}
	password, err := randomPassword()
	if err != nil {
		return err
	}

	startCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	sim, err := vcsim.Start(startCtx, vcsim.Options{Listen: *listen, Username: *username, Password: password})
	if err != nil {
		return err
	}
	defer sim.Close(context.WithoutCancel(ctx))
	if err := nameVMs(startCtx, sim, vms); err != nil {
		return err
	}

	if err := os.MkdirAll(*dir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", *dir, err)
	}
	_ = os.Remove(filepath.Join(*dir, fileReady))
	files := []struct {
		name string
		data []byte
	}{
		{fileURL, []byte(sim.URL)}, {fileUsername, []byte(sim.Username)}, {filePassword, []byte(sim.Password)},
		{fileCA, sim.CA}, {fileReady, nil},
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(*dir, f.name), f.data, 0o600); err != nil {
			return fmt.Errorf("write %s: %w", f.name, err)
		}
	}
	fmt.Printf("vCenter simulator serving %s\n", sim.URL)
	<-ctx.Done()
	return nil
}

// nameVMs renames powered-on VMs of the model, in name order, as NAME=UUID asks; each gets
// VMware Tools running, so the plugin shuts its guest down before destroying it.
func nameVMs(ctx context.Context, sim *vcsim.Simulator, specs []string) error {
	all, err := sim.VMs(ctx)
	if err != nil {
		return err
	}
	var free []vcsim.VM
	for _, vm := range all {
		if vm.PowerState == types.VirtualMachinePowerStatePoweredOn {
			free = append(free, vm)
		}
	}
	slices.SortFunc(free, func(a, b vcsim.VM) int { return strings.Compare(a.Name, b.Name) })
	if len(specs) > len(free) {
		return fmt.Errorf("%d VMs asked for, the model has %d powered on", len(specs), len(free))
	}
	for i, spec := range specs {
		name, uuid, _ := strings.Cut(spec, "=")
		vm, err := sim.Rename(ctx, free[i], name, uuid)
		if err != nil {
			return err
		}
		if err := sim.SetToolsRunning(vm.Ref); err != nil {
			return err
		}
	}
	return nil
}

func randomPassword() (string, error) {
	b := make([]byte, 18)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("make a password: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

func listVMs(ctx context.Context, out io.Writer, args []string) error {
	fs := flag.NewFlagSet("vms", flag.ContinueOnError)
	dir := fs.String("dir", ".local/vcsim", "the directory serve wrote")
	if err := fs.Parse(args); err != nil {
		return err
	}
	read := func(name string) (string, error) {
		b, err := os.ReadFile(filepath.Join(*dir, name))
		if errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("%s is missing: is the simulator running (vcsim serve --dir %s)?", name, *dir)
		}
		return strings.TrimSpace(string(b)), err
	}
	rawURL, err := read(fileURL)
	if err != nil {
		return err
	}
	username, err := read(fileUsername)
	if err != nil {
		return err
	}
	password, err := read(filePassword)
	if err != nil {
		return err
	}
	u, err := soap.ParseURL(rawURL)
	if err != nil {
		return fmt.Errorf("parse %s: %w", rawURL, err)
	}
	u.User = url.UserPassword(username, password)

	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	// The simulator's certificate is self-signed for this run; its CA file is what the
	// plugin trusts, and this local listing skips the check.
	c, err := govmomi.NewClient(ctx, u, true)
	if err != nil {
		return fmt.Errorf("log in to %s: %w", rawURL, err)
	}
	defer func() { _ = c.Logout(context.WithoutCancel(ctx)) }()
	all, err := vcsim.ListVMs(ctx, c)
	if err != nil {
		return err
	}
	vms := slices.SortedFunc(maps.Values(all), func(a, b vcsim.VM) int { return strings.Compare(a.Name, b.Name) })
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	// tabwriter buffers until Flush, which returns any write error.
	_, _ = fmt.Fprintln(w, "NAME\tBIOS UUID\tPOWER")
	for _, vm := range vms {
		_, _ = fmt.Fprintf(w, "%s\t%s\t%s\n", vm.Name, vm.UUID, vm.PowerState)
	}
	return w.Flush()
}
