package deploy

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"debug/elf"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// The image's promises: what it holds, who it runs as, how big it is.
const (
	imageMaxBytes   = 50 << 20
	imageUserGroup  = "65532:65532"
	imageEntrypoint = "/gateway"
)

// imageFiles is every file of the image: no shell, no package manager, no
// libraries (the binary is static).
var imageFiles = []string{
	"etc/group",
	"etc/passwd",
	"etc/ssl/certs/ca-certificates.crt",
	"gateway",
	"usr/share/doc/codemode-gateway/LICENSE",
	"usr/share/doc/codemode-gateway/NOTICE",
}

// imageUnderTest is the image `make image-test` built and names in IMAGE,
// with the engine that built it and the version it was built as.
func imageUnderTest(t *testing.T) (engine, image, version string) {
	image = os.Getenv("IMAGE")
	if image == "" {
		t.Skip("IMAGE is not set: `make image-test` builds the image and runs this test on it")
	}
	engine, version = os.Getenv("ENGINE"), os.Getenv("IMAGE_VERSION")
	if engine == "" || version == "" {
		t.Fatal("make image-test sets ENGINE and IMAGE_VERSION with IMAGE")
	}
	return engine, image, version
}

func engineOutput(t *testing.T, stdin string, engine string, args ...string) string {
	t.Helper()
	cmd := exec.Command(engine, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", engine, strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

func TestImageConfiguration(t *testing.T) {
	engine, image, _ := imageUnderTest(t)
	var inspected []struct {
		Size   int64
		Config struct {
			User       string
			Entrypoint []string
			Cmd        []string
		}
	}
	if err := json.Unmarshal([]byte(engineOutput(t, "", engine, "image", "inspect", image)), &inspected); err != nil || len(inspected) != 1 {
		t.Fatalf("%s image inspect %s: %v (%d images)", engine, image, err, len(inspected))
	}
	img := inspected[0]
	t.Logf("%s: %.1f MB", image, float64(img.Size)/(1<<20))
	if img.Size <= 0 || img.Size >= imageMaxBytes {
		t.Errorf("the image is %d bytes, want under %d", img.Size, imageMaxBytes)
	}
	if img.Config.User != imageUserGroup {
		t.Errorf("the image runs as %q, want %q", img.Config.User, imageUserGroup)
	}
	if !slices.Equal(img.Config.Entrypoint, []string{imageEntrypoint}) {
		t.Errorf("the entrypoint is %q, want [%s]", img.Config.Entrypoint, imageEntrypoint)
	}
	if want := []string{"serve", "--config", "/etc/codemode/gateway.yaml"}; !slices.Equal(img.Config.Cmd, want) {
		t.Errorf("the default arguments are %q, want %q", img.Config.Cmd, want)
	}
}

func TestImageFiles(t *testing.T) {
	engine, image, _ := imageUnderTest(t)
	archive := filepath.Join(t.TempDir(), "image.tar")
	engineOutput(t, "", engine, "image", "save", "-o", archive, image)
	files := imageLayerFiles(t, archive)

	names := slices.Sorted(func(yield func(string) bool) {
		for name := range files {
			if !yield(name) {
				return
			}
		}
	})
	if !slices.Equal(names, imageFiles) {
		t.Fatalf("the image holds %q, want exactly %q (no shell, nothing else)", names, imageFiles)
	}
	bin := files["gateway"]
	if bin.hdr.Uid != 0 || bin.hdr.Mode&0o022 != 0 || bin.hdr.Mode&0o111 == 0 {
		t.Errorf("/gateway is owned by %d with mode %o: want root's, executable, writable by nobody else", bin.hdr.Uid, bin.hdr.Mode)
	}
	f, err := elf.NewFile(bytes.NewReader(bin.data))
	if err != nil {
		t.Fatalf("/gateway: %v", err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("/gateway asks for a dynamic loader: it must be linked statically (CGO_ENABLED=0)")
		}
	}
	if want := "gateway:x:" + imageUserGroup + ":codemode gateway:/nonexistent:/sbin/nologin\n"; string(files["etc/passwd"].data) != want {
		t.Errorf("/etc/passwd is %q, want %q", files["etc/passwd"].data, want)
	}
}

// The gateway and its worker processes run as the image's user on a
// read-only root file system, with no capabilities and no network.
func TestImageRunsUnprivilegedOnAReadOnlyRoot(t *testing.T) {
	engine, image, version := imageUnderTest(t)
	locked := []string{"run", "--rm", "-i", "--read-only", "--cap-drop=ALL", "--security-opt=no-new-privileges", "--network=none", image}
	want := "gateway " + version + " (" + runtime.Version() + " linux/" + runtime.GOARCH + ", executor protocol 1)\n"
	if got := engineOutput(t, "", engine, append(locked, "version")...); got != want {
		t.Errorf("gateway version printed %q, want %q", got, want)
	}
	// `gateway run` starts a worker process, as the local backend does.
	if got := engineOutput(t, "async () => 6 * 7\n", engine, append(locked, "run", "-")...); got != "42\n" {
		t.Errorf("a program run in a worker process printed %q, want %q", got, "42\n")
	}
}

type imageFile struct {
	hdr  *tar.Header
	data []byte
}

// imageLayerFiles reads an image archive (`image save`, docker-archive or
// OCI layout, both with a manifest.json) and returns the regular files and
// links of its layers, the last layer's version of each.
func imageLayerFiles(t *testing.T, archive string) map[string]imageFile {
	t.Helper()
	blobs := map[string][]byte{}
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", archive, err)
		}
		if h.Typeflag == tar.TypeReg {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			blobs[strings.TrimPrefix(h.Name, "./")] = b
		}
	}
	var manifest []struct{ Layers []string }
	if err := json.Unmarshal(blobs["manifest.json"], &manifest); err != nil || len(manifest) != 1 {
		t.Fatalf("%s: manifest.json: %v (%d images)", archive, err, len(manifest))
	}
	files := map[string]imageFile{}
	for _, layer := range manifest[0].Layers {
		var r io.Reader = bytes.NewReader(blobs[layer])
		br := bufio.NewReader(r)
		if magic, _ := br.Peek(2); bytes.Equal(magic, []byte{0x1f, 0x8b}) {
			if r, err = gzip.NewReader(br); err != nil {
				t.Fatalf("layer %s: %v", layer, err)
			}
		} else {
			r = br
		}
		lr := tar.NewReader(r)
		for {
			h, err := lr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("layer %s: %v", layer, err)
			}
			name := strings.TrimPrefix(strings.TrimPrefix(h.Name, "./"), "/")
			if h.Typeflag == tar.TypeDir {
				continue
			}
			b, err := io.ReadAll(lr)
			if err != nil {
				t.Fatal(err)
			}
			files[name] = imageFile{hdr: h, data: b}
		}
	}
	if len(files) == 0 {
		t.Fatalf("%s: no files in %d layers", archive, len(manifest[0].Layers))
	}
	return files
}
