package ociimage

import (
	"archive/tar"
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stepwise-dev/stepwise/pkg/plugin/signature"
)

// entry is a file of an image as its layer holds it.
type entry struct {
	mode     int64
	uid, gid int
	dir      bool
	data     string
}

// inputs writes fake binaries: the operator, two plugins with their SHA256SUMS, a CA bundle.
func inputs(t *testing.T) (operator, plugins, ca string) {
	t.Helper()
	dir := t.TempDir()
	plugins = filepath.Join(dir, "plugins")
	require.NoError(t, os.MkdirAll(plugins, 0o755))
	write := func(path, data string) {
		require.NoError(t, os.WriteFile(path, []byte(data), 0o755))
	}
	operator, ca = filepath.Join(dir, "stepwise-operator"), filepath.Join(dir, "ca.crt")
	write(operator, "operator")
	write(filepath.Join(dir, "stepwise-copy"), "copy")
	write(ca, "certificates")
	write(filepath.Join(plugins, "stepwise-plugin-aws"), "aws")
	write(filepath.Join(plugins, "stepwise-plugin-vsphere"), "vsphere")
	write(filepath.Join(plugins, "SHA256SUMS"), "sums")
	write(filepath.Join(plugins, "README"), "not a plugin")
	return operator, plugins, ca
}

// readArchive reads the one image of an OCI archive, and its files.
func readArchive(t *testing.T, archive string) (v1.Image, map[string]entry, map[string]string) {
	t.Helper()
	dir := t.TempDir()
	f, err := os.Open(archive)
	require.NoError(t, err)
	defer func() { _ = f.Close() }()
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		target := filepath.Join(dir, hdr.Name)
		if hdr.Typeflag == tar.TypeDir {
			require.NoError(t, os.MkdirAll(target, 0o755))
			continue
		}
		require.NoError(t, os.MkdirAll(filepath.Dir(target), 0o755))
		data, err := io.ReadAll(tr)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(target, data, 0o644))
	}
	p, err := layout.FromPath(dir)
	require.NoError(t, err)
	index, err := p.ImageIndex()
	require.NoError(t, err)
	manifest, err := index.IndexManifest()
	require.NoError(t, err)
	require.Len(t, manifest.Manifests, 1)
	img, err := index.Image(manifest.Manifests[0].Digest)
	require.NoError(t, err)

	layers, err := img.Layers()
	require.NoError(t, err)
	require.Len(t, layers, 1, "one layer on an empty base")
	rc, err := layers[0].Uncompressed()
	require.NoError(t, err)
	defer func() { _ = rc.Close() }()
	files := map[string]entry{}
	lt := tar.NewReader(rc)
	for {
		hdr, err := lt.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		data, err := io.ReadAll(lt)
		require.NoError(t, err)
		files["/"+strings.TrimSuffix(hdr.Name, "/")] = entry{mode: hdr.Mode, uid: hdr.Uid, gid: hdr.Gid, dir: hdr.Typeflag == tar.TypeDir, data: string(data)}
	}
	return img, files, manifest.Manifests[0].Annotations
}

func TestTheOperatorsImage(t *testing.T) {
	operator, plugins, ca := inputs(t)
	s, err := OperatorSpec(operator, plugins, ca)
	require.NoError(t, err)
	out := filepath.Join(t.TempDir(), "images", "operator.tar")
	written, err := WriteArchive(s, "amd64", "registry.example/stepwise-operator:v1", out)
	require.NoError(t, err)

	img, files, annotations := readArchive(t, out)
	digest, err := img.Digest()
	require.NoError(t, err)
	assert.Equal(t, digest, written, "the digest of the image written")
	assert.Equal(t, "registry.example/stepwise-operator:v1", annotations["io.containerd.image.name"])
	assert.Equal(t, "v1", annotations["org.opencontainers.image.ref.name"])

	cfg, err := img.ConfigFile()
	require.NoError(t, err)
	assert.Equal(t, "65532:65532", cfg.Config.User)
	assert.Equal(t, []string{"/usr/local/bin/stepwise-operator"}, cfg.Config.Entrypoint)
	assert.Equal(t, []string{"--plugin-dir=/usr/local/lib/stepwise/plugins"}, cfg.Config.Cmd)
	assert.Equal(t, map[string]struct{}{"8080/tcp": {}, "8081/tcp": {}}, cfg.Config.ExposedPorts)
	assert.Equal(t, "linux", cfg.OS)
	assert.Equal(t, "amd64", cfg.Architecture)

	assert.Equal(t, entry{mode: 0o1777, uid: 65532, gid: 65532, dir: true}, files["/tmp"], "the plugins' sockets")
	assert.Equal(t, entry{mode: 0o755, data: "operator"}, files["/usr/local/bin/stepwise-operator"])
	assert.Equal(t, entry{mode: 0o755, data: "copy"}, files["/usr/local/bin/stepwise-copy"])
	assert.Equal(t, entry{mode: 0o755, data: "aws"}, files["/usr/local/lib/stepwise/plugins/stepwise-plugin-aws"])
	assert.Equal(t, entry{mode: 0o644, data: "sums"}, files["/usr/local/lib/stepwise/plugins/SHA256SUMS"])
	assert.Equal(t, entry{mode: 0o644, data: "certificates"}, files["/etc/ssl/certs/ca-certificates.crt"])
	assert.NotContains(t, files, "/usr/local/lib/stepwise/plugins/README", "only plugins and their sums")
	for path, e := range files {
		if path == "/tmp" {
			continue
		}
		assert.Zero(t, e.uid, "%s is root's: the user cannot change it", path)
		assert.Zero(t, e.mode&0o022, "%s is writable by no one but its owner", path)
	}

	// The same binaries make the same image.
	again := filepath.Join(t.TempDir(), "again.tar")
	_, err = WriteArchive(s, "amd64", "registry.example/stepwise-operator:v1", again)
	require.NoError(t, err)
	img2, _, _ := readArchive(t, again)
	digest2, err := img2.Digest()
	require.NoError(t, err)
	assert.Equal(t, digest, digest2)
	assertSameFile(t, out, again, "the same archive, byte for byte")
}

func TestAPluginsOwnImage(t *testing.T) {
	_, plugins, _ := inputs(t)
	out := filepath.Join(t.TempDir(), "plugin.tar")
	_, err := WriteArchive(PluginSpec(filepath.Join(plugins, "stepwise-plugin-aws")), "arm64", "stepwise-plugin-aws:v1", out)
	require.NoError(t, err)
	img, files, annotations := readArchive(t, out)
	assert.Equal(t, "stepwise-plugin-aws:v1", annotations["io.containerd.image.name"])
	assert.Equal(t, map[string]entry{"/stepwise-plugin-aws": {mode: 0o755, data: "aws"}}, files, "the binary alone")
	cfg, err := img.ConfigFile()
	require.NoError(t, err)
	assert.Equal(t, "65532:65532", cfg.Config.User)
	assert.Equal(t, []string{"/stepwise-plugin-aws"}, cfg.Config.Entrypoint)
	assert.Equal(t, "arm64", cfg.Architecture)
	assert.Empty(t, cfg.Config.Cmd)
	assert.Empty(t, cfg.Config.ExposedPorts)
}

// TestASignedPluginsOwnImage: a binary signed with SignPlugin has its image hold the
// signature next to it, which passes the author's key as the operator checks it.
func TestASignedPluginsOwnImage(t *testing.T) {
	_, plugins, _ := inputs(t)
	private, public, err := signature.Keygen()
	require.NoError(t, err)
	key := filepath.Join(t.TempDir(), "stepwise-signing.key")
	require.NoError(t, os.WriteFile(key, private, 0o600))
	binary := filepath.Join(plugins, "stepwise-plugin-aws")
	signed, err := SignPlugin(t.Context(), binary, key)
	require.NoError(t, err)
	assert.Equal(t, sha256.Sum256([]byte("aws")), signed, "the SHA-256 of what it signed")
	out := filepath.Join(t.TempDir(), "plugin.tar")
	_, err = WriteArchive(PluginSpec(binary), "amd64", "stepwise-plugin-aws:v1", out)
	require.NoError(t, err)
	_, files, _ := readArchive(t, out)
	require.Contains(t, files, "/stepwise-plugin-aws.sigstore.json", "the signature, next to the binary")
	assert.Equal(t, int64(0o644), files["/stepwise-plugin-aws.sigstore.json"].mode)

	verifier, err := signature.NewVerifier("")
	require.NoError(t, err)
	digest := sha256.Sum256([]byte(files["/stepwise-plugin-aws"].data))
	assert.NoError(t, verifier.Verify(signature.Policy{PublicKey: string(public)}, []byte(files["/stepwise-plugin-aws.sigstore.json"].data), digest[:]))

	_, err = SignPlugin(t.Context(), binary, filepath.Join(t.TempDir(), "missing.key"))
	assert.ErrorContains(t, err, "read the signing key")
	_, err = SignPlugin(t.Context(), filepath.Join(plugins, "stepwise-plugin-missing"), key)
	assert.ErrorContains(t, err, "read the plugin to sign")
}

// TestWhatIsMissing: a file the image needs and cannot read fails the build, naming it,
// and writes no archive.
func TestWhatIsMissing(t *testing.T) {
	operator, plugins, ca := inputs(t)
	require.NoError(t, os.Remove(filepath.Join(filepath.Dir(operator), "stepwise-copy")))
	s, err := OperatorSpec(operator, plugins, ca)
	require.NoError(t, err)
	out := filepath.Join(t.TempDir(), "operator.tar")
	_, err = WriteArchive(s, "amd64", "stepwise-operator:v1", out)
	assert.ErrorContains(t, err, "/usr/local/bin/stepwise-copy", "stepwise-copy is looked for next to the operator")
	assert.NoFileExists(t, out)

	_, err = OperatorSpec(operator, filepath.Join(plugins, "missing"), ca)
	assert.ErrorContains(t, err, "read the plugins")
}

// TestTheDockerfileBuildsTheSameLayout: the Dockerfile's last stage (for those with Docker)
// and this tool put the same files in the same places, with the same owner and modes where
// the Dockerfile sets them, and run the image the same way.
func TestTheDockerfileBuildsTheSameLayout(t *testing.T) {
	df := lastStage(t, "../../Dockerfile")
	operator, plugins, ca := inputs(t)
	s, err := OperatorSpec(operator, plugins, ca)
	require.NoError(t, err)

	copyRe := regexp.MustCompile(`^COPY\s+(.*?)\s*(\S+)\s+(\S+)$`)
	var destinations []string
	for _, line := range df["COPY"] {
		m := copyRe.FindStringSubmatch(line)
		require.NotNil(t, m, line)
		dest := m[3]
		destinations = append(destinations, dest)
		var covered []file
		for _, f := range s.files {
			if f.path == strings.TrimSuffix(dest, "/") || (strings.HasSuffix(dest, "/") && strings.HasPrefix(f.path, dest)) {
				covered = append(covered, f)
			}
		}
		require.NotEmpty(t, covered, "the image has nothing at %s, where the Dockerfile copies", dest)
		for _, f := range covered {
			if strings.Contains(m[1], "--chown=65532:65532") {
				assert.Equal(t, nonRoot, f.owner, f.path)
			}
			if mode := regexp.MustCompile(`--chmod=(\d+)`).FindStringSubmatch(m[1]); mode != nil {
				assert.Equal(t, mode[1], strconv.FormatInt(f.mode, 8), f.path)
			}
		}
	}
	for _, f := range s.files {
		assert.True(t, slices.ContainsFunc(destinations, func(d string) bool {
			return f.path == strings.TrimSuffix(d, "/") || (strings.HasSuffix(d, "/") && strings.HasPrefix(f.path, d))
		}), "the Dockerfile puts nothing at %s", f.path)
	}

	require.Len(t, df["USER"], 1)
	assert.Equal(t, "USER 65532:65532", df["USER"][0])
	var entrypoint, cmd []string
	require.NoError(t, json.Unmarshal([]byte(strings.TrimPrefix(df["ENTRYPOINT"][0], "ENTRYPOINT ")), &entrypoint))
	require.NoError(t, json.Unmarshal([]byte(strings.TrimPrefix(df["CMD"][0], "CMD ")), &cmd))
	assert.Equal(t, s.entrypoint, entrypoint)
	assert.Equal(t, s.cmd, cmd)
	var ports []string
	for _, p := range strings.Fields(strings.TrimPrefix(df["EXPOSE"][0], "EXPOSE ")) {
		ports = append(ports, p+"/tcp")
	}
	assert.Equal(t, s.ports, ports)
}

// assertSameFile asserts that the files a and b hold the same bytes.
func assertSameFile(t *testing.T, a, b string, msgAndArgs ...any) {
	t.Helper()
	dataA, err := os.ReadFile(a)
	require.NoError(t, err)
	dataB, err := os.ReadFile(b)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(dataA, dataB), msgAndArgs...)
}

// lastStage returns the instructions of a Dockerfile's last stage by keyword, continuation
// lines joined and comments left out.
func lastStage(t *testing.T, path string) map[string][]string {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var lines []string
	var cont string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		if strings.HasSuffix(l, "\\") {
			cont += strings.TrimSuffix(l, "\\") + " "
			continue
		}
		lines = append(lines, cont+l)
		cont = ""
	}
	start := 0
	for i, l := range lines {
		if strings.HasPrefix(l, "FROM ") {
			start = i
		}
	}
	out := map[string][]string{}
	for _, l := range lines[start+1:] {
		keyword, _, _ := strings.Cut(l, " ")
		out[keyword] = append(out[keyword], l)
	}
	return out
}
