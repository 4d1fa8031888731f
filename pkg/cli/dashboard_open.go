package cli

import (
	"context"
	"fmt"
	"html"
	"os"
	"os/exec"
)

// openDashboard opens url in the default browser through open (xdg-open), without the
// token on a command line, which every local user can read in /proc: the browser is given
// a file only the user can read, which redirects to url. The file is removed by the
// function returned, once the dashboard stops.
func openDashboard(ctx context.Context, url string, open func(ctx context.Context, arg string) error) (remove func(), err error) {
	f, err := os.CreateTemp("", "stepwise-dashboard-*.html") // mode 0600
	if err != nil {
		return func() {}, fmt.Errorf("write the page that opens the dashboard: %w", err)
	}
	remove = func() { _ = os.Remove(f.Name()) }
	u := html.EscapeString(url)
	_, err = fmt.Fprintf(f, "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><meta http-equiv=\"refresh\" content=\"0;url=%s\">"+
		"<title>Stepwise dashboard</title></head><body><a href=\"%s\">Open the Stepwise dashboard</a></body></html>\n", u, u)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		remove()
		return func() {}, fmt.Errorf("write the page that opens the dashboard: %w", err)
	}
	if err := open(ctx, f.Name()); err != nil {
		remove()
		return func() {}, err
	}
	return remove, nil
}

// xdgOpen starts xdg-open with arg, by argument, never through a shell.
func xdgOpen(ctx context.Context, arg string) error {
	return exec.CommandContext(ctx, "xdg-open", arg).Start()
}
