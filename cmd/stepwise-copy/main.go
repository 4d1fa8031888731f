// Command stepwise-copy copies files into a directory, and nothing else. The chart runs it
// from the operator's image, which holds it, inside each plugin's image to copy the
// plugin's binary and signature out of it on nodes without image volumes: the plugin
// image gives files only, and none of its code runs before the operator has verified it.
//
//	stepwise-copy DIR FILE...
//
// Each FILE is written to DIR under its base name (executable by all when FILE is
// executable, readable by all otherwise), through a temporary file renamed into place, so
// that a copy is whole or absent. It links nothing dynamically and reads no environment.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "stepwise-copy:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) < 2 {
		return errors.New("usage: stepwise-copy DIR FILE [FILE]")
	}
	dir := args[0]
	for _, file := range args[1:] {
		if err := copyInto(dir, file); err != nil {
			return err
		}
		fmt.Printf("copied %s into %s\n", file, dir)
	}
	return nil
}

// copyInto copies file into dir, under its base name.
func copyInto(dir, file string) (err error) {
	src, err := os.Open(file)
	if err != nil {
		return fmt.Errorf("copy %s: %w", file, err)
	}
	defer func() { _ = src.Close() }()
	info, err := src.Stat()
	if err != nil {
		return fmt.Errorf("copy %s: %w", file, err)
	}
	if !info.Mode().IsRegular() {
		return fmt.Errorf("copy %s: not a regular file", file)
	}
	mode := os.FileMode(0o444)
	if info.Mode().Perm()&0o111 != 0 {
		mode = 0o555
	}
	dst, err := os.CreateTemp(dir, "."+filepath.Base(file)+"-")
	if err != nil {
		return fmt.Errorf("copy %s into %s: %w", file, dir, err)
	}
	defer func() {
		if err != nil {
			_ = os.Remove(dst.Name())
		}
	}()
	_, copyErr := io.Copy(dst, src)
	chmodErr := dst.Chmod(mode)
	closeErr := dst.Close()
	if err := errors.Join(copyErr, chmodErr, closeErr); err != nil {
		return fmt.Errorf("copy %s into %s: %w", file, dir, err)
	}
	if err := os.Rename(dst.Name(), filepath.Join(dir, filepath.Base(file))); err != nil {
		return fmt.Errorf("copy %s into %s: %w", file, dir, err)
	}
	return nil
}
